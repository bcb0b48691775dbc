// d2k-report-store FILE: writes the hand campaign of report_fixture.hpp into a new store at FILE, for
// tests/e2e/report_html.sh to report on with `d2k report FILE --html`.
#include <exception>
#include <iostream>

#include "report_fixture.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: d2k-report-store FILE (a new campaign.db)\n";
    return 2;
  }
  try {
    d2k::campaign::testing::write_store(d2k::campaign::testing::hand_campaign(), argv[1]);
  } catch (const std::exception& e) {
    std::cerr << "d2k-report-store: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
