// SharedCompiles: the claim / publish / read-back protocol over a folder, and the published file's format.
#include "tuner/shared_compiles.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include <jitune/error.hpp>

#include "templates/sources.hpp"

namespace jitune::tuner {
namespace {

constexpr char kMagic[] = "jitune-program-1\n";

void put_u64(std::string& out, std::uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
void put_bytes(std::string& out, const char* data, std::size_t n) {
  put_u64(out, n);
  out.append(data, n);
}

struct Reader {
  const std::string& in;
  std::size_t at = 0;
  bool ok = true;
  std::uint64_t u64() {
    std::uint64_t v = 0;
    if (in.size() - at < sizeof v) {
      ok = false;
      return 0;
    }
    std::memcpy(&v, in.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::string bytes() {
    const std::uint64_t n = u64();
    if (!ok || in.size() - at < n) {
      ok = false;
      return {};
    }
    std::string s = in.substr(at, n);
    at += n;
    return s;
  }
};

std::string read_file(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// Whether process `pid` has ended and waits to be reaped (a zombie: kill(pid, 0) still succeeds on it). A worker
// killed while the others run stays one until `jitune tune --devices` waits for it.
bool zombie(long pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const std::size_t close = stat.rfind(')');  // "pid (name) S ...": the name may hold spaces and parentheses
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

// This machine's name, as claims record it (processes of several hosts may share a folder on a network file system).
const std::string& this_host() {
  static const std::string name = [] {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return std::string("?");
    return std::string(buf);
  }();
  return name;
}

// Whether the process that wrote `claim` may still be working on it: its pid is alive (or the file cannot be read
// yet: it is being written). A claim made on another host counts as alive: its process cannot be seen from here.
bool claim_alive(const std::filesystem::path& claim) {
  const std::string text = read_file(claim);
  if (text.empty()) return std::filesystem::exists(claim);
  std::istringstream fields(text);
  long pid = 0;
  std::string host;
  fields >> pid >> host;
  if (pid <= 0) return false;
  if (!host.empty() && host != this_host()) return true;
  return (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) && !zombie(pid);
}

// Creates `claim` if nobody has (O_EXCL) and writes this process's pid and host into it, in one write.
bool create_claim(const std::filesystem::path& claim) {
  const int fd = ::open(claim.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) return false;
    throw Error("shared claims: cannot create " + claim.string() + ": " + std::strerror(errno) +
                "; give a writable folder");
  }
  const std::string holder = std::to_string(::getpid()) + " " + this_host() + "\n";
  [[maybe_unused]] const ssize_t written = ::write(fd, holder.data(), holder.size());
  ::close(fd);
  return true;
}

}  // namespace

std::string encode_program(const CompiledProgram& p) {
  std::string out(kMagic);
  put_bytes(out, p.log.data(), p.log.size());
  put_bytes(out, p.options.data(), p.options.size());
  put_bytes(out, p.cubin.data(), p.cubin.size());
  put_u64(out, p.lowered.size());
  for (const std::string& name : p.lowered) put_bytes(out, name.data(), name.size());
  put_u64(out, p.resources.size());
  for (const KernelResources& r : p.resources)
    for (int v : {r.registers, r.stack_bytes, r.spill_store_bytes, r.spill_load_bytes})
      put_u64(out, static_cast<std::uint64_t>(static_cast<std::int64_t>(v)));
  std::uint64_t seconds = 0;
  std::memcpy(&seconds, &p.seconds, sizeof seconds);
  put_u64(out, seconds);
  put_u64(out, out.size() + sizeof(std::uint64_t));  // the whole length last: a cut file does not read back
  return out;
}

CompiledProgram decode_program(const std::string& bytes) {
  CompiledProgram p;
  const std::size_t magic = sizeof kMagic - 1;
  if (bytes.size() < magic + sizeof(std::uint64_t) || bytes.compare(0, magic, kMagic) != 0) return p;
  std::uint64_t total = 0;
  std::memcpy(&total, bytes.data() + bytes.size() - sizeof total, sizeof total);
  if (total != bytes.size()) return p;
  Reader r{bytes, magic};
  p.log = r.bytes();
  p.options = r.bytes();
  const std::string cubin = r.bytes();
  p.cubin.assign(cubin.begin(), cubin.end());
  const std::uint64_t names = r.u64();
  for (std::uint64_t i = 0; r.ok && i < names && i < 100000; ++i) p.lowered.push_back(r.bytes());
  const std::uint64_t resources = r.u64();
  for (std::uint64_t i = 0; r.ok && i < resources && i < 100000; ++i) {
    KernelResources k;
    for (int* v : {&k.registers, &k.stack_bytes, &k.spill_store_bytes, &k.spill_load_bytes})
      *v = static_cast<int>(static_cast<std::int64_t>(r.u64()));
    p.resources.push_back(k);
  }
  const std::uint64_t seconds = r.u64();
  std::memcpy(&p.seconds, &seconds, sizeof seconds);
  p.ok = r.ok && p.lowered.size() == names && p.resources.size() == resources && !p.cubin.empty() &&
         r.at + sizeof(std::uint64_t) == bytes.size();
  return p;
}

SharedCompiles::SharedCompiles(std::filesystem::path dir, double claim_wait_s)
    : dir_(std::move(dir)), claim_wait_s_(claim_wait_s) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec)
    throw Error("shared compiles: cannot create the folder " + dir_.string() + ": " + ec.message() +
                "; give a writable folder");
}

std::string SharedCompiles::key(const Compiler& compiler, const std::string& program,
                                const std::vector<std::string>& names, const std::string& arch, bool resource_report) {
  std::string all = resource_report ? "resources\n" : "plain\n";
  for (const std::string& name : names) all += name + '\n';
  return compiler.binary_key(program, all, arch);
}

CompiledProgram SharedCompiles::get(const std::string& key, const std::function<CompiledProgram()>& compile) {
  const std::filesystem::path published = dir_ / (key + ".program"), claim = dir_ / (key + ".claim");
  auto read_back = [&]() -> std::optional<CompiledProgram> {
    CompiledProgram p = decode_program(read_file(published));
    if (!p.ok) return std::nullopt;
    ++read_back_;
    return p;
  };
  if (auto p = read_back()) return std::move(*p);
  const bool mine = create_claim(claim);
  if (!mine) {
    // Another process (or thread) compiles it: wait for its file while its claim is alive, up to the limit.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(claim_wait_s_);
    while (std::chrono::steady_clock::now() < give_up) {
      if (auto p = read_back()) return std::move(*p);
      if (!std::filesystem::exists(claim)) break;  // it failed and withdrew, or finished (read above)
      if (!claim_alive(claim)) break;              // its process died
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (auto p = read_back()) return std::move(*p);
  }
  CompiledProgram out;
  std::error_code ec;
  try {
    out = compile();
  } catch (...) {
    if (mine) std::filesystem::remove(claim, ec);
    throw;
  }
  ++compiled_;
  if (out.ok) {
    std::random_device random;
    const std::filesystem::path temp =
        dir_ / ("." + key + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(random()));
    {
      std::ofstream f(temp, std::ios::binary);
      const std::string bytes = encode_program(out);
      f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    std::filesystem::rename(temp, published, ec);  // a reader sees the whole file or none
    if (ec) std::filesystem::remove(temp, ec);
  }
  if (mine) std::filesystem::remove(claim, ec);  // a failure withdraws the claim: each process compiles it then
  return out;
}

WorkClaims::WorkClaims(std::filesystem::path dir) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec)
    throw Error("work claims: cannot create the folder " + dir_.string() + ": " + ec.message() +
                "; give a writable folder");
}

std::filesystem::path WorkClaims::path(const std::string& family, const std::string& signature,
                                       const char* suffix) const {
  return dir_ / (hex64(hash64(signature, hash64(family))) + suffix);
}

bool WorkClaims::claimed(const std::string& family, const std::string& signature) const {
  std::error_code ec;
  return std::filesystem::exists(path(family, signature, ".claim"), ec);
}

bool WorkClaims::claim(const std::string& family, const std::string& signature) {
  const std::filesystem::path claim = path(family, signature, ".claim");
  if (create_claim(claim)) return true;
  std::error_code ec;
  if (std::filesystem::exists(path(family, signature, ".done"), ec) || claim_alive(claim)) return false;
  // Its process died before the item's session ended: move the dead claim aside (one process wins the rename)
  // and claim afresh. What was moved may be a claim another process made after the look above: give it back.
  std::random_device random;
  std::string hidden = ".";  // appended piecewise: g++ 12 warns (-Wrestrict, falsely) on "." + string + ...
  hidden += claim.filename().string();
  hidden += ".dead." + std::to_string(::getpid()) + "." + std::to_string(random());
  const std::filesystem::path aside = dir_ / hidden;
  std::filesystem::rename(claim, aside, ec);
  if (ec) return false;
  if (claim_alive(aside)) {
    // Back under its name unless yet another process claimed it meanwhile (link fails then: that one holds it).
    [[maybe_unused]] const int relinked = ::link(aside.c_str(), claim.c_str());
    std::filesystem::remove(aside, ec);
    return false;
  }
  std::filesystem::remove(aside, ec);
  if (!create_claim(claim)) return false;
  ++taken_over_;
  return true;
}

void WorkClaims::done(const std::string& family, const std::string& signature) {
  std::ofstream(path(family, signature, ".done")) << ::getpid() << " " << this_host() << "\n";
}

}  // namespace jitune::tuner
