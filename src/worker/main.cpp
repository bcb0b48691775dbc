// d2k-worker <request.json>: loads one solution and runs it on the request's tensors (worker.hpp).
#include "worker/worker.hpp"

int main(int argc, char** argv) { return d2k::worker_main(argc, argv); }
