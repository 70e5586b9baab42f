// Binary cache: memory and disk round trip, atomic files, damaged files ignored (recompiled, never loaded).
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <fstream>
#include <random>

#include "runtime/binary_cache.hpp"
#include "runtime/compiler.hpp"
#include "templates/sources.hpp"

namespace jitune {

TEST_CASE("binary cache round trip through disk, and damage is detected") {
  const auto dir = std::filesystem::temp_directory_path() / ("jitune_bin_" + std::to_string(std::random_device{}()));
  CachedBinary b{{'\x7f', 'E', 'L', 'F', '\0', '\1', '\2'}, "_Z6kernelv"};
  {
    BinaryCache cache(dir);
    CHECK_FALSE(cache.get("k1").has_value());
    cache.put("k1", b);
    CHECK(cache.last_write_error().empty());
  }
  BinaryCache fresh(dir);  // a new process: nothing in memory
  auto hit = fresh.get("k1");
  REQUIRE(hit.has_value());
  CHECK(hit->cubin == b.cubin);
  CHECK(hit->lowered_name == b.lowered_name);
  for (const auto& e : std::filesystem::directory_iterator(dir))
    CHECK(e.path().extension() == ".bin");  // no temp files left behind
  {
    std::fstream f(dir / "k1.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put('X');  // flip a byte of the image
  }
  CHECK_FALSE(BinaryCache(dir).get("k1").has_value());
  std::ofstream(dir / "k2.bin") << "short";
  CHECK_FALSE(BinaryCache(dir).get("k2").has_value());
  std::filesystem::remove_all(dir);
}

TEST_CASE("a binary is bound to its key: renamed, cut or extended files are not loaded") {
  const auto dir = std::filesystem::temp_directory_path() / ("jitune_bin_" + std::to_string(std::random_device{}()));
  CachedBinary b{std::vector<char>(1000, 'i'), "_Z1kv"};
  BinaryCache(dir).put("good", b);
  REQUIRE(BinaryCache(dir).get("good").has_value());
  std::filesystem::copy_file(dir / "good.bin", dir / "other.bin");  // a valid image under another key's name
  CHECK_FALSE(BinaryCache(dir).get("other").has_value());
  const auto size = std::filesystem::file_size(dir / "good.bin");
  std::filesystem::copy_file(dir / "good.bin", dir / "cut.bin");
  std::filesystem::resize_file(dir / "cut.bin", size - 1);
  CHECK_FALSE(BinaryCache(dir).get("cut").has_value());
  std::filesystem::copy_file(dir / "good.bin", dir / "long.bin");
  std::ofstream(dir / "long.bin", std::ios::app | std::ios::binary) << "x";
  std::filesystem::rename(dir / "long.bin", dir / "good.bin");  // the key's own file, one byte longer
  CHECK_FALSE(BinaryCache(dir).get("good").has_value());
  std::filesystem::remove_all(dir);
}

TEST_CASE("an unwritable cache folder keeps binaries in memory and says so") {
  BinaryCache cache("/proc/jitune-cannot-write-here");
  cache.put("k", CachedBinary{{'a'}, "f"});
  CHECK(cache.get("k").has_value());
  CHECK(cache.last_write_error().find("could not write") != std::string::npos);
}

TEST_CASE("binary keys change with the program, the name and the architecture") {
  Compiler c;
  const std::string k = c.binary_key("p", "n", "sm_90");
  CHECK(k.size() == 64);  // a SHA-256
  CHECK(k.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(k == c.binary_key("p", "n", "sm_90"));
  CHECK(k != c.binary_key("p2", "n", "sm_90"));
  CHECK(k != c.binary_key("p", "n2", "sm_90"));
  CHECK(k != c.binary_key("p", "n", "sm_80"));
}

TEST_CASE("binary keys change with the templates a program includes, and only with those") {
  // A program's text only includes its template (#include "conv2d/conv2d.cuh"), so the headers it reaches must be in
  // the key: a kernel binary kept on disk by one jitune build (or $JITUNE_TEMPLATE_DIR) is not loaded by another.
  // Headers it does not reach stay out: a new or edited template of another family keeps the kept binaries valid.
  const Compiler plain;
  const std::string program = "#include \"elementwise/elementwise.cuh\"\n", name = "kernel";
  auto edited = [](std::string_view file, bool rename) {
    std::vector<SourceFile> list = template_sources();
    bool found = false;
    for (SourceFile& f : list)
      if (f.name == file) {
        (rename ? f.name : f.contents) += rename ? "x" : "\n// an edit\n";
        found = true;
      }
    REQUIRE(found);
    return Compiler(list);
  };
  const std::string key = Compiler(template_sources()).binary_key(program, name, "sm_90");
  CHECK(plain.binary_key(program, name, "sm_90") == key);
  // The program's own template, and a header it reaches only through it (common/types.cuh).
  REQUIRE(template_source("elementwise/elementwise.cuh").find("#include \"common/types.cuh\"") != std::string::npos);
  CHECK(edited("elementwise/elementwise.cuh", false).binary_key(program, name, "sm_90") != key);
  CHECK(edited("common/types.cuh", false).binary_key(program, name, "sm_90") != key);
  CHECK(edited("elementwise/elementwise.cuh", true).binary_key(program, name, "sm_90") != key);  // now missing
  // Another family's template, edited or renamed: the same key.
  CHECK(edited("conv2d/winograd4_gemm.cuh", false).binary_key(program, name, "sm_90") == key);
  CHECK(edited("conv2d/winograd4_gemm.cuh", true).binary_key(program, name, "sm_90") == key);
  // A conv2d algorithm's own file reaches everything conv2d.cuh reaches, and not the other way round.
  const std::string conv = "#include \"conv2d/conv2d.cuh\"\n", gemm = "#include \"conv2d/winograd4_gemm.cuh\"\n";
  CHECK(edited("conv2d/winograd4_gemm.cuh", false).binary_key(conv, name, "sm_90") == plain.binary_key(conv, name, "sm_90"));
  CHECK(edited("conv2d/conv2d.cuh", false).binary_key(gemm, name, "sm_90") != plain.binary_key(gemm, name, "sm_90"));
  // A program of no template includes no header.
  CHECK(edited("common/types.cuh", false).binary_key("__global__ void k() {}", "k", "sm_90") ==
        plain.binary_key("__global__ void k() {}", "k", "sm_90"));
  // The edited list is what NVRTC sees: a header that no longer compiles fails the program.
  std::vector<SourceFile> broken = template_sources();
  bool found = false;
  for (SourceFile& f : broken)
    if (f.name == "elementwise/elementwise.cuh") {
      f.contents = "#error this template was edited\n" + f.contents;
      found = true;
    }
  REQUIRE(found);
  const CompiledProgram out = Compiler(broken).compile(program, {}, "sm_90", false);
  CHECK_FALSE(out.ok);
  CHECK(out.log.find("this template was edited") != std::string::npos);
}

}  // namespace jitune

namespace jitune {

TEST_CASE("a binary another user could have written is never loaded: it is compiled again") {
  const auto dir = std::filesystem::temp_directory_path() / ("jitune_bin_" + std::to_string(std::random_device{}()));
  const CachedBinary b{{'\x7f', 'E', 'L', 'F', '\3'}, "_Z6kernelv"};
  BinaryCache(dir).put("k", b);
  REQUIRE(BinaryCache(dir).get("k").has_value());
  CHECK(BinaryCache(dir).untrusted_note().empty());
  namespace fs = std::filesystem;
  // A file others can write: not loaded.
  fs::permissions(dir / "k.bin", fs::perms::others_write, fs::perm_options::add);
  CHECK_FALSE(BinaryCache(dir).get("k").has_value());
  fs::permissions(dir / "k.bin", fs::perms::others_write, fs::perm_options::remove);
  REQUIRE(BinaryCache(dir).get("k").has_value());
  // A folder others can write (a shared /tmp folder, or one left open): nothing in it is loaded, and the runtime's
  // note says why.
  fs::permissions(dir, fs::perms::group_write | fs::perms::others_write, fs::perm_options::add);
  BinaryCache shared(dir);
  CHECK_FALSE(shared.get("k").has_value());
  CHECK(shared.untrusted_note().find("can be written by other users") != std::string::npos);
  CHECK(shared.untrusted_note().find("JITUNE_CACHE_DIR") != std::string::npos);
  fs::remove_all(dir);
  // Under a umask of 002 (a desktop default) the folder and files jitune makes are still writable by this user
  // only, so they load.
  const mode_t old_umask = ::umask(002);
  BinaryCache(dir).put("k", b);
  ::umask(old_umask);
  CHECK((fs::status(dir).permissions() & (fs::perms::group_write | fs::perms::others_write)) == fs::perms::none);
  CHECK((fs::status(dir / "k.bin").permissions() & (fs::perms::group_write | fs::perms::others_write)) ==
        fs::perms::none);
  CHECK(BinaryCache(dir).get("k").has_value());
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace jitune
