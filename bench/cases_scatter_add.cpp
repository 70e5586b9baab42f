// scatter_add bench cases: the index_add rows of bench-cases.md, the contention sweep (1, 2, 4, 16, 64
// sources per destination element, float16 and float32), rows of 64 elements, and dot. Each float16 row of
// length 1 also times two forced configs side by side, plain half atomics against the fast (half2) atomic,
// and prints the ratio.
#include <cstdio>
#include <functional>

#include "bench/bench_case.hpp"
#include "templates/scatter_add/scatter_add.hpp"
#include "tuner/measure.hpp"

namespace jitune::bench {
namespace {

std::string compare_output(const Family& fam, const templates::scatter_add::ScatterAddProblem& p, const tuner::DeviceWorkload& dw,
                           const std::vector<std::byte>& expected, CUstream stream) {
  JITUNE_CU_CHECK(cuStreamSynchronize(stream));
  std::vector<std::byte> got(expected.size());
  JITUNE_CU_CHECK(cuMemcpyDtoH(got.data(), dw.output_buffers()[0].get(), got.size()));
  const OutputCheck check = fam.output_check(p, 0);
  const std::uint64_t n = expected.size() / dtype_size(p.dtype());
  const CompareResult cmp = compare_host(check, got.data(), expected.data(), n);
  return cmp.ok() ? std::string() : cmp.describe(n, check);
}

// The bench protocol of time_pair for any number of calls: 10 warm-ups each, then rounds that time every call
// in turn (100 back-to-back calls per sample when small, else one), median per call.
std::vector<double> time_round_robin(const std::vector<std::function<void()>>& calls, bool small,
                                     CUstream stream) {
  driver::Event start, stop;
  for (int i = 0; i < 10; ++i)
    for (const auto& c : calls) c();
  std::vector<std::vector<double>> samples(calls.size());
  const int groups = small ? 20 : 50, per = small ? 100 : 1;
  for (int g = 0; g < groups; ++g)
    for (std::size_t k = 0; k < calls.size(); ++k) {
      JITUNE_CU_CHECK(cuEventRecord(start.get(), stream));
      for (int i = 0; i < per; ++i) calls[k]();
      JITUNE_CU_CHECK(cuEventRecord(stop.get(), stream));
      JITUNE_CU_CHECK(cuEventSynchronize(stop.get()));
      float ms = 0;
      JITUNE_CU_CHECK(cuEventElapsedTime(&ms, start.get(), stop.get()));
      samples[k].push_back(ms * 1000.0 / per);
    }
  std::vector<double> out;
  for (auto& s : samples) out.push_back(tuner::median_spread(s).first);
  return out;
}

// One point of the contention sweep: plain half atomics, the fast (half2) atomic and plain float32 atomics
// with the same block, items and index pattern (no pre-reduction), each verified against the CPU reference,
// then timed round-robin. Returns {plain_half_us, fast_half_us, float32_us}; a wrong result marks the row
// incorrect.
nlohmann::json contention_point(Context& ctx, nlohmann::json& row, std::int64_t rows, std::int64_t count,
                                CUstream stream) {
  const Family& fam = templates::scatter_add::scatter_add_family();
  Runtime::Impl& impl = internal::impl(ctx.tuned);
  const Config plain{{"atomic", 0}, {"workspace", 0}, {"prereduce", 0}, {"block", 256},   {"items", 4},
                     {"vec", 1},    {"order", 0},     {"cache", 0},     {"partition", 0}, {"bucket", 15},
                     {"segment", 18}};
  Config fast = plain;
  fast.set("atomic", 1);
  struct Variant {
    const char* name;
    DType dtype;
    Config config;
  };
  const Variant variants[] = {{"plain half", DType::kFloat16, plain},
                              {"fast half", DType::kFloat16, fast},
                              {"float32", DType::kFloat32, plain}};
  std::vector<std::unique_ptr<templates::scatter_add::ScatterAddProblem>> problems;
  std::vector<std::unique_ptr<tuner::DeviceWorkload>> work;
  std::vector<KernelArgs> args(3);
  std::vector<const Kernel*> kernels;
  bool small = true;
  for (std::size_t v = 0; v < 3; ++v) {
    problems.push_back(std::make_unique<templates::scatter_add::ScatterAddProblem>(
        templates::scatter_add::ScatterAddProblem::index_add(variants[v].dtype, DType::kInt64, rows, count, 1)));
    const auto& p = *problems.back();
    Workload w = fam.workload(p, ctx.seed);  // one seed: the same indices for every variant
    auto reference = fam.reference(p, w);
    work.push_back(std::make_unique<tuner::DeviceWorkload>(fam, p, w, reference));
    const auto& dw = *work.back();
    kernels.push_back(&impl.kernel(fam, p, variants[v].config));
    fam.kernel_args(p, variants[v].config, work.back()->bindings(fam.prep(p, variants[v].config)), args[v]);
    dw.reset_outputs(stream);
    impl.launch(*kernels.back(), args[v], stream);
    const std::string error = compare_output(fam, p, dw, reference[0], stream);
    if (!error.empty()) {
      row["correct"] = false;
      row["error"] = std::string(variants[v].name) + " at " + std::to_string(count) + " into " +
                     std::to_string(rows) + ": " + error;
    }
    small = small && p.bytes_moved() < 4.0 * static_cast<double>(ctx.tuned.device().l2_bytes);
  }
  std::vector<std::function<void()>> calls;
  for (std::size_t v = 0; v < 3; ++v) calls.push_back([&, v] { impl.launch(*kernels[v], args[v], stream); });
  const std::vector<double> us = time_round_robin(calls, small, stream);
  std::printf(
      "  sweep %9lld sources into %9lld targets (%3lld per target): plain half %9.2f us, fast half %9.2f us "
      "(%.2fx), float32 %9.2f us\n",
      static_cast<long long>(count), static_cast<long long>(rows), static_cast<long long>(count / rows),
      us[0], us[1], us[0] / us[1], us[2]);
  return {{"targets", rows},
          {"sources", count},
          {"plain_half_us", us[0]},
          {"fast_half_us", us[1]},
          {"float32_us", us[2]}};
}

nlohmann::json run_case(Context& ctx, const std::string& signature) {
  const Family& fam = templates::scatter_add::scatter_add_family();
  auto problem = fam.parse_problem(signature);
  const auto& p = static_cast<const templates::scatter_add::ScatterAddProblem&>(*problem);
  Workload w = fam.workload(p, ctx.seed);
  auto reference = fam.reference(p, w);
  tuner::DeviceWorkload dw(fam, p, w, reference);
  driver::StreamHandle stream;
  const auto s = reinterpret_cast<Stream>(stream.get());
  const bool is_dot = p.op() == templates::scatter_add::Op::kDot;
  auto call = [&](Runtime& rt) {
    if (is_dot)
      dot(rt, dw.inputs()[0], dw.inputs()[1], p.count(), dw.outputs()[0], p.dtype(), s);
    else
      index_add(rt, dw.outputs()[0], p.rows(), dw.inputs()[0], p.count(), p.index_dtype(), dw.inputs()[1],
                p.count(), p.row_length(), p.dtype(), s);
  };
  nlohmann::json row;
  for (Runtime* rt : {&ctx.tuned, &ctx.heuristic}) {
    // Correct first: initial destination (or poisoned dot result), one call, compared with the CPU reference.
    dw.reset_outputs(stream.get());
    call(*rt);
    const std::string error = compare_output(fam, p, dw, reference[0], stream.get());
    const std::string prefix = rt == &ctx.tuned ? "" : "default_";
    row[prefix + "correct"] = error.empty();
    if (!error.empty()) row[prefix + "error"] = error;
  }
  const bool small = p.bytes_moved() < 4.0 * static_cast<double>(ctx.tuned.device().l2_bytes);
  auto us = time_pair([&] { call(ctx.tuned); }, [&] { call(ctx.heuristic); }, small, stream.get());
  finish_row(row, ctx, "scatter_add", p.signature(), p.bytes_moved(), 0, us, small);
  if (!is_dot && p.dtype() == DType::kFloat16 && p.row_length() == 1) {
    // The contention sweep, two ways: 2^24 sources into 2^24 / k targets (this row), and for the bench-cases
    // destination of 65536 targets, k * 65536 sources.
    row["sweep"] = nlohmann::json::array();
    row["sweep"].push_back(contention_point(ctx, row, p.rows(), p.count(), stream.get()));
    if (p.rows() == 65536)
      for (std::int64_t per : {1, 2, 4, 16, 64})
        row["sweep"].push_back(contention_point(ctx, row, 65536, per * 65536, stream.get()));
  }
  return row;
}

std::vector<Case> scatter_add_cases() {
  std::vector<Case> out;
  for (const auto& [name, signature] : templates::scatter_add::scatter_add_family().default_suite())
    out.push_back({name, "scatter_add", [sig = signature](Context& ctx) { return run_case(ctx, sig); },
                   signature});
  return out;
}

const Registrar registrar(scatter_add_cases());

}  // namespace
}  // namespace jitune::bench
