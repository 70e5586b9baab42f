// Device workload, device-side verification and launch timing.
#include "tuner/measure.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>

#include "templates/host_float.hpp"

namespace jitune::tuner {

DeviceWorkload::DeviceWorkload(const Family& family, const Problem& problem, const Workload& host,
                               const std::vector<std::vector<std::byte>>& reference) {
  const std::vector<BufferSpec> specs = family.buffers(problem);
  // A buffer the problem places at alignment class c < 16 (a misaligned view it is tuned for) starts c bytes into
  // an allocation (cuMemAlloc aligns to 256 bytes), so its pointer's class is exactly c.
  std::vector<std::size_t> in_offset, out_offset;
  for (const BufferSpec& spec : specs) {
    if (spec.optional && spec.extent_bytes() == 0) continue;
    (spec.role == BufferRole::kIn ? in_offset : out_offset).push_back(spec.placement < 16 ? spec.placement : 0);
  }
  auto offset = [](const std::vector<std::size_t>& v, std::size_t i) { return i < v.size() ? v[i] : 0; };
  for (std::size_t i = 0; i < host.inputs.size(); ++i) {
    const auto& in = host.inputs[i];
    const std::size_t off = offset(in_offset, i);
    input_buffers_.emplace_back(std::max<std::size_t>(in.size() + off, 1));
    if (!in.empty()) JITUNE_CU_CHECK(cuMemcpyHtoD(input_buffers_.back().get() + off, in.data(), in.size()));
    inputs_.push_back(static_cast<char*>(input_buffers_.back().data()) + off);
  }
  for (std::size_t i = 0; i < host.output_bytes.size(); ++i) {
    const std::size_t off = offset(out_offset, i);
    output_buffers_.emplace_back(std::max<std::size_t>(host.output_bytes[i] + off, 1));
    outputs_.push_back(static_cast<char*>(output_buffers_.back().data()) + off);
    output_offset_.push_back(off);
    output_bytes_.push_back(host.output_bytes[i]);
    checks_.push_back(family.output_check(problem, i));
    const bool has_initial = i < host.initial_outputs.size() && !host.initial_outputs[i].empty();
    initial_.emplace_back(has_initial ? host.initial_outputs[i].size() : 0);
    if (has_initial)
      JITUNE_CU_CHECK(cuMemcpyHtoD(initial_.back().get(), host.initial_outputs[i].data(), host.initial_outputs[i].size()));
    expected_.emplace_back(std::max<std::size_t>(reference.at(i).size(), 1));
    if (!reference[i].empty())
      JITUNE_CU_CHECK(cuMemcpyHtoD(expected_.back().get(), reference[i].data(), reference[i].size()));
  }
  std::size_t next_in = 0, next_out = 0;
  for (const BufferSpec& spec : specs) {
    const std::uint64_t bytes = spec.extent_bytes();
    void* p = nullptr;
    if (spec.optional && bytes == 0)
      p = nullptr;
    else if (spec.role == BufferRole::kIn)
      p = next_in < inputs_.size() ? inputs_[next_in++] : nullptr;
    else
      p = next_out < outputs_.size() ? outputs_[next_out++] : nullptr;
    if (!p && !(spec.optional && bytes == 0))
      throw Error("jitune internal error: " + std::string(family.name()) + "'s workload has no buffer for '" +
                  spec.name + "'");
    bound_.push_back(p);
    bound_bytes_.push_back(bytes);
    alignment_.push_back(p ? alignment_class(p, spec.stride_alignment()) : 0);
  }
}

Bindings DeviceWorkload::bindings(const LaunchPrep& prep) {
  if (prep.workspace_bytes > 0 && (!workspace_ || workspace_->bytes() < prep.workspace_bytes))
    workspace_ = std::make_unique<driver::DeviceBuffer>(prep.workspace_bytes);
  return {bound_, alignment_, prep.workspace_bytes > 0 ? workspace_->data() : nullptr, {}};
}

void DeviceWorkload::prepare_launch(const LaunchPrep& prep, CUstream stream) const {
  if (prep.zero_end > prep.zero_begin && workspace_)
    JITUNE_CU_CHECK(cuMemsetD8Async(workspace_->get() + prep.zero_begin, 0, prep.zero_end - prep.zero_begin, stream));
  for (std::uint32_t mask = prep.zero_buffers; mask != 0; mask &= mask - 1) {
    const auto i = static_cast<std::size_t>(std::countr_zero(mask));
    JITUNE_CU_CHECK(cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(bound_.at(i)), 0, bound_bytes_[i], stream));
  }
}

void DeviceWorkload::reset_outputs(CUstream stream) const {
  for (std::size_t i = 0; i < output_buffers_.size(); ++i) {
    if (initial_[i].bytes() > 0)
      JITUNE_CU_CHECK(cuMemcpyDtoDAsync(output_buffers_[i].get() + output_offset_[i], initial_[i].get(),
                                        initial_[i].bytes(), stream));
    else
      JITUNE_CU_CHECK(cuMemsetD8Async(output_buffers_[i].get(), 0xFF, output_buffers_[i].bytes(), stream));
  }
}

CUfunction TunerKernels::load(const std::string& name) {
  for (auto& [n, f] : functions_)
    if (n == name) return f;
  const std::string program = "#include \"common/tuner_kernels.cuh\"\n";
  const std::string key = impl_.compiler.binary_key(program, name, impl_.device.arch());
  auto bin = impl_.binaries.get(key);
  if (!bin) {
    CompiledProgram out = impl_.compiler.compile(program, {name}, impl_.device.arch(), false);
    if (!out.ok) throw Error("jitune internal error: the tuner's kernel " + name + " does not compile:\n" + out.log);
    bin = CachedBinary{std::move(out.cubin), out.lowered.at(0)};
    impl_.binaries.put(key, *bin);
  }
  modules_.push_back(std::make_unique<driver::Module>(bin->cubin.data()));
  CUfunction f = modules_.back()->function(bin->lowered_name);
  functions_.emplace_back(name, f);
  return f;
}

CUfunction TunerKernels::compare(DType dtype) {
  return load("jitune::compare_outputs<" + std::string(dtype_cuda_type(dtype)) + ">");
}

CUfunction TunerKernels::spin() { return load("jitune::spin_ns"); }

std::string DeviceComparer::compare(const DeviceWorkload& w, CUstream stream) {
  for (std::size_t i = 0; i < w.checks().size(); ++i) {
    const OutputCheck& check = w.checks()[i];
    const std::size_t es = dtype_size(check.dtype);
    unsigned long long n = w.output_bytes(i) / es;
    if (w.expected()[i].bytes() < n * es) n = w.expected()[i].bytes() / es;
    const unsigned long long init[2] = {0, ~0ull};
    JITUNE_CU_CHECK(cuMemcpyHtoD(result_.get(), init, sizeof init));
    CUdeviceptr got = reinterpret_cast<CUdeviceptr>(w.outputs()[i]), expected = w.expected()[i].get(),
                result = result_.get();
    double rtol = check.rtol, atol = check.atol;
    void* args[] = {&got, &expected, &n, &rtol, &atol, &result};
    const unsigned blocks = static_cast<unsigned>(std::min<unsigned long long>(4096, (n + 255) / 256 + 1));
    JITUNE_CU_CHECK(cuLaunchKernel(kernels_.compare(check.dtype), blocks, 1, 1, 256, 1, 1, 0, stream, args, nullptr));
    JITUNE_CU_CHECK(cuStreamSynchronize(stream));
    unsigned long long res[2];
    JITUNE_CU_CHECK(cuMemcpyDtoH(res, result_.get(), sizeof res));
    if (res[0] == 0) continue;
    std::vector<std::byte> g(es), e(es);
    JITUNE_CU_CHECK(cuMemcpyDtoH(g.data(), got + res[1] * es, es));
    JITUNE_CU_CHECK(cuMemcpyDtoH(e.data(), expected + res[1] * es, es));
    CompareResult r;
    r.mismatches = res[0];
    r.first_index = res[1];
    r.got = load_element(check.dtype, g.data(), 0);
    r.expected = load_element(check.dtype, e.data(), 0);
    return (w.checks().size() > 1 ? "output " + std::to_string(i) + ": " : std::string()) + r.describe(n, check);
  }
  return {};
}

std::string_view l2_mode_name(L2Mode mode) noexcept {
  switch (mode) {
    case L2Mode::kAuto: return "auto";
    case L2Mode::kFlush: return "flush";
    case L2Mode::kWarm: return "warm";
  }
  return "?";
}

L2Mode parse_l2_mode(std::string_view name) {
  for (const L2Mode mode : {L2Mode::kAuto, L2Mode::kFlush, L2Mode::kWarm})
    if (name == l2_mode_name(mode)) return mode;
  throw InvalidArgument("unknown L2 mode '" + std::string(name) + "'; use auto, flush or warm");
}

LaunchTimer::LaunchTimer(TunerKernels& kernels, const DeviceInfo& device, double problem_bytes, int max_samples,
                         L2Mode mode, CUstream stream)
    : kernels_(kernels), stream_(stream), mode_(mode) {
  const bool large = problem_bytes >= 4.0 * static_cast<double>(device.l2_bytes);
  if (mode_ == L2Mode::kAuto) mode_ = large ? L2Mode::kFlush : L2Mode::kWarm;
  // A problem that moves several times the L2 evicts it by itself: no flush needed.
  if (mode_ == L2Mode::kFlush && !large) flush_ = driver::DeviceBuffer(static_cast<std::size_t>(2 * device.l2_bytes));
  if (mode_ == L2Mode::kWarm) kernels_.spin();
  for (int i = 0; i < max_samples; ++i) {
    start_.push_back(std::make_unique<driver::Event>());
    stop_.push_back(std::make_unique<driver::Event>());
  }
}

void LaunchTimer::launch(std::span<const CallLaunch> call) {
  for (const CallLaunch& l : call)
    driver::check(launch_kernel(l.function, *l.shape, stream_, l.args),
                  l.shape->programmatic || l.shape->cooperative ? "cuLaunchKernelEx" : "cuLaunchKernel");
}

int LaunchTimer::launches_per_sample(double estimate_us) const noexcept {
  if (mode_ != L2Mode::kWarm) return 1;
  // About 200 us of back-to-back launches per sample: launch jitter and event resolution stay well under 1%.
  return std::clamp(static_cast<int>(std::ceil(200.0 / std::max(estimate_us, 0.5))), 2, 64);
}

double LaunchTimer::probe(std::span<const CallLaunch> call) {
  JITUNE_CU_CHECK(cuEventRecord(start_[0]->get(), stream_));
  launch(call);
  JITUNE_CU_CHECK(cuEventRecord(stop_[0]->get(), stream_));
  JITUNE_CU_CHECK(cuEventSynchronize(stop_[0]->get()));
  float ms = 0;
  JITUNE_CU_CHECK(cuEventElapsedTime(&ms, start_[0]->get(), stop_[0]->get()));
  return ms * 1000.0;
}

std::vector<double> LaunchTimer::time(CUfunction f, const LaunchShape& s, KernelArgs& args, int samples) {
  const CallLaunch one{f, &s, args.pointers()};
  return time(std::span<const CallLaunch>(&one, 1), samples);
}

std::vector<double> LaunchTimer::time(std::span<const CallLaunch> call, int samples) {
  samples = std::min<int>(samples, static_cast<int>(start_.size()));
  // Lines an earlier candidate loaded with an evict_last policy (cache hints) stay ahead of others in L2 until
  // reset, and made every later candidate of a case look up to 25% faster on the H100: each candidate starts from
  // normal lines. (The stream is idle here: the previous time() ended with a synchronize.)
  JITUNE_CU_CHECK(cuCtxResetPersistingL2Cache());
  const int per = launches_per_sample(mode_ == L2Mode::kWarm ? probe(call) : 0.0);
  CUfunction spin = mode_ == L2Mode::kWarm ? kernels_.spin() : nullptr;
  for (int r = 0; r < samples; ++r) {
    if (flush_.bytes() > 0)
      JITUNE_CU_CHECK(cuMemcpyDtoDAsync(flush_.get(), flush_.get() + flush_.bytes() / 2, flush_.bytes() / 2, stream_));
    if (spin) {
      // Long enough for the host to queue all `per` launches (about 3 us each) before the first one starts.
      unsigned long long ns = 20000ull + 4000ull * static_cast<unsigned long long>(per);
      void* spin_args[] = {&ns};
      JITUNE_CU_CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, stream_, spin_args, nullptr));
    }
    JITUNE_CU_CHECK(cuEventRecord(start_[r]->get(), stream_));
    for (int k = 0; k < per; ++k) launch(call);
    JITUNE_CU_CHECK(cuEventRecord(stop_[r]->get(), stream_));
  }
  JITUNE_CU_CHECK(cuStreamSynchronize(stream_));
  std::vector<double> us(samples);
  for (int r = 0; r < samples; ++r) {
    float ms = 0;
    JITUNE_CU_CHECK(cuEventElapsedTime(&ms, start_[r]->get(), stop_[r]->get()));
    us[r] = ms * 1000.0 / per;
  }
  return us;
}

std::pair<double, double> median_spread(std::vector<double> s) {
  if (s.empty()) return {0, 0};
  std::sort(s.begin(), s.end());
  const double med = s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
  return {med, med > 0 ? (quantile_of_sorted(s, 0.9) - quantile_of_sorted(s, 0.1)) / med : 0};
}

double quantile_of_sorted(const std::vector<double>& sorted, double q) {
  return sorted[static_cast<std::size_t>(std::lround(q * static_cast<double>(sorted.size() - 1)))];
}

void background_priority() noexcept {
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 10);
}

}  // namespace jitune::tuner

#include "tuner/tuner.hpp"

namespace jitune::tuner {

double copy_bandwidth_gbs(Runtime& runtime, std::size_t bytes, int reps) {
  Runtime::Impl& impl = internal::impl(runtime);
  driver::make_current(impl.context);
  driver::DeviceBuffer a(bytes), b(bytes);
  driver::StreamHandle stream;
  JITUNE_CU_CHECK(cuMemsetD8Async(a.get(), 0x3c, bytes, stream.get()));
  driver::Event start, stop;
  std::vector<double> us;
  for (int r = -3; r < reps; ++r) {
    JITUNE_CU_CHECK(cuEventRecord(start.get(), stream.get()));
    JITUNE_CU_CHECK(cuMemcpyDtoDAsync(b.get(), a.get(), bytes, stream.get()));
    JITUNE_CU_CHECK(cuEventRecord(stop.get(), stream.get()));
    JITUNE_CU_CHECK(cuEventSynchronize(stop.get()));
    float ms = 0;
    JITUNE_CU_CHECK(cuEventElapsedTime(&ms, start.get(), stop.get()));
    if (r >= 0) us.push_back(ms * 1000.0);
  }
  const double med = median_spread(us).first;
  return 2.0 * static_cast<double>(bytes) / (med * 1e3);
}

}  // namespace jitune::tuner
