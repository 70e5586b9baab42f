// A jitune-worker that also knows the test-only families (tests/support/faulty_families.hpp).
#include "tests/support/faulty_families.hpp"
#include "tuner/runner.hpp"

int main(int argc, char** argv) {
  jitune::test::register_faulty_families();
  return jitune::tuner::worker_main(argc, argv);
}
