// Tests of SharedCompiles (tuner/shared_compiles.hpp): the programs `jitune tune --devices` workers share through a
// folder. Processes are played by threads, by a second object on the same folder, and by forked children; the
// compile is a stand-in that counts its calls (the protocol does not depend on NVRTC), and one real NVRTC program
// checks the file format keeps everything a session reads.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "runtime/compiler.hpp"
#include "tuner/shared_compiles.hpp"

namespace jitune::tuner {
namespace {

struct Folder {
  std::filesystem::path path;
  Folder() {
    std::random_device random;
    path = std::filesystem::temp_directory_path() / ("jitune-shared-" + std::to_string(random()));
    std::filesystem::create_directories(path);
  }
  ~Folder() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// A compiled-looking program whose bytes say which call made it.
CompiledProgram fake_program(int tag) {
  CompiledProgram p;
  p.ok = true;
  p.log = "ptxas info: tag " + std::to_string(tag);
  p.options = "--gpu-architecture=sm_90 -default-device";
  p.cubin.assign(1000 + tag, static_cast<char>(tag));
  p.lowered = {"_Z1ai", "_Z1bv\0x"};
  KernelResources r;
  r.registers = 40 + tag;
  r.stack_bytes = 0;
  r.spill_store_bytes = -1;
  r.spill_load_bytes = 8;
  p.resources = {r, KernelResources{}};
  p.seconds = 0.125 * tag;
  return p;
}

void check_same(const CompiledProgram& a, const CompiledProgram& b) {
  CHECK(a.ok == b.ok);
  CHECK(a.log == b.log);
  CHECK(a.options == b.options);
  CHECK(a.cubin == b.cubin);
  CHECK(a.lowered == b.lowered);
  REQUIRE(a.resources.size() == b.resources.size());
  for (std::size_t i = 0; i < a.resources.size(); ++i) {
    CHECK(a.resources[i].registers == b.resources[i].registers);
    CHECK(a.resources[i].stack_bytes == b.resources[i].stack_bytes);
    CHECK(a.resources[i].spill_store_bytes == b.resources[i].spill_store_bytes);
    CHECK(a.resources[i].spill_load_bytes == b.resources[i].spill_load_bytes);
  }
  CHECK(a.seconds == b.seconds);
}

TEST_CASE("the published format keeps every field; a cut or foreign file does not read back") {
  const CompiledProgram p = fake_program(3);
  const std::string bytes = encode_program(p);
  check_same(decode_program(bytes), p);
  for (std::size_t cut : {std::size_t{0}, std::size_t{10}, bytes.size() / 2, bytes.size() - 1})
    CHECK_FALSE(decode_program(bytes.substr(0, cut)).ok);
  std::string flipped = bytes;
  flipped[0] = 'J';
  CHECK_FALSE(decode_program(flipped).ok);
  CHECK_FALSE(decode_program(bytes + "x").ok);
}

TEST_CASE("one program is compiled once for every thread and process that asks, and read back by the others") {
  Folder folder;
  SharedCompiles a(folder.path), b(folder.path);
  std::atomic<int> calls{0};
  auto slow = [&] {
    const int n = ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    return fake_program(n);
  };
  std::vector<CompiledProgram> got(6);
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] { got[t] = (t % 2 ? a : b).get("k1", slow); });
  for (auto& t : threads) t.join();
  CHECK(calls == 1);
  for (const auto& p : got) check_same(p, fake_program(1));
  CHECK(a.compiled() + b.compiled() == 1);
  CHECK(a.read_back() + b.read_back() == 5);
  // A later process reads it back without compiling; another key is compiled.
  SharedCompiles later(folder.path);
  check_same(later.get("k1", slow), fake_program(1));
  CHECK(calls == 1);
  check_same(later.get("k2", slow), fake_program(2));
  CHECK(later.compiled() == 1);
  CHECK_FALSE(std::filesystem::exists(folder.path / "k1.claim"));  // claims are withdrawn once published
}

TEST_CASE("a failed compile is not published: each process compiles (and reports) it itself") {
  Folder folder;
  SharedCompiles a(folder.path), b(folder.path);
  int calls = 0;
  auto failing = [&] {
    ++calls;
    CompiledProgram p;
    p.log = "error: no instance of function template";
    return p;
  };
  CHECK_FALSE(a.get("bad", failing).ok);
  CHECK_FALSE(b.get("bad", failing).ok);
  CHECK(calls == 2);
  CHECK_FALSE(std::filesystem::exists(folder.path / "bad.program"));
  CHECK_FALSE(std::filesystem::exists(folder.path / "bad.claim"));
  // A compile that throws withdraws its claim too.
  CHECK_THROWS_AS(a.get("throws", []() -> CompiledProgram { throw std::runtime_error("NVRTC gone"); }),
                  std::runtime_error);
  CHECK_FALSE(std::filesystem::exists(folder.path / "throws.claim"));
}

TEST_CASE("a claim whose process died is taken over at once; a live one is waited for up to the limit") {
  Folder folder;
  // A child process claims a program and dies without publishing it (as a SIGKILLed worker would).
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::ofstream(folder.path / "orphan.claim") << ::getpid() << "\n";
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(std::filesystem::exists(folder.path / "orphan.claim"));
  SharedCompiles s(folder.path, 30);
  int calls = 0;
  auto compile = [&] { return fake_program(++calls); };
  const auto t0 = std::chrono::steady_clock::now();
  check_same(s.get("orphan", compile), fake_program(1));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));  // not the 30 s limit
  CHECK(calls == 1);
  // A claim held by a live process that never publishes: the wait ends at the limit and the program is compiled.
  std::ofstream(folder.path / "stuck.claim") << 1 << "\n";  // pid 1 is alive
  SharedCompiles quick(folder.path, 0.3);
  const auto t1 = std::chrono::steady_clock::now();
  check_same(quick.get("stuck", compile), fake_program(2));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  CHECK(waited >= 0.3);
  CHECK(waited < 5);
  // A published file that does not read back whole is compiled again (and published anew).
  std::ofstream(folder.path / "torn.program", std::ios::binary) << encode_program(fake_program(9)).substr(0, 40);
  check_same(quick.get("torn", compile), fake_program(3));
  check_same(SharedCompiles(folder.path).get("torn", compile), fake_program(3));
  CHECK(calls == 3);
}

TEST_CASE("work claims: one claimant per item; a dead claimant's unfinished item is taken over, a finished one not") {
  Folder folder;
  WorkClaims a(folder.path / "claims"), b(folder.path / "claims");
  CHECK(a.claim("elementwise", "n=1"));
  CHECK_FALSE(b.claim("elementwise", "n=1"));  // held by a live process (this one)
  CHECK_FALSE(a.claim("elementwise", "n=1"));  // once
  CHECK(b.claimed("elementwise", "n=1"));
  CHECK_FALSE(b.claimed("elementwise", "n=2"));
  CHECK(b.claim("elementwise", "n=2"));
  CHECK(a.claim("permute", "n=2"));  // the family is part of the item
  // Many threads race for each of 50 items: each is claimed exactly once.
  std::atomic<int> won{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      WorkClaims mine(folder.path / "claims");
      for (int i = 0; i < 50; ++i)
        if (mine.claim("upsample", "i=" + std::to_string(i))) ++won;
    });
  for (std::thread& t : threads) t.join();
  CHECK(won == 50);
  // A child claims two items, finishes one, and dies in the middle of the other (as a SIGKILLed worker would).
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    WorkClaims dying(folder.path / "claims");
    const bool ok = dying.claim("reduce_rows", "finished") && dying.claim("reduce_rows", "started");
    dying.done("reduce_rows", "finished");
    ::_exit(ok ? 0 : 1);
  }
  // Not reaped yet: the dead child is a zombie, which kill(pid, 0) still finds; its claim must count as dead.
  for (int i = 0; i < 500 && !a.claimed("reduce_rows", "started"); ++i)  // the child's claim first
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  bool taken = false;
  for (int i = 0; i < 500 && !taken; ++i) {
    taken = a.claim("reduce_rows", "started");
    if (!taken) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(taken);  // taken over from the zombie
  CHECK(a.taken_over() == 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  CHECK_FALSE(a.claim("reduce_rows", "finished"));  // its session ended: nobody tunes it again
  CHECK(a.taken_over() == 1);
  CHECK_FALSE(b.claim("reduce_rows", "started"));  // now held by a live process again
  CHECK(b.taken_over() == 0);
  // No temporary files are left beside the claims.
  for (const auto& entry : std::filesystem::directory_iterator(folder.path / "claims"))
    CHECK(entry.path().filename().string().front() != '.');
  // A folder that cannot be created is a clear error.
  std::ofstream(folder.path / "file") << "x";
  CHECK_THROWS_WITH(WorkClaims(folder.path / "file" / "claims"), doctest::Contains("cannot create the folder"));
}

TEST_CASE("a claim made on another host is never taken over: its process cannot be seen from here") {
  Folder folder;
  const pid_t child = ::fork();  // a pid that is surely dead once reaped
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  WorkClaims claims(folder.path / "claims");
  // Another host's claim of that pid holds (a Slurm task elsewhere may be tuning the item)...
  REQUIRE(claims.claim("permute", "elsewhere"));  // learn the claim file's name from a claim of our own
  std::filesystem::path file;
  for (const auto& entry : std::filesystem::directory_iterator(folder.path / "claims")) file = entry.path();
  std::filesystem::remove(file);
  std::ofstream(file) << child << " some-other-host\n";
  CHECK_FALSE(claims.claim("permute", "elsewhere"));
  CHECK(claims.taken_over() == 0);
  // ...while the same pid named with this host, or with no host (an older claim), is dead and taken over.
  std::filesystem::remove(file);
  char host[256] = {};
  REQUIRE(::gethostname(host, sizeof host - 1) == 0);
  std::ofstream(file) << child << " " << host << "\n";
  CHECK(claims.claim("permute", "elsewhere"));
  CHECK(claims.taken_over() == 1);
  std::ifstream back(file);
  long pid = 0;
  std::string named;
  back >> pid >> named;
  CHECK(pid == ::getpid());  // the claim now names this process and this host
  CHECK(named == host);
  // A program claimed on another host is waited for (up to the limit), never taken over at once.
  std::ofstream(folder.path / "far.claim") << child << " some-other-host\n";
  SharedCompiles quick(folder.path, 0.3);
  int calls = 0;
  const auto t0 = std::chrono::steady_clock::now();
  check_same(quick.get("far", [&] { return fake_program(++calls); }), fake_program(1));
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >= 0.3);
}

TEST_CASE("a real NVRTC program read back keeps its cubin, lowered names and ptxas report") {
  Compiler compiler;
  const std::string program = "template <int N> __global__ void k(float* x) { x[threadIdx.x] *= N; }\n";
  const std::vector<std::string> names = {"k<2>", "k<3>"};
  const CompiledProgram direct = compiler.compile(program, names, "sm_90", true);
  REQUIRE_MESSAGE(direct.ok, direct.log);
  Folder folder;
  const std::string key = SharedCompiles::key(compiler, program, names, "sm_90", true);
  CHECK(key != SharedCompiles::key(compiler, program, names, "sm_90", false));  // the report is part of the key
  CHECK(key != SharedCompiles::key(compiler, program, {"k<2>"}, "sm_90", true));
  CHECK(key != SharedCompiles::key(compiler, program, names, "sm_80", true));
  SharedCompiles a(folder.path), b(folder.path);
  check_same(a.get(key, [&] { return direct; }), direct);
  const CompiledProgram back = b.get(key, [] { return CompiledProgram{}; });
  check_same(back, direct);
  REQUIRE(back.resources.size() == 2);
  CHECK(back.resources[0].registers > 0);
  CHECK(b.read_back() == 1);
}

TEST_CASE("a folder that cannot be created is a clear error") {
  Folder folder;
  std::ofstream(folder.path.string() + "-file") << "x";
  const std::filesystem::path inside = folder.path.string() + "-file/sub";
  CHECK_THROWS_WITH([&] { SharedCompiles s(inside); }(), doctest::Contains("cannot create the folder"));
  std::filesystem::remove(folder.path.string() + "-file");
}

}  // namespace
}  // namespace jitune::tuner
