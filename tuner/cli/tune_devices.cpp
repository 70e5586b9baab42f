// jitune tune --suite ... --devices all|0,1,...: every listed GPU of this host tunes its shard of the suite in a
// worker process of its own (this same executable with --device d --shard k/N --cache <its own store>), and the
// workers' stores are merged into the user cache at the end. A store is written record by record (SQLite commits),
// so a worker that crashes or is killed leaves every record it committed, and the merge takes them all. The workers
// share compiled programs (--compile-share) and work claims (--claims): a worker done with its shard tunes the
// others' items nobody has started, from their ends, and the item a killed worker was tuning is taken over.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include <jitune/error.hpp>
#include <jitune/runtime.hpp>

#include "cache/store.hpp"
#include "runtime/stores.hpp"
#include "tuner/cli/commands.hpp"

namespace jitune::cli {
namespace {

using nlohmann::json;

// Options of the command line that the workers get in another form (their own store and device) or not at all.
bool dropped_with_value(std::string_view a) {
  return a == "--devices" || a == "--cache" || a == "--device";
}
bool dropped_joined(std::string_view a) {
  return a.rfind("--devices=", 0) == 0 || a.rfind("--cache=", 0) == 0 || a.rfind("--device=", 0) == 0;
}

// NVRTC threads of each of `workers` worker processes: the user's --threads, else the host's cores split between
// them (each pool on all cores made two workers run 64 compile threads on 32 cores, and every kernel's compile
// took 0.54 instead of 0.41 CPU-s: bench/RESULTS.md, 2026-11-27, sixth session).
unsigned worker_threads(unsigned asked, int workers) {
  if (asked > 0) return asked;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return std::max(1u, cores / static_cast<unsigned>(std::max(workers, 1)));
}

struct Worker {
  int device = 0;
  std::string store, json_file;
  pid_t pid = -1;
  int out = -1;  ///< Read end of the worker's stderr (and stdout without --json).
  std::thread reader;
  int exit_code = -1, signal = 0;
};

// Lines of a worker's output, each prefixed with its GPU, written whole under one lock.
void relay(int fd, int device, std::FILE* to, std::mutex& lock) {
  std::string pending;
  char buf[4096];
  const std::string prefix = "[gpu " + std::to_string(device) + "] ";
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<std::size_t>(n));
    for (std::size_t nl; (nl = pending.find_first_of("\n\r")) != std::string::npos;) {
      if (nl > 0) {
        std::lock_guard<std::mutex> g(lock);
        std::fprintf(to, "%s%s\n", prefix.c_str(), pending.substr(0, nl).c_str());
        std::fflush(to);
      }
      pending.erase(0, nl + 1);
    }
  }
  if (!pending.empty()) {
    std::lock_guard<std::mutex> g(lock);
    std::fprintf(to, "%s%s\n", prefix.c_str(), pending.c_str());
  }
  ::close(fd);
}

void spawn(Worker& w, const std::string& exe, const std::vector<std::string>& args, bool json_out) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("jitune tune --devices: pipe: ") + std::strerror(errno));
  int json_fd = -1;
  if (json_out) {
    json_fd = ::open(w.json_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (json_fd < 0)
      throw Error("jitune tune --devices: cannot write " + w.json_file + ": " + std::strerror(errno));
  }
  std::vector<const char*> argv;
  argv.push_back(exe.c_str());
  for (const std::string& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(std::string("jitune tune --devices: fork: ") + std::strerror(errno));
  if (pid == 0) {  // only async-signal-safe calls until exec
    ::dup2(json_out ? json_fd : fds[1], 1);
    ::dup2(fds[1], 2);
    ::execv(exe.c_str(), const_cast<char* const*>(argv.data()));
    ::_exit(127);
  }
  ::close(fds[1]);
  if (json_fd >= 0) ::close(json_fd);
  w.pid = pid;
  w.out = fds[0];
}

}  // namespace

std::vector<int> device_list(const std::string& spec, bool plan) {
  std::vector<int> out;
  if (spec == "all") {
    if (plan)
      throw InvalidArgument("jitune tune: --devices all counts this machine's GPUs, and --plan lists the work without "
                            "one; name the devices (--devices 0,1)");
    const int n = device_count();
    if (n == 0) throw NoDevice("jitune tune --devices all found none (" + device_unavailable_reason() + ")");
    for (int d = 0; d < n; ++d) out.push_back(d);
    return out;
  }
  std::set<int> seen;
  std::stringstream in(spec);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty() || item.size() > 4 || item.find_first_not_of("0123456789") != std::string::npos)
      throw InvalidArgument("jitune tune: --devices takes 'all' or GPU ordinals separated by commas (0,1,3), not '" +
                            spec + "'");
    const int d = std::stoi(item);
    if (!seen.insert(d).second)
      throw InvalidArgument("jitune tune: --devices names GPU " + item + " twice; each GPU runs one worker");
    out.push_back(d);
  }
  if (out.empty()) throw InvalidArgument("jitune tune: --devices names no GPU; give 'all' or ordinals (0,1)");
  if (!plan) {
    const int n = device_count();
    if (n == 0) throw NoDevice("jitune tune --devices " + spec + ": " + device_unavailable_reason());
    for (int d : out)
      if (d >= n)
        throw InvalidArgument("jitune tune: --devices names GPU " + std::to_string(d) + ", but this machine has " +
                              std::to_string(n) + " (0 to " + std::to_string(n - 1) + ")");
  }
  return out;
}

int tune_devices(const Common& common, const TuneArgs& args) {
  const std::vector<int> devices = device_list(args.devices, args.plan);
  const int n = static_cast<int>(devices.size());
  if (args.plan) {
    // Each GPU's shard, as its worker would take it (no GPU needed).
    json plans = json::array();
    for (int k = 0; k < n; ++k) {
      TuneArgs a = args;
      a.devices.clear();
      a.shard = std::to_string(k) + "/" + std::to_string(n);
      if (!common.json) {
        std::printf("gpu %d:\n", devices[k]);
        std::fflush(stdout);
        if (const int code = tune(common, a)) return code;
        continue;
      }
      std::ostringstream captured;
      std::streambuf* old = std::cout.rdbuf(captured.rdbuf());
      const int code = tune(common, a);
      std::cout.rdbuf(old);
      if (code) {
        std::cout << captured.str();
        return code;
      }
      json plan = json::parse(captured.str());
      plan["device"] = devices[k];
      plan["compile_threads"] = worker_threads(args.threads, n);
      plans.push_back(std::move(plan));
    }
    if (common.json) std::cout << json{{"devices", plans}}.dump(2) << "\n";
    return 0;
  }
  if (n == 1) {  // one GPU: this process tunes it
    Common c = common;
    c.device = devices[0];
    TuneArgs a = args;
    a.devices.clear();
    return tune(c, a);
  }

  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("jitune tune --devices: cannot find this executable (/proc/self/exe): " + ec.message());
  const std::filesystem::path target = cache_path(common);
  // The workers' stores live beside the target until they are merged.
  const std::filesystem::path dir =
      target.parent_path() / (target.filename().string() + ".devices-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);

  std::vector<std::string> rest;  // the command line without what each worker gets its own way
  for (std::size_t i = 1; i < args.argv.size(); ++i) {
    const std::string& a = args.argv[i];
    if (dropped_with_value(a)) {
      ++i;
      continue;
    }
    if (dropped_joined(a) || a == "--json") continue;
    rest.push_back(a);
  }
  std::vector<Worker> workers(static_cast<std::size_t>(n));
  std::mutex lock;
  std::FILE* progress = common.json ? stderr : stdout;
  const auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < n; ++k) {
    Worker& w = workers[static_cast<std::size_t>(k)];
    w.device = devices[static_cast<std::size_t>(k)];
    w.store = (dir / ("gpu" + std::to_string(w.device) + ".sqlite")).string();
    w.json_file = (dir / ("gpu" + std::to_string(w.device) + ".json")).string();
    std::vector<std::string> wargs = {"--cache", w.store, "--device", std::to_string(w.device)};
    if (common.json) wargs.push_back("--json");
    wargs.insert(wargs.end(), rest.begin(), rest.end());
    wargs.push_back("--shard");
    wargs.push_back(std::to_string(k) + "/" + std::to_string(n));
    if (args.threads == 0) {  // else --threads is in `rest`
      wargs.push_back("--threads");
      wargs.push_back(std::to_string(worker_threads(0, n)));
    }
    wargs.push_back("--compile-share");  // a program one worker compiled, the others read back
    wargs.push_back((dir / "compiled").string());
    wargs.push_back("--claims");  // a worker done with its shard takes the others' items nobody has started
    wargs.push_back((dir / "claims").string());
    spawn(w, exe.string(), wargs, common.json);
    w.reader = std::thread(relay, w.out, w.device, progress, std::ref(lock));
  }
  // Reaped in the order they end, so a worker that died is no zombie while the others look at its claims.
  for (std::size_t left = workers.size(); left > 0;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;  // ECHILD: none left
    }
    for (Worker& w : workers) {
      if (w.pid != pid || w.exit_code != -1 || w.signal != 0) continue;
      if (WIFEXITED(status)) w.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) w.signal = WTERMSIG(status);
      --left;
    }
  }
  for (Worker& w : workers) w.reader.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Every record a worker committed goes into the target: the shards hold disjoint keys, so the merge adds them;
  // a key the target already holds keeps its record unless the incoming one is faster (as `cache merge --trust`).
  cache::Store store(target, cache::OpenMode::kReadWrite);
  cache::ImportReport merged;
  json per_device = json::array();
  bool all_ok = true;
  for (const Worker& w : workers) {
    json entry = {{"device", w.device}, {"exit_code", w.exit_code}, {"signal", w.signal}, {"store", w.store}};
    if (common.json) {
      try {
        std::ifstream f(w.json_file);
        entry["output"] = json::parse(f);
      } catch (const std::exception&) {
        entry["output"] = nullptr;  // a worker that died wrote no JSON
      }
    }
    all_ok = all_ok && w.exit_code == 0;
    std::size_t added = 0;
    if (std::filesystem::exists(w.store, ec)) {
      cache::Store other(w.store, cache::OpenMode::kReadOnly);
      const cache::ImportReport one = store.merge_from(other, check_with_registry, true);
      merged.added += one.added, merged.replaced += one.replaced, merged.kept += one.kept;
      merged.rejected += one.rejected;
      added = one.added + one.replaced;
    }
    entry["records_merged"] = added;
    per_device.push_back(std::move(entry));
    if (!common.json) {
      const std::string how = w.signal ? "killed by signal " + std::to_string(w.signal)
                                       : "exit " + std::to_string(w.exit_code);
      std::printf("gpu %d: %s, %zu records merged\n", w.device, how.c_str(), added);
    }
  }
  // The workers' stores go once merged; kept where a worker failed, for a look (their records are merged).
  if (all_ok && merged.rejected == 0) std::filesystem::remove_all(dir, ec);
  if (common.json) {
    std::cout << json{{"devices", per_device},
                      {"wall_s", wall},
                      {"merged_into", target.string()},
                      {"merge", {{"added", merged.added}, {"replaced", merged.replaced}, {"kept", merged.kept},
                                 {"rejected", merged.rejected}}}}
                     .dump(2)
              << "\n";
  } else {
    std::printf("%d GPUs, %.1f s wall; merged into %s: %zu added, %zu replaced by faster records, %zu kept, %zu "
                "rejected%s\n",
                n, wall, target.string().c_str(), merged.added, merged.replaced, merged.kept, merged.rejected,
                all_ok ? "" : ("; the workers' stores stay in " + dir.string()).c_str());
  }
  return all_ok && merged.rejected == 0 ? 0 : kExitError;
}

}  // namespace jitune::cli
