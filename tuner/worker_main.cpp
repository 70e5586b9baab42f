// jitune-worker: measures tuning candidates for the jitune tuner in a separate process (see tuner/runner.hpp).
#include "tuner/runner.hpp"

int main(int argc, char** argv) { return jitune::tuner::worker_main(argc, argv); }
