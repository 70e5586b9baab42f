// Binary cache: memory and disk round trip, atomic files, damaged files ignored (recompiled, never loaded).
#include <doctest/doctest.h>

#include <fstream>
#include <random>

#include "runtime/binary_cache.hpp"
#include "runtime/compiler.hpp"

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

TEST_CASE("an unwritable cache folder keeps binaries in memory and says so") {
  BinaryCache cache("/proc/jitune-cannot-write-here");
  cache.put("k", CachedBinary{{'a'}, "f"});
  CHECK(cache.get("k").has_value());
  CHECK(cache.last_write_error().find("could not write") != std::string::npos);
}

TEST_CASE("binary keys change with the program, the name and the architecture") {
  Compiler c;
  const std::string k = c.binary_key("p", "n", "sm_90");
  CHECK(k.size() == 32);
  CHECK(k == c.binary_key("p", "n", "sm_90"));
  CHECK(k != c.binary_key("p2", "n", "sm_90"));
  CHECK(k != c.binary_key("p", "n2", "sm_90"));
  CHECK(k != c.binary_key("p", "n", "sm_80"));
}

}  // namespace jitune
