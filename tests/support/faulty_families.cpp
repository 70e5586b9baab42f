// The "test_faults" family: y = x + 1 over n floats, except for the misbehaving modes.
#include "tests/support/faulty_families.hpp"

#include <charconv>
#include <cstring>
#include <random>

#include "templates/family.hpp"
#include "templates/host_float.hpp"

namespace jitune::test {
namespace {

const char* kProgram = R"(#include "common/types.cuh"
template <int kMode, int kBlock>
__global__ void __launch_bounds__(kBlock) test_fault_kernel(const float* x, float* y, long long n) {
  const long long i = blockIdx.x * (long long)kBlock + threadIdx.x;
  if (kMode == 3) {
    // An asm volatile statement cannot be optimised away (a plain empty loop can be assumed to terminate).
    for (;;) asm volatile("nanosleep.u32 1000;" ::: "memory");
  }
  if (kMode == 2 && i == 0) __trap();
  if (i < n) {
    if (kMode == 1) y[i + (1ll << 40)] = 1.0f;
    else y[i] = x[i] + (kMode == 4 ? 2.0f : 1.0f);
  }
}
)";

class FaultProblem final : public Problem {
 public:
  explicit FaultProblem(std::int64_t n) : n_(n) {}
  std::int64_t n() const { return n_; }
  std::string signature() const override { return "n=" + std::to_string(n_); }
  std::string group() const override { return "float32"; }
  std::vector<double> features() const override { return {static_cast<double>(n_)}; }
  double bytes_moved() const override { return 8.0 * static_cast<double>(n_); }

 private:
  std::int64_t n_;
};

class FaultFamily final : public Family {
 public:
  std::string_view name() const override { return "test_faults"; }
  std::string_view template_name() const override { return "common/types.cuh"; }
  const Space& space() const override { return space_; }
  std::vector<ProblemOption> problem_options() const override { return {{"n", "element count"}}; }
  std::unique_ptr<Problem> make_problem(const std::map<std::string, std::string>& o) const override {
    return std::make_unique<FaultProblem>(std::stoll(o.at("n")));
  }
  Config heuristic(const Problem&, const DeviceInfo&) const override { return Config{{"mode", 0}, {"block", 256}}; }
  std::string check(const Problem&, const Config&, const DeviceInfo&) const override { return {}; }
  KernelSource source(const Problem&, const Config& c) const override {
    return {kProgram, "test_fault_kernel<" + std::to_string(c.at("mode")) + ", " + std::to_string(c.at("block")) + ">"};
  }
  LaunchShape launch_shape(const Problem& p, const Config& c, const DeviceInfo&) const override {
    const auto n = static_cast<const FaultProblem&>(p).n();
    LaunchShape s;
    s.block.x = static_cast<unsigned>(c.at("block"));
    s.grid.x = static_cast<unsigned>((n + c.at("block") - 1) / c.at("block"));
    return s;
  }
  std::unique_ptr<Problem> problem_from_call(const CallArgs& args) const override {
    return std::make_unique<FaultProblem>(CallReader(args).next());
  }
  std::vector<BufferSpec> buffers(const Problem& p) const override {
    const std::int64_t n = static_cast<const FaultProblem&>(p).n();
    return {{"x", BufferRole::kIn, DType::kFloat32, {n}, {}}, {"y", BufferRole::kOut, DType::kFloat32, {n}, {}}};
  }
  void kernel_args(const Problem& p, const Config&, const Bindings& b, KernelArgs& args) const override {
    args.push(b.pointers[0]);
    args.push(b.at(1));
    args.push(static_cast<long long>(static_cast<const FaultProblem&>(p).n()));
  }
  Workload workload(const Problem& p, std::uint64_t seed) const override {
    const auto n = static_cast<std::size_t>(static_cast<const FaultProblem&>(p).n());
    Workload w;
    w.inputs.emplace_back(n * 4);
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::uniform_real_distribution<float> d(0.5f, 2.0f);
    for (std::size_t i = 0; i < n; ++i) store_element(DType::kFloat32, w.inputs[0].data(), i, d(rng));
    w.output_bytes = {n * 4};
    return w;
  }
  std::vector<std::vector<std::byte>> reference(const Problem& p, const Workload& w) const override {
    const auto n = static_cast<std::size_t>(static_cast<const FaultProblem&>(p).n());
    std::vector<std::byte> y(n * 4);
    for (std::size_t i = 0; i < n; ++i)
      store_element(DType::kFloat32, y.data(), i, static_cast<float>(load_element(DType::kFloat32, w.inputs[0].data(), i)) + 1.0f);
    return {y};
  }
  OutputCheck output_check(const Problem&, std::size_t) const override { return {DType::kFloat32, 1e-6, 1e-6}; }
  std::vector<std::pair<std::string, std::string>> default_suite() const override { return {}; }

 private:
  Space space_{{{"mode", {0, 1, 2, 3, 4}, "0 good, 1 illegal address, 2 trap, 3 endless loop, 4 wrong result"},
                {"block", {128, 256}, "threads per block"}}};
};

}  // namespace

void register_faulty_families() {
  static const FaultFamily faults;
  register_family(faults);
}

}  // namespace jitune::test
