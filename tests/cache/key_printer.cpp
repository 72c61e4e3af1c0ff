// Prints the key of the golden fields: key_test.cpp runs it to check that another process
// computes the same key as the test does.
#include "tests/support/sample_entries.hpp"

#include <cstdio>

int main() {
  std::puts(kjit::cache::key_of(kjit::testing::golden_key_fields()).hex().c_str());
  return 0;
}
