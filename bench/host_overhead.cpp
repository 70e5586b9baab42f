// Warm-call host overhead of every family: the public op (wrapper, dispatch, checks, launch) against a raw
// launch of the very same kernel with the same arguments, 100k calls each, interleaved to share drift.
#include "bench/host_overhead.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include <jitune/jitune.hpp>

#include "runtime/runtime_impl.hpp"
#include "tuner/measure.hpp"

namespace jitune::bench {
namespace {

using Clock = std::chrono::steady_clock;

// One small problem of a family: the values its public wrapper packs, and the wrapper call itself.
struct Probe {
  std::string family;
  CallArgs args;
  std::function<void(Runtime&, const std::vector<void*>&, Stream)> op;
};

std::vector<Probe> probes() {
  std::vector<Probe> out;
  {
    Probe p{"elementwise", {}, {}};
    p.args.add(static_cast<std::int64_t>(DType::kFloat32)).add(1024).text("z = x * y");
    p.op = [](Runtime& rt, const std::vector<void*>& b, Stream s) {
      const void* ins[] = {b[0], b[1]};
      elementwise(rt, "z = x * y", ins, b[2], 1024, DType::kFloat32, s);
    };
    out.push_back(std::move(p));
  }
  {
    Probe p{"permute", {}, {}};
    const std::int64_t shape[] = {64, 96};
    const int perm[] = {1, 0};
    p.args.add(static_cast<std::int64_t>(DType::kFloat32)).add_list(shape).add_list(perm);
    p.op = [](Runtime& rt, const std::vector<void*>& b, Stream s) {
      permute(rt, b[0], b[1], {64, 96}, {1, 0}, DType::kFloat32, s);
    };
    out.push_back(std::move(p));
  }
  {
    UpsampleNearest2d shape;
    shape.n = 1, shape.c = 8, shape.in_h = 16, shape.in_w = 16, shape.scale_h = 2.0, shape.scale_w = 2.0;
    Probe p{"upsample_nearest2d", {}, {}};
    upsample_nearest2d_call_args(p.args, shape, false);
    p.op = [shape](Runtime& rt, const std::vector<void*>& b, Stream s) {
      upsample_nearest2d(rt, shape, b[0], b[1], s);
    };
    out.push_back(std::move(p));
  }
  {
    Probe p{"scatter_add", {}, {}};
    p.args.add(0).add(static_cast<std::int64_t>(DType::kFloat32)).add(static_cast<std::int64_t>(DType::kInt64));
    p.args.add(64).add(256).add(256).add(4).scalar(1.0);
    p.op = [](Runtime& rt, const std::vector<void*>& b, Stream s) {
      index_add(rt, b[0], 64, b[1], 256, DType::kInt64, b[2], 256, 4, DType::kFloat32, s);
    };
    out.push_back(std::move(p));
  }
  {
    Conv2dParams params;
    params.input = {1, 4, 12, 12};
    params.weight = {4, 4, 3, 3};
    params.padding = {1, 1};
    Probe p{"conv2d", {}, {}};
    conv2d_call_args(p.args, params, DType::kFloat32, false);
    p.op = [params](Runtime& rt, const std::vector<void*>& b, Stream s) {
      conv2d(rt, b[0], b[1], nullptr, b[3], params, DType::kFloat32, s);
    };
    out.push_back(std::move(p));
  }
  {
    Probe p{"reduce_rows", {}, {}};
    p.args.add(static_cast<std::int64_t>(DType::kFloat32)).add(0).add(64).add(256);
    p.op = [](Runtime& rt, const std::vector<void*>& b, Stream s) {
      reduce_rows(rt, b[0], b[1], 64, 256, ReduceOp::kSum, DType::kFloat32, s);
    };
    out.push_back(std::move(p));
  }
  return out;
}

// A raw launch of the kernel the dispatch picks for `pointers`, with the arguments the family builds.
struct RawLaunch {
  const Kernel* kernel = nullptr;
  KernelArgs args;
};

void prepare_raw(Runtime::Impl& impl, const Family& family, const Problem& problem,
                 const std::vector<const void*>& pointers, const std::vector<BufferSpec>& specs, RawLaunch& raw) {
  std::vector<std::uint8_t> alignment;
  for (std::size_t i = 0; i < specs.size(); ++i)
    alignment.push_back(pointers[i] ? alignment_class(pointers[i], specs[i].stride_alignment()) : 0);
  const Config& tuned = impl.decide(family, problem).config;
  Bindings bindings{pointers, alignment, nullptr, {}};
  const int slot = family.variant(problem, tuned, bindings);
  raw.kernel = &impl.kernel(family, problem, family.variant_config(problem, tuned, slot, impl.device));
  family.kernel_args(problem, raw.kernel->config, bindings, raw.args);
}

double host_us(CUstream stream, const std::function<void()>& f) {
  const int calls = 20000;
  std::vector<double> per_round;
  for (int round = 0; round < 5; ++round) {
    JITUNE_CU_CHECK(cuStreamSynchronize(stream));
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) f();
    per_round.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / calls);
  }
  JITUNE_CU_CHECK(cuStreamSynchronize(stream));
  return tuner::median_spread(per_round).first;
}

}  // namespace

nlohmann::json host_overhead(Runtime& rt) {
  Runtime::Impl& impl = internal::impl(rt);
  driver::StreamHandle stream;
  const auto s = reinterpret_cast<Stream>(stream.get());
  nlohmann::json rows = nlohmann::json::array();
  for (Probe& probe : probes()) {
    const Family* family = find_family(probe.family);
    if (!family) continue;
    const auto problem = family->problem_from_call(probe.args);
    const std::vector<BufferSpec> specs = family->buffers(*problem);
    std::vector<driver::DeviceBuffer> memory;
    std::vector<void*> buffers;
    std::vector<const void*> pointers;
    for (const BufferSpec& spec : specs) {
      const std::uint64_t bytes = spec.extent_bytes();
      memory.emplace_back(std::max<std::uint64_t>(bytes, 16));
      JITUNE_CU_CHECK(cuMemsetD8(memory.back().get(), 0, memory.back().bytes()));  // host time only: values unused
      buffers.push_back(bytes == 0 && spec.optional ? nullptr : memory.back().data());
      pointers.push_back(buffers.back());
    }
    auto api_call = [&] { probe.op(rt, buffers, s); };
    api_call();  // decides, compiles and loads
    RawLaunch raw;
    prepare_raw(impl, *family, *problem, pointers, specs, raw);
    auto raw_call = [&] { launch_kernel(raw.kernel->function, raw.kernel->shape, stream.get(), raw.args.pointers()); };
    const double raw1 = host_us(stream.get(), raw_call), api1 = host_us(stream.get(), api_call);
    const double raw2 = host_us(stream.get(), raw_call), api2 = host_us(stream.get(), api_call);
    const double raw_us = std::min(raw1, raw2), api_us = std::min(api1, api2);
    rows.push_back({{"family", probe.family}, {"signature", problem->signature()}, {"raw_launch_us", raw_us},
                    {"api_call_us", api_us}, {"overhead_us", api_us - raw_us}});
  }
  return rows;
}

}  // namespace jitune::bench
