#include "cli/app.hpp"

int main(int argc, char** argv) { return d2k::run_cli(argc, argv); }
