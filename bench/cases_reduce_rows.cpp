// reduce_rows bench cases: the family's default suite (sum and max over rows of 32 to 65536 elements, float32
// / float16 / bfloat16), through jitune::reduce_rows with the tuned and the heuristic-default runtime,
// verified against the CPU reference first. The suite's views one element into their allocation (issue 19:
// "_x+1", a problem with x's alignment class) place x that many bytes past an aligned address. Bandwidth counts x
// read once and y written once.
#include "bench/bench_case.hpp"
#include "templates/reduce_rows/reduce_rows.hpp"
#include "runtime/driver.hpp"
#include "tuner/measure.hpp"

namespace jitune::bench {
namespace {

nlohmann::json run_reduce_rows(Context& ctx, const std::string& signature) {
  const Family& fam = templates::reduce_rows::reduce_rows_family();
  auto problem = fam.parse_problem(signature);
  const auto& p = static_cast<const templates::reduce_rows::ReduceRowsProblem&>(*problem);
  const std::size_t x_offset = p.align() < 16 ? p.align() / dtype_size(p.dtype()) : 0;  // elements
  Workload w = fam.workload(p, ctx.seed);
  auto reference = fam.reference(p, w);
  tuner::DeviceWorkload dw(fam, p, w, reference);
  const void* x = dw.inputs()[0];
  driver::DeviceBuffer shifted;  // the input again, x_offset elements into an allocation of its own
  if (x_offset > 0) shifted = shifted_copy(w.inputs[0], x_offset * dtype_size(p.dtype()), x);
  void* y = dw.outputs()[0];
  driver::StreamHandle stream;
  const auto s = reinterpret_cast<Stream>(stream.get());
  nlohmann::json row;
  for (Runtime* rt : {&ctx.tuned, &ctx.heuristic}) {
    // Correct first: poisoned output, one call, compared with the CPU reference.
    dw.reset_outputs(stream.get());
    reduce_rows(*rt, x, y, p.rows(), p.cols(), p.op(), p.dtype(), s);
    JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
    std::vector<std::byte> got(dw.output_buffers()[0].bytes());
    JITUNE_CU_CHECK(cuMemcpyDtoH(got.data(), dw.output_buffers()[0].get(), got.size()));
    const OutputCheck check = fam.output_check(p, 0);
    const auto count = static_cast<std::uint64_t>(p.rows());
    const CompareResult cmp = compare_host(check, got.data(), reference[0].data(), count);
    const std::string prefix = rt == &ctx.tuned ? "" : "default_";
    row[prefix + "correct"] = cmp.ok();
    if (!cmp.ok()) row[prefix + "error"] = cmp.describe(count, check);
  }
  const bool small = p.bytes_moved() < 4.0 * static_cast<double>(ctx.tuned.device().l2_bytes);
  auto us = time_pair([&] { reduce_rows(ctx.tuned, x, y, p.rows(), p.cols(), p.op(), p.dtype(), s); },
                      [&] { reduce_rows(ctx.heuristic, x, y, p.rows(), p.cols(), p.op(), p.dtype(), s); },
                      small, stream.get());
  finish_row(row, ctx, "reduce_rows", p.signature(), p.bytes_moved(), 0, us, small);
  return row;
}

std::vector<Case> reduce_rows_cases() {
  std::vector<Case> out;
  for (const auto& [name, signature] : templates::reduce_rows::reduce_rows_family().default_suite())
    out.push_back(
        {name, "reduce_rows", [sig = signature](Context& ctx) { return run_reduce_rows(ctx, sig); }, signature});
  return out;
}

const Registrar registrar(reduce_rows_cases());

}  // namespace
}  // namespace jitune::bench
