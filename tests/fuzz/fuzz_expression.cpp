// libFuzzer target: elementwise expressions and the other text the library parses (configs, signatures, dtypes).
// Accepted expressions must evaluate without crashing and round-trip through their canonical form and signature.
#include <cstdint>
#include <string>

#include "templates/elementwise/elementwise.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto e = jitune::templates::elementwise::parse_expression(text);
    const auto again = jitune::templates::elementwise::parse_expression(e.canonical);
    if (again.canonical != e.canonical || again.inputs != e.inputs) __builtin_trap();
    try {
      const jitune::templates::elementwise::Evaluator eval(e);
      const double values[jitune::templates::elementwise::kMaxInputs] = {1.5, -2.25, 0.5, 3.0, -0.75, 2.0, 1.25, -1.0};
      (void)eval(values);
    } catch (const jitune::InvalidArgument&) {
    }
    const jitune::templates::elementwise::ElementwiseProblem p(e, jitune::DType::kFloat16, 1000);
    if (jitune::templates::elementwise::elementwise_family().parse_problem(p.signature())->signature() != p.signature()) __builtin_trap();
  } catch (const jitune::InvalidArgument&) {
  }
  try {
    const auto c = jitune::Config::parse(text);
    if (jitune::Config::parse(c.text()) != c) __builtin_trap();
  } catch (const jitune::InvalidArgument&) {
  }
  try {
    (void)jitune::join_signature(jitune::split_signature(text));
  } catch (const jitune::InvalidArgument&) {
  }
  try {
    (void)jitune::parse_dtype(text);
  } catch (const jitune::InvalidArgument&) {
  }
  return 0;
}
