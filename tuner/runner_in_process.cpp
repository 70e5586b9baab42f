// The in-process CandidateRunner: device workload, device-side verification and timing on the runtime's context.
#include <cmath>
#include <map>

#include "tuner/runner.hpp"

namespace jitune::tuner {
namespace {

class InProcessRunner final : public CandidateRunner {
 public:
  InProcessRunner(Runtime& runtime, const Family& family, const Problem& problem, const RunnerSettings& s,
                  std::shared_ptr<HostWorkload> prepared)
      : impl_(internal::impl(runtime)), family_(family), problem_(problem), settings_(s), kernels_(impl_), comparer_(kernels_),
        prepared_(std::move(prepared)) {}

  L2Mode setup() override {
    driver::make_current(impl_.context);
    std::shared_ptr<HostWorkload> host = std::move(prepared_);
    if (!host) host = std::make_shared<HostWorkload>(build_host_workload(family_, problem_, settings_.seed));
    work_ = std::make_unique<DeviceWorkload>(family_, problem_, host->workload, host->reference);
    host.reset();  // the device holds them now
    timer_ = std::make_unique<LaunchTimer>(kernels_, impl_.device, problem_.bytes_moved(),
                                           std::max(settings_.max_reps, settings_.retime_reps), settings_.l2,
                                           stream_.get());
    return timer_->mode();
  }

  CandidateResult run(const Candidate& c, double best_us) override {
    CandidateResult r;
    r.config = c.config;
    const Kernel& l = load(c);
    int max_threads = 0;
    JITUNE_CU_CHECK(cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, l.function));
    if (l.shape.block.volume() > static_cast<std::uint64_t>(max_threads)) {
      r.status = "resources_exceeded";
      r.reason = "block of " + std::to_string(l.shape.block.volume()) + " threads, the kernel allows " +
                 std::to_string(max_threads) + " (register use)";
      return r;
    }
    const CallLaunches call(family_, problem_, l, work_->bindings(l.prep));
    // Correct first: one run on poisoned outputs, compared with the CPU reference.
    work_->reset_outputs(stream_.get());
    work_->prepare_launch(l.prep, stream_.get());
    CUresult launched = CUDA_SUCCESS;
    for (const CallLaunch& k : call.launches())
      if (launched == CUDA_SUCCESS) launched = launch_kernel(k.function, *k.shape, stream_.get(), k.args);
    const CUresult synced = launched == CUDA_SUCCESS ? driver::api().cuStreamSynchronize(stream_.get()) : launched;
    if (synced != CUDA_SUCCESS) {
      r.status = "launch_failed";
      r.reason = driver::error_text(synced);
      if (launched == CUDA_SUCCESS)  // a fault during execution leaves the context unusable
        throw CudaError("candidate " + c.config.text() + " of " + std::string(family_.name()) + " faulted (" +
                            r.reason + "); the CUDA context of this process is lost",
                        synced);
      return r;
    }
    r.reason = comparer_.compare(*work_, stream_.get());
    if (!r.reason.empty()) {
      r.status = "wrong_result";
      return r;
    }
    // Timing: 3 samples, cut if far behind the best, else enough samples for the time budget.
    std::vector<double> samples = timer_->time(call.launches(), 3);
    const double med = median_spread(samples).first;
    if (best_us > 0 && med > settings_.cut_ratio * best_us) {
      r.status = "cut";
      r.reason = "median of 3 samples " + std::to_string(med) + " us > " + std::to_string(settings_.cut_ratio) +
                 " x best " + std::to_string(best_us) + " us";
    } else {
      const double per_sample_us = std::max(med, 0.1) * timer_->launches_per_sample(med);
      const int want = std::clamp(static_cast<int>(std::ceil(settings_.min_time_ms * 1000.0 / per_sample_us)),
                                  settings_.min_reps, settings_.max_reps);
      if (want > 3) {
        auto more = timer_->time(call.launches(), want - 3);
        samples.insert(samples.end(), more.begin(), more.end());
      }
      r.status = "ok";
    }
    std::tie(r.time_us, r.spread) = median_spread(samples);
    r.reps = static_cast<int>(samples.size());
    return r;
  }

  std::vector<std::vector<double>> retime(const std::vector<const Candidate*>& finalists) override {
    std::vector<std::vector<double>> rounds(finalists.size());
    for (int round = 0; round < settings_.retime_reps; ++round)
      for (std::size_t f = 0; f < finalists.size(); ++f) {
        const Kernel& l = load(*finalists[f]);
        // The finalists share the workspace: each one's zeroed range is cleared again before its launch (another
        // finalist's launches may have written there, or the workspace was reallocated for a larger one).
        const CallLaunches call(family_, problem_, l, work_->bindings(l.prep));
        work_->prepare_launch(l.prep, stream_.get());
        rounds[f].push_back(timer_->time(call.launches(), 1).at(0));
      }
    return rounds;
  }

 private:
  const Kernel& load(const Candidate& c) {
    const std::string key = std::to_string(c.module_id) + "\n" + c.lowered + "\n" + c.config.text();
    if (auto it = loaded_.find(key); it != loaded_.end()) return it->second;
    auto& module = modules_[c.module_id];
    if (!module) module = std::make_unique<driver::Module>(c.program->cubin.data());
    Kernel k;
    k.function = module->function(c.lowered);
    k.shape = family_.launch_shape(problem_, c.config, impl_.device);
    k.config = c.config;
    k.prep = family_.prep(problem_, c.config);
    ready_function(k.function, k.shape, impl_.device);
    impl_.load_steps(family_, problem_, k, "tuner step\n" + key);
    return loaded_.emplace(key, std::move(k)).first->second;
  }

  Runtime::Impl& impl_;
  const Family& family_;
  const Problem& problem_;
  RunnerSettings settings_;
  TunerKernels kernels_;
  DeviceComparer comparer_;
  driver::StreamHandle stream_;
  std::shared_ptr<HostWorkload> prepared_;
  std::unique_ptr<DeviceWorkload> work_;
  std::unique_ptr<LaunchTimer> timer_;
  std::map<std::size_t, std::unique_ptr<driver::Module>> modules_;
  std::map<std::string, Kernel> loaded_;
};

}  // namespace

HostWorkload build_host_workload(const Family& family, const Problem& problem, std::uint64_t seed) {
  HostWorkload h;
  h.workload = family.workload(problem, seed);
  h.reference = family.reference(problem, h.workload);
  return h;
}

std::unique_ptr<CandidateRunner> make_in_process_runner(Runtime& runtime, const Family& family, const Problem& problem,
                                                        const RunnerSettings& settings,
                                                        std::shared_ptr<HostWorkload> prepared) {
  return std::make_unique<InProcessRunner>(runtime, family, problem, settings, std::move(prepared));
}

}  // namespace jitune::tuner
