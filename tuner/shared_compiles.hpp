// SharedCompiles: NVRTC programs compiled once for several tuner processes of one run (`jitune tune --devices`, a
// worker per GPU, or `--shard` processes on hosts that share a folder) through a folder they share. A process that
// needs a program reads it back when another has published it; claims it (an O_EXCL claim file holding its pid and
// host), compiles and publishes it when nobody has; and waits while a live process holds the claim (a claim of
// another host counts as live). A claim whose process has died on this host is taken over; a wait longer than the
// limit compiles here. Only successful programs are published: a failing one is compiled (and reported) by each
// process that needs it. Published files are written beside their name and renamed, so a reader sees a whole file
// or none; a file that does not read back whole is compiled again.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "runtime/compiler.hpp"

namespace jitune::tuner {

class SharedCompiles {
 public:
  /// `dir` is created when missing. `claim_wait_s`: the longest wait for another process's claim.
  explicit SharedCompiles(std::filesystem::path dir, double claim_wait_s = 120);

  /// The program of `key`: read back, or compiled here by `compile` (then published when it succeeded).
  CompiledProgram get(const std::string& key, const std::function<CompiledProgram()>& compile);

  /// The key of a program: program text, name expressions, arch, NVRTC version and options (Compiler::binary_key
  /// over all names) and whether ptxas's resource report is in it.
  static std::string key(const Compiler& compiler, const std::string& program, const std::vector<std::string>& names,
                         const std::string& arch, bool resource_report);

  const std::filesystem::path& dir() const noexcept { return dir_; }
  /// Programs this object compiled, and programs it read back (another process, or another thread, compiled them).
  std::size_t compiled() const noexcept { return compiled_.load(); }
  std::size_t read_back() const noexcept { return read_back_.load(); }

 private:
  std::filesystem::path dir_;
  double claim_wait_s_;
  std::atomic<std::size_t> compiled_{0}, read_back_{0};
};

/// Claims of work items among the tuner processes of one run (`jitune tune --devices`, or `--shard` processes on
/// hosts that share a folder), through a folder they share: an item is tuned by the process whose O_EXCL claim file
/// (holding its pid and host) exists first, and is marked done when its session ends. A claim without the mark
/// whose process has died on this host (a worker killed while it tuned that item) is taken over; a claim made on
/// another host is never taken over (its process cannot be seen from here). Two processes that find one dead claim
/// at the same moment may both tune the item: the merge keeps one record per key.
class WorkClaims {
 public:
  /// `dir` is created when missing.
  explicit WorkClaims(std::filesystem::path dir);

  /// Whether this process tunes `family`'s `signature`: claimed now, or taken over from a process that died.
  bool claim(const std::string& family, const std::string& signature);
  /// Whether another process has claimed it (a cheap look, nothing changed: a claim may still be taken over).
  bool claimed(const std::string& family, const std::string& signature) const;
  /// The item's session has ended (tuned, failed or skipped): nobody takes it over.
  void done(const std::string& family, const std::string& signature);

  const std::filesystem::path& dir() const noexcept { return dir_; }
  /// Items taken over from a process that died.
  std::size_t taken_over() const noexcept { return taken_over_; }

 private:
  std::filesystem::path path(const std::string& family, const std::string& signature, const char* suffix) const;
  std::filesystem::path dir_;
  std::size_t taken_over_ = 0;
};

/// The bytes of a successful program as SharedCompiles publishes it, and back (nullopt-like: ok false when the
/// bytes are not a whole program of this format).
std::string encode_program(const CompiledProgram& program);
CompiledProgram decode_program(const std::string& bytes);

}  // namespace jitune::tuner
