// The worker CandidateRunner (parent side), the worker's main loop, and finding the worker executable.
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <set>

#include "runtime/install_paths.hpp"
#include "runtime/runtime_impl.hpp"
#include "tuner/runner.hpp"
#include "tuner/wire.hpp"


namespace jitune::tuner {
namespace {

using nlohmann::json;

json settings_json(const RunnerSettings& s) {
  return {{"seed", s.seed},           {"l2", std::string(l2_mode_name(s.l2))},
          {"min_time_ms", s.min_time_ms}, {"min_reps", s.min_reps},
          {"max_reps", s.max_reps},   {"retime_reps", s.retime_reps},
          {"cut_ratio", s.cut_ratio}};
}

RunnerSettings settings_from(const json& j) {
  RunnerSettings s;
  s.seed = j.at("seed").get<std::uint64_t>();
  s.l2 = parse_l2_mode(j.at("l2").get<std::string>());
  s.min_time_ms = j.at("min_time_ms").get<double>();
  s.min_reps = j.at("min_reps").get<int>();
  s.max_reps = j.at("max_reps").get<int>();
  s.retime_reps = j.at("retime_reps").get<int>();
  s.cut_ratio = j.at("cut_ratio").get<double>();
  return s;
}

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
                                  strsignal(WTERMSIG(status)) + ")";
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  return "ended";
}

class WorkerRunner final : public CandidateRunner {
 public:
  WorkerRunner(std::string worker, int device, const Family& family, const Problem& problem, const RunnerSettings& s)
      : worker_(std::move(worker)), device_(device), family_(family), problem_(problem), settings_(s) {}
  ~WorkerRunner() override { stop(false); }

  // The worker starts on the workload and reference at once and answers nothing; the setup request that follows
  // uses them.
  void prepare() override {
    if (pid_ >= 0) return;
    spawn();
    wire::write_frame(fd_, {{"op", "prepare"}, {"family", family_.name()}, {"signature", problem_.signature()},
                            {"settings", settings_json(settings_)}});
  }

  void begin_setup() override {
    if (pid_ < 0) spawn();
    if (!setup_sent_) send_setup();
  }

  L2Mode setup() override {
    begin_setup();
    finish_launch();
    return l2_;
  }

  CandidateResult run(const Candidate& c, double best_us) override {
    CandidateResult r;
    r.config = c.config;
    if (pid_ < 0) start();
    send_module(c);
    json req = {{"op", "candidate"}, {"module", c.module_id}, {"lowered", c.lowered}, {"config", c.config.text()},
                {"best_us", best_us}};
    wire::Frame reply;
    const wire::ReadStatus st = call(req, reply, settings_.candidate_timeout_s);
    if (st == wire::ReadStatus::kTimeout) {
      stop(true);
      r.status = "timeout";
      r.reason = "no verdict within " + std::to_string(settings_.candidate_timeout_s) +
                 " s (a kernel that never finishes?); the worker was killed and restarted";
      return r;
    }
    if (st != wire::ReadStatus::kOk) {
      const std::string how = reap();
      r.status = "launch_failed";
      r.reason = "the worker process died running this candidate (" + how + "); it was restarted";
      return r;
    }
    const json& h = reply.header;
    r.status = h.value("status", "launch_failed");
    r.reason = h.value("reason", "");
    r.time_us = h.value("time_us", 0.0);
    r.spread = h.value("spread", 0.0);
    r.reps = h.value("reps", 0);
    if (h.value("fatal", false)) {
      reap();
      r.reason += " (the worker's CUDA context was lost; it was restarted)";
    }
    return r;
  }

  std::vector<std::vector<double>> retime(const std::vector<const Candidate*>& finalists) override {
    if (pid_ < 0) start();
    json items = json::array();
    for (const Candidate* c : finalists) {
      send_module(*c);
      items.push_back({{"module", c->module_id}, {"lowered", c->lowered}, {"config", c->config.text()}});
    }
    wire::Frame reply;
    const double limit = settings_.candidate_timeout_s * static_cast<double>(finalists.size() + 1);
    if (call({{"op", "retime"}, {"items", items}}, reply, limit) != wire::ReadStatus::kOk ||
        !reply.header.contains("rounds") || reply.header["rounds"].size() != finalists.size())
      throw Error("the tuning worker failed while re-timing the finalists (" +
                  (reply.header.is_object() ? reply.header.value("error", std::string("no reply")) : std::string("no reply")) +
                  ")");
    std::vector<std::vector<double>> out;
    for (const auto& r : reply.header["rounds"]) out.push_back(r.get<std::vector<double>>());
    return out;
  }

  int restarts() const override { return starts_ > 0 ? starts_ - 1 : 0; }

 private:
  void start() {
    spawn();
    send_setup();
    finish_launch();
  }

  // Starts the worker process.
  void spawn() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
      throw Error(std::string("cannot create the socket to the tuning worker: ") + std::strerror(errno));
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(sv[0]);
      ::close(sv[1]);
      throw Error(std::string("cannot start the tuning worker: fork: ") + std::strerror(errno));
    }
    if (pid == 0) {
      // Child: only async-signal-safe calls until exec.
      ::dup2(sv[1], 3);
      const char* argv[] = {worker_.c_str(), "--fd", "3", nullptr};
      ::execv(worker_.c_str(), const_cast<char* const*>(argv));
      ::_exit(127);
    }
    ::close(sv[1]);
    fd_ = sv[0];
    pid_ = pid;
    ++starts_;
    modules_sent_.clear();
    setup_sent_ = false;
  }

  // Sends the setup request; finish_launch() reads its answer.
  void send_setup() {
    json req = {{"op", "setup"}, {"family", family_.name()}, {"signature", problem_.signature()},
                {"device", device_}, {"settings", settings_json(settings_)}};
    setup_sent_ = wire::write_frame(fd_, req);
  }

  void finish_launch() {
    wire::Frame reply;
    const wire::ReadStatus st = setup_sent_ ? wire::read_frame(fd_, reply, 600) : wire::ReadStatus::kEof;
    if (st != wire::ReadStatus::kOk || !reply.header.value("ok", false)) {
      const std::string why = st == wire::ReadStatus::kOk ? reply.header.value("error", std::string("?"))
                                                          : "no reply (" + reap() + ")";
      stop(true);
      throw Error("the tuning worker " + worker_ + " could not set up " + std::string(family_.name()) + " " +
                  problem_.signature() + ": " + why);
    }
    l2_ = parse_l2_mode(reply.header.value("l2", std::string("auto")));
  }

  wire::ReadStatus call(const json& req, wire::Frame& reply, double timeout_s, std::string_view blob = {}) {
    if (!wire::write_frame(fd_, req, blob)) return wire::ReadStatus::kEof;
    return wire::read_frame(fd_, reply, timeout_s);
  }

  void send_module(const Candidate& c) {
    if (modules_sent_.count(c.module_id)) return;
    wire::Frame reply;
    const auto& cubin = c.program->cubin;
    if (call({{"op", "module"}, {"id", c.module_id}}, reply, 60, std::string_view(cubin.data(), cubin.size())) ==
        wire::ReadStatus::kOk)
      modules_sent_.insert(c.module_id);
  }

  // Waits for the worker to end and says how it ended.
  std::string reap() {
    if (pid_ < 0) return "not running";
    int status = 0;
    for (int i = 0; i < 100 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i) ::usleep(20000);
    if (::waitpid(pid_, &status, WNOHANG) == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
    ::close(fd_);
    pid_ = -1;
    fd_ = -1;
    return describe_exit(status);
  }

  void stop(bool kill_now) {
    if (pid_ < 0) return;
    if (kill_now) ::kill(pid_, SIGKILL);
    else wire::write_frame(fd_, {{"op", "quit"}});
    int status;
    if (!kill_now) {
      for (int i = 0; i < 250 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i) ::usleep(20000);
      ::kill(pid_, SIGKILL);
    }
    ::waitpid(pid_, &status, 0);
    ::close(fd_);
    pid_ = -1;
    fd_ = -1;
  }

  std::string worker_;
  int device_;
  const Family& family_;
  const Problem& problem_;
  RunnerSettings settings_;
  pid_t pid_ = -1;
  int fd_ = -1;
  int starts_ = 0;
  bool setup_sent_ = false;
  L2Mode l2_ = L2Mode::kAuto;
  std::set<std::size_t> modules_sent_;
};

// The worker's side of the protocol: what the requests have built so far, and one handler per request.
class WorkerServer {
 public:
  explicit WorkerServer(int fd) : fd_(fd) {}

  // Answers requests until "quit" or the end of the connection; 3 after a fault that broke the CUDA context.
  int serve() {
    wire::Frame req;
    while (wire::read_frame(fd_, req, -1) == wire::ReadStatus::kOk) {
      const std::string op = req.header.value("op", "");
      try {
        if (op == "quit") break;
        if (op == "prepare") {
          prepare(req.header);
        } else if (op == "setup") {
          setup(req.header);
        } else if (op == "module") {
          add_module(req);
        } else if (op == "candidate" || op == "retime") {
          measure(op, req.header);
        } else {
          wire::write_frame(fd_, {{"ok", false}, {"error", "unknown request '" + op + "'"}});
        }
      } catch (const CudaError& e) {
        // The context is unusable after a fault: report it and end; the tuner starts a fresh worker.
        wire::write_frame(fd_, {{"ok", false}, {"status", "launch_failed"}, {"reason", e.what()}, {"fatal", true},
                                {"error", e.what()}});
        return 3;
      } catch (const std::exception& e) {
        wire::write_frame(fd_,
                          {{"ok", false}, {"status", "launch_failed"}, {"reason", e.what()}, {"error", e.what()}});
      }
    }
    return 0;
  }

 private:
  static std::string prepared_key(const json& h) {
    return h.at("family").get<std::string>() + "\n" + h.at("signature").get<std::string>() + "\n" +
           std::to_string(h.at("settings").at("seed").get<std::uint64_t>());
  }

  // A "prepare" request builds the workload and reference here, on a thread at nice 10 (its threads inherit that),
  // while the tuner's current session still times on the GPU; "setup" then takes them when family, problem and
  // seed match. The request has no answer, so a failure here only means setup builds them itself (and reports
  // why).
  void prepare(const json& header) {
    try {
      const Family& f = jitune::family(header.at("family").get<std::string>());
      prepared_problem_ = f.parse_problem(header.at("signature").get<std::string>());
      const std::uint64_t seed = settings_from(header.at("settings")).seed;
      prepared_for_ = prepared_key(header);
      prepared_ = std::async(std::launch::async, [&f, problem = prepared_problem_, seed] {
        background_priority();
        return std::make_shared<HostWorkload>(build_host_workload(f, *problem, seed));
      });
    } catch (const std::exception&) {
      prepared_for_.clear();
    }
  }

  // What "prepare" built for this setup request; null when nothing was prepared, it failed, or it was for another.
  std::shared_ptr<HostWorkload> take_prepared(const json& header) {
    std::shared_ptr<HostWorkload> host;
    if (!prepared_.valid()) return host;
    const bool match = prepared_for_ == prepared_key(header);
    try {
      host = prepared_.get();
    } catch (const std::exception&) {
      host.reset();  // built again by the runner's setup, where a failure is reported
    }
    if (!match) host.reset();
    prepared_problem_.reset();
    return host;
  }

  void setup(const json& header) {
    RuntimeOptions o;
    o.device = header.at("device").get<int>();
    o.use_user_cache = false;
    o.use_builtin_shipped_caches = false;
    runtime_ = std::make_unique<Runtime>(o);
    family_ = &jitune::family(header.at("family").get<std::string>());
    problem_ = family_->parse_problem(header.at("signature").get<std::string>());
    std::shared_ptr<HostWorkload> host = take_prepared(header);
    runner_ = make_in_process_runner(*runtime_, *family_, *problem_, settings_from(header.at("settings")),
                                     std::move(host));
    const L2Mode mode = runner_->setup();
    wire::write_frame(fd_, {{"ok", true}, {"l2", std::string(l2_mode_name(mode))}});
  }

  void add_module(const wire::Frame& req) {
    auto program = std::make_shared<CompiledProgram>();
    program->cubin.assign(req.blob.begin(), req.blob.end());
    modules_[req.header.at("id").get<std::size_t>()] = std::move(program);
    wire::write_frame(fd_, {{"ok", true}});
  }

  Candidate candidate_from(const json& j) const {
    Candidate c;
    c.module_id = j.at("module").get<std::size_t>();
    c.program = modules_.at(c.module_id);
    c.lowered = j.at("lowered").get<std::string>();
    c.config = Config::parse(j.at("config").get<std::string>());
    return c;
  }

  // "candidate": one verdict; "retime": the side-by-side rounds of the listed finalists.
  void measure(const std::string& op, const json& header) {
    if (!runner_) throw Error("no setup before " + op);
    if (op == "candidate") {
      const CandidateResult r = runner_->run(candidate_from(header), header.value("best_us", 0.0));
      wire::write_frame(fd_, {{"status", r.status}, {"reason", r.reason}, {"time_us", r.time_us},
                              {"spread", r.spread}, {"reps", r.reps}});
      return;
    }
    std::vector<Candidate> cands;
    for (const auto& item : header.at("items")) cands.push_back(candidate_from(item));
    std::vector<const Candidate*> ptrs;
    for (const auto& c : cands) ptrs.push_back(&c);
    wire::write_frame(fd_, {{"rounds", runner_->retime(ptrs)}});
  }

  int fd_;
  // Declared in the order of their use, so they are destroyed in reverse: the prepared work is waited for first.
  std::unique_ptr<Runtime> runtime_;
  const Family* family_ = nullptr;
  std::unique_ptr<Problem> problem_;
  std::unique_ptr<CandidateRunner> runner_;
  std::map<std::size_t, std::shared_ptr<CompiledProgram>> modules_;
  std::string prepared_for_;
  std::shared_ptr<const Problem> prepared_problem_;
  std::future<std::shared_ptr<HostWorkload>> prepared_;
};

}  // namespace

std::unique_ptr<CandidateRunner> make_worker_runner(const std::string& worker, int device, const Family& family,
                                                    const Problem& problem, const RunnerSettings& settings) {
  return std::make_unique<WorkerRunner>(worker, device, family, problem, settings);
}

std::string find_worker() { return find_worker_executable().string(); }

int worker_main(int argc, char** argv) {
  int fd = -1;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--fd") fd = std::atoi(argv[i + 1]);
  if (fd < 0) {
    std::fprintf(stderr, "jitune-worker is started by the jitune tuner (it measures candidates in a separate process); "
                         "it is not meant to be run by hand\n");
    return 2;
  }
  return WorkerServer(fd).serve();
}

}  // namespace jitune::tuner
