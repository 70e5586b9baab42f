// Test-only kernel families whose kernels misbehave on purpose for certain configs (an illegal address, a trap, an
// endless loop, a wrong result), to prove the tuner survives them. Never registered in the library.
#pragma once

namespace jitune::test {

/// Registers "test_faults" (call before tuning; the test worker calls it too).
void register_faulty_families();

/// Config values of the "mode" knob.
enum FaultMode { kGood = 0, kIllegalAddress = 1, kTrap = 2, kEndlessLoop = 3, kWrongResult = 4 };

}  // namespace jitune::test
