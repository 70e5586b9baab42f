// Permute configs and kernels without a GPU: magic-number division, index width, the heuristic, space
// constraints, alignment adaptation, kernel parameters, the tiled kernel's tile order, and an NVRTC compile
// of every legal config for sm_80 and sm_90 at every unit size.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <set>

#include "permute_test_support.hpp"
#include "runtime/compiler.hpp"
#include "tuner/tuner.hpp"

namespace jitune {

using namespace permute_test;

TEST_CASE("magic-number division matches n / d for 32-bit indices") {
  std::mt19937_64 rng(7);
  std::vector<std::uint64_t> divisors = {1,
                                         2,
                                         3,
                                         5,
                                         7,
                                         31,
                                         32,
                                         33,
                                         64,
                                         65,
                                         127,
                                         1000,
                                         16384,
                                         65535,
                                         65536,
                                         65537,
                                         (1u << 31) - 1,
                                         1u << 31,
                                         1u << 30,
                                         (1u << 30) + 1,
                                         3 * 3 * 128 * 128};
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + rng() % (1u << (1 + rng() % 31)));
  for (std::uint64_t d : divisors) {
    const templates::permute::Divisor div = templates::permute::make_divisor(d);
    const auto magic = static_cast<std::uint32_t>(div.magic);
    const auto shift = static_cast<std::uint32_t>(div.magic >> 32);
    std::vector<std::uint32_t> ns = {0, 1, 0x7fffffffu, 0x7ffffffeu};
    for (std::uint64_t k : {std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{3}, std::uint64_t{1000}}) {
      if (k * d < 0x80000000u) ns.push_back(static_cast<std::uint32_t>(k * d));
      if (k * d - 1 < 0x80000000u) ns.push_back(static_cast<std::uint32_t>(k * d - 1));
    }
    for (int i = 0; i < 300; ++i) ns.push_back(static_cast<std::uint32_t>(rng() & 0x7fffffffu));
    for (std::uint32_t n : ns) {
      const auto hi = static_cast<std::uint32_t>((std::uint64_t{n} * magic) >> 32);
      const std::uint32_t q = static_cast<std::uint32_t>((std::uint64_t{hi} + n) >> shift);
      INFO("n=", n, " d=", d);
      REQUIRE(q == n / d);
      REQUIRE(std::uint64_t{hi} + n < (std::uint64_t{1} << 32));  // the device adds in 32 bits
    }
  }
}

TEST_CASE("index width: 32 bits while every unit offset fits in 31 bits") {
  CHECK_FALSE(templates::permute::needs_index64(0x7fffffff));
  CHECK(templates::permute::needs_index64(std::int64_t{1} << 31));
  const DeviceInfo dev = nominal_device(90);
  auto big = problem("int8", "57349x57347", "10");  // 3.3e9 one-byte units
  CHECK(fam().source(*big, fam().heuristic(*big, dev)).name_expression.find("unsigned long long>") !=
        std::string::npos);
  auto wide = problem("int8", "40000x5000x16", "102");  // 3.2e9 bytes, but 16-byte units: 2e8 of them
  CHECK(fam().source(*wide, fam().heuristic(*wide, dev)).name_expression.find(", unsigned>") !=
        std::string::npos);
}

TEST_CASE("heuristic: OneFlow's defaults, tiled where the last dim moves, legal everywhere") {
  const DeviceInfo dev = nominal_device(90);
  for (const auto& [name, signature] : fam().default_suite()) {
    auto p = fam().parse_problem(signature);
    const Config h = fam().heuristic(*p, dev);
    INFO(name, " ", h.text());
    CHECK(fam().validate(*p, h, dev).empty());
    CHECK(h.at("kind") == (name.find("_0213") != std::string::npos ? templates::permute::kGeneral
                                                                   : templates::permute::kTiled));
  }
  auto half = problem("float16", "8192x8192", "10");
  CHECK(fam().heuristic(*half, dev).at("vec") == 2);  // the half2 trick
  auto odd_half = problem("float16", "33x31", "10");
  CHECK(fam().heuristic(*odd_half, dev).at("vec") == 1);
  auto f32 = problem("float32", "64x1024x1024", "021");
  CHECK(fam().source(*f32, fam().heuristic(*f32, dev)).name_expression ==
        "jitune::pmt::permute_tiled<4, 1, 32, 4, 1, unsigned>");
  auto rows = problem("float32", "32x512x16x128", "0213");
  CHECK(fam().source(*rows, fam().heuristic(*rows, dev)).name_expression ==
        "jitune::pmt::permute_general<16, 4, 1, 256, unsigned>");
}

TEST_CASE("constraints rule out illegal configs before compiling") {
  const DeviceInfo dev = nominal_device(90);
  auto p = problem("float32", "6x40x56", "021");
  std::size_t pruned = 0;
  auto legal = tuner::legal_candidates(fam(), *p, dev, pruned);
  CHECK(legal.front() == fam().heuristic(*p, dev));
  CHECK(legal.size() + pruned == fam().space().size());
  std::set<std::string> kinds;
  for (const Config& c : legal) {
    INFO(c.text());
    CHECK(c.at("movement") == 4);
    if (c.at("kind") == templates::permute::kGeneral) {
      CHECK(c.at("vec") == 1);
      CHECK(c.at("tile") == 32);
      kinds.insert("general");
    } else {
      CHECK(c.at("vec") * 4 <= 16);
      CHECK(c.at("block") == (c.at("tile") / c.at("vec")) * (c.at("tile") / c.at("rows")));
      kinds.insert("tiled");
    }
  }
  CHECK(kinds.size() == 2);
  const auto why = [&](const Problem& prob, Config c) { return fam().check(prob, c, dev); };
  const Config tiled{{"kind", 1},    {"movement", 4}, {"vec", 1},   {"tile", 32},      {"rows", 4},
                     {"block", 256}, {"waves", 4},    {"group", 1}, {"batch_order", 0}};
  CHECK(why(*p, tiled).empty());
  Config c = tiled;
  c.set("vec", 8);
  CHECK(why(*p, c).find("16-byte") != std::string::npos);
  c = tiled;
  c.set("block", 128);
  CHECK(why(*p, c).find("threads, not block") != std::string::npos);
  c = tiled;
  c.set("movement", 8);
  CHECK(why(*p, c).find("widest legal movement") != std::string::npos);
  c = tiled;
  c.set("movement", 2);
  CHECK(why(*p, c).find("narrower") != std::string::npos);
  auto odd = problem("float32", "6x41x56", "021");
  c = tiled;
  c.set("vec", 2);
  c.set("rows", 2);
  CHECK(why(*odd, c).find("does not divide") != std::string::npos);
  auto stays = problem("float32", "32x512x16x128", "0213");
  c = tiled;
  c.set("movement", 16);
  CHECK(why(*stays, c).find("needs the last dim to move") != std::string::npos);
  auto wide = problem("float32", "64x64x4", "102");  // 16-byte units after the last dim collapses
  c = tiled;
  c.set("movement", 16);
  c.set("tile", 128);
  c.set("rows", 16);
  c.set("block", 1024);
  CHECK(why(*wide, c).find("shared memory") != std::string::npos);  // 264 KiB
  c.set("tile", 32);
  c.set("rows", 4);
  c.set("block", 256);
  CHECK(why(*wide, c).empty());
  CHECK(fam().launch_shape(*wide, c, nominal_device(90)).shared_bytes == 0);  // 16.5 KiB, static
  // Over 48 KiB the tile is dynamic shared memory, within the opt-in limit (227 KiB sm_90, 163 KiB sm_80).
  c.set("tile", 64);
  c.set("rows", 16);
  CHECK(why(*wide, c).empty());
  CHECK(fam().launch_shape(*wide, c, nominal_device(90)).shared_bytes == 64 * 65 * 16);
  Config f32 = tiled;
  f32.set("vec", 4);
  f32.set("tile", 128);
  f32.set("rows", 16);
  CHECK(why(*p, f32).empty());
  CHECK(fam().validate(*p, f32, nominal_device(80)).empty());
  CHECK(fam().launch_shape(*p, f32, nominal_device(90)).shared_bytes == 128 * 129 * 4);
  c = tiled;
  c.set("kind", 2);
  CHECK(why(*p, c).find("needs movement 2") != std::string::npos);
  auto half = problem("float16", "6x40x56", "021");
  c.set("movement", 2);
  c.set("vec", 4);
  c.set("rows", 4);
  c.set("block", 32);
  CHECK(why(*half, c).find("not block 32") ==
        std::string::npos);  // block 32 is outside the space, but derived
  c.set("block", (32 / 4) * (32 / 8));
  CHECK(why(*half, c).empty());
  c = tiled;
  c.set("group", 8);
  CHECK(why(*p, c).find("not below the plane's 2 tile rows") != std::string::npos);
  c = tiled;
  c.set("batch_order", 1);
  CHECK(why(*p, c).find("two or more batch dims") != std::string::npos);
  DeviceInfo small = dev;
  small.max_threads_per_block = 512;
  const Config general{{"kind", 0},     {"movement", 4}, {"vec", 1},   {"tile", 32},      {"rows", 1},
                       {"block", 1024}, {"waves", 1},    {"group", 1}, {"batch_order", 0}};
  CHECK(fam().check(*p, general, small).find("exceeds") != std::string::npos);
  c = general;
  c.set("vec", 2);
  CHECK(why(*p, c).find("vec must be 1") != std::string::npos);
}

TEST_CASE("adapt_config shrinks movement and vector width to the pointers' alignment") {
  const DeviceInfo dev = nominal_device(90);
  auto p = problem("float32", "6x40x56", "021");
  const auto& pp = as_permute(p);
  const Config tiled{{"kind", 1},   {"movement", 4}, {"vec", 4},   {"tile", 32},      {"rows", 4},
                     {"block", 64}, {"waves", 4},    {"group", 1}, {"batch_order", 0}};
  REQUIRE(fam().validate(pp, tiled, dev).empty());
  CHECK(templates::permute::adapt_config(pp, tiled, 16, dev) == tiled);
  Config a = templates::permute::adapt_config(pp, tiled, 8, dev);
  CHECK(a.at("vec") == 2);
  CHECK(a.at("block") == 64);  // rows doubled instead
  CHECK(a.at("rows") == 8);
  a = templates::permute::adapt_config(pp, tiled, 4, dev);
  CHECK(a.at("vec") == 1);
  CHECK(fam().validate(pp, a, dev).empty());

  auto rows = problem("float32", "32x512x16x128", "0213");
  const Config general{{"kind", 0},    {"movement", 16}, {"vec", 1},   {"tile", 32},      {"rows", 2},
                       {"block", 512}, {"waves", 8},     {"group", 1}, {"batch_order", 0}};
  a = templates::permute::adapt_config(as_permute(rows), general, 4, dev);
  CHECK(a.at("movement") == 4);
  CHECK(a.at("rows") == 2);
  CHECK(a.at("block") == 512);

  auto wide = problem("float32", "64x64x4", "102");
  const Config wide_tiled{{"kind", 1},    {"movement", 16}, {"vec", 1},   {"tile", 32},      {"rows", 4},
                          {"block", 256}, {"waves", 4},     {"group", 1}, {"batch_order", 0}};
  REQUIRE(fam().validate(*wide, wide_tiled, dev).empty());
  a = templates::permute::adapt_config(as_permute(wide), wide_tiled, 4, dev);
  CHECK(a.at("kind") ==
        templates::permute::kGeneral);  // with 4-byte units the last dim stays: general kernel
  CHECK(a.at("movement") == 4);
  CHECK(fam().validate(*wide, a, dev).empty());

  CHECK(templates::permute::pointer_alignment(reinterpret_cast<void*>(0x1000),
                                              reinterpret_cast<void*>(0x2000)) == 16);
  CHECK(templates::permute::pointer_alignment(reinterpret_cast<void*>(0x1000),
                                              reinterpret_cast<void*>(0x2004)) == 4);
  CHECK(templates::permute::pointer_alignment(reinterpret_cast<void*>(0x1008),
                                              reinterpret_cast<void*>(0x2000)) == 8);
  CHECK(templates::permute::pointer_alignment(reinterpret_cast<void*>(0x1002),
                                              reinterpret_cast<void*>(0x2000)) == 2);
  CHECK(templates::permute::pointer_alignment(reinterpret_cast<void*>(0x1001),
                                              reinterpret_cast<void*>(0x2000)) == 1);
}

TEST_CASE("kernel parameters describe the tiled plane and the general gather") {
  const DeviceInfo dev = nominal_device(90);
  auto p = problem("float32", "16x128x128x64", "0312");  // (16, 16384, 64) by (0, 2, 1)
  const Config tiled{{"kind", 1},    {"movement", 4}, {"vec", 1},   {"tile", 32},      {"rows", 4},
                     {"block", 256}, {"waves", 2},    {"group", 1}, {"batch_order", 0}};
  KernelArgs args;
  templates::permute::push_params(as_permute(p), tiled, reinterpret_cast<void*>(0x1000),
                                  reinterpret_cast<void*>(0x2000), args);
  REQUIRE(args.count() == 1);
  templates::permute::TiledParams t;
  std::memcpy(&t, args.pointers()[0], sizeof t);
  CHECK(t.in == 0x1000);
  CHECK(t.out == 0x2000);
  CHECK(t.rows == 16384);
  CHECK(t.cols == 64);
  CHECK(t.in_row_stride == 64);
  CHECK(t.out_col_stride == 16384);
  CHECK(t.batch[0].value == 16);
  CHECK(t.in_batch_strides[0] == 16384 * 64);
  CHECK(t.out_batch_strides[0] == 16384 * 64);
  CHECK(t.plane_tiles.value == 512 * 2);
  CHECK(t.band_tiles.value == 2);  // group 1: tile rows one after the other, along C
  CHECK(t.band_rows.value == 1);
  CHECK(t.full_bands == 512);
  CHECK(t.tiles == 16 * 512 * 2);
  Config grouped = tiled;
  grouped.set("group", 32);
  REQUIRE(fam().validate(*p, grouped, dev).empty());
  args.clear();
  templates::permute::push_params(as_permute(p), grouped, reinterpret_cast<void*>(0x1000),
                                  reinterpret_cast<void*>(0x2000), args);
  std::memcpy(&t, args.pointers()[0], sizeof t);
  CHECK(t.band_tiles.value == 64);
  CHECK(t.band_rows.value == 32);
  CHECK(t.full_bands == 16);
  CHECK(t.last_rows.value == 32);  // 512 tile rows: no partial band
  Config grouped_odd = tiled;      // R = 1000 / 16 = 63 tile rows: one partial band of 7
  grouped_odd.set("group", 8);
  grouped_odd.set("tile", 16);
  grouped_odd.set("rows", 1);
  auto odd = problem("float32", "1000x40", "10");
  REQUIRE(fam().validate(*odd, grouped_odd, dev).empty());
  args.clear();
  templates::permute::push_params(as_permute(odd), grouped_odd, reinterpret_cast<void*>(0x1000),
                                  reinterpret_cast<void*>(0x2000), args);
  std::memcpy(&t, args.pointers()[0], sizeof t);
  CHECK(t.rows == 1000);
  CHECK(t.full_bands == 7);
  CHECK(t.last_rows.value == 7);
  CHECK(t.band_tiles.value == 8 * 3);
  CHECK(t.plane_tiles.value == 63 * 3);
  const LaunchShape s = fam().launch_shape(*p, tiled, dev);
  CHECK(s.block.x == 256);
  CHECK(s.grid.x == 2 * 132 * 8);  // two waves of 8 blocks per SM
  CHECK(s.balance_units == 0);
  Config balanced = tiled;  // waves 0: one balanced wave, settled from the loaded kernel's occupancy
  balanced.set("waves", 0);
  REQUIRE(fam().validate(*p, balanced, dev).empty());
  const LaunchShape b = fam().launch_shape(*p, balanced, dev);
  CHECK(b.balance_units == 16 * 512 * 2);  // every tile
  CHECK(b.grid.x == 132 * 8);              // the estimate until the kernel is loaded: one wave
  // Programmatic dependent launch on Hopper (the kernels wait for the previous kernel), a plain launch
  // before.
  CHECK(s.programmatic);
  CHECK_FALSE(fam().launch_shape(*p, tiled, nominal_device(80)).programmatic);

  auto g = problem("float16", "3x5x7", "201");  // 5-dim merge: (15, 7) by (1, 0) is tiled; force general
  const Config general{{"kind", 0},    {"movement", 2}, {"vec", 1},   {"tile", 32},      {"rows", 2},
                       {"block", 128}, {"waves", 32},   {"group", 1}, {"batch_order", 0}};
  REQUIRE(fam().validate(*g, general, dev).empty());
  args.clear();
  templates::permute::push_params(as_permute(g), general, reinterpret_cast<void*>(0x10),
                                  reinterpret_cast<void*>(0x20), args);
  templates::permute::GeneralParams q;
  std::memcpy(&q, args.pointers()[0], sizeof q);
  CHECK(q.count == 105);
  CHECK(q.dims[0].value == 7);
  CHECK(q.dims[1].value == 15);
  CHECK(q.in_strides[0] == 1);
  CHECK(q.in_strides[1] == 7);
  CHECK(fam().launch_shape(*g, general, dev).grid.x == 1);
  CHECK(fam().launch_shape(*g, general, dev).programmatic);
}

// The kernel's tile decomposition (permute_tiled), replayed on the host with the magic-number division.
std::uint32_t device_divide(std::uint32_t n, const templates::permute::Divisor& d) {
  const auto hi = static_cast<std::uint32_t>((std::uint64_t{n} * static_cast<std::uint32_t>(d.magic)) >> 32);
  return static_cast<std::uint32_t>((std::uint64_t{hi} + n) >> (d.magic >> 32));
}

TEST_CASE("the tiled kernel's tile order visits every tile of every plane exactly once, for every group") {
  const DeviceInfo dev = nominal_device(90);
  for (const char* shape : {"1000x40", "3x5x100x48", "7x130x70"})
    for (std::int64_t group : {1, 8, 32})
      for (std::int64_t order : {0, 1}) {
        auto p = problem(
            "float32", shape,
            std::string(shape) == "1000x40" ? "10" : (std::string(shape) == "7x130x70" ? "021" : "3210"));
        const Config c{{"kind", 1},    {"movement", 4}, {"vec", 1},       {"tile", 16},          {"rows", 1},
                       {"block", 256}, {"waves", 1},    {"group", group}, {"batch_order", order}};
        if (!fam().validate(*p, c, dev).empty()) continue;
        KernelArgs args;
        templates::permute::push_params(as_permute(p), c, nullptr, reinterpret_cast<void*>(0x100), args);
        templates::permute::TiledParams t;
        std::memcpy(&t, args.pointers()[0], sizeof t);
        INFO(shape, " group ", group, " batch_order ", order);
        const std::uint64_t row_tiles = (t.rows + 15) / 16, col_tiles = (t.cols + 15) / 16;
        REQUIRE(t.tiles % (row_tiles * col_tiles) == 0);
        std::vector<int> seen(t.tiles, 0);
        std::set<std::pair<std::uint64_t, std::uint64_t>> bases;
        for (std::uint32_t tile = 0; tile < t.tiles; ++tile) {
          std::uint32_t b = device_divide(tile, t.plane_tiles);
          const std::uint32_t in_plane = tile - b * static_cast<std::uint32_t>(t.plane_tiles.value);
          const std::uint32_t band = device_divide(in_plane, t.band_tiles);
          const std::uint32_t in_band = in_plane - band * static_cast<std::uint32_t>(t.band_tiles.value);
          const templates::permute::Divisor& h = band < t.full_bands ? t.band_rows : t.last_rows;
          const std::uint32_t tc = device_divide(in_band, h);
          const std::uint32_t tr = band * static_cast<std::uint32_t>(t.band_rows.value) +
                                   (in_band - tc * static_cast<std::uint32_t>(h.value));
          REQUIRE(tr < row_tiles);
          REQUIRE(tc < col_tiles);
          ++seen[(b * row_tiles + tr) * col_tiles + tc];
          if (tr == 0 && tc == 0) {
            std::uint64_t in_base = 0, out_base = 0;
            const int nb =
                0 + (std::string(shape) == "1000x40" ? 0 : (std::string(shape) == "7x130x70" ? 1 : 2));
            for (int k = nb - 1; k >= 0; --k) {
              const std::uint64_t q = b / t.batch[k].value, i = b - q * t.batch[k].value;
              in_base += i * t.in_batch_strides[k];
              out_base += i * t.out_batch_strides[k];
              b = static_cast<std::uint32_t>(q);
            }
            bases.insert({in_base, out_base});
          }
        }
        for (int v : seen) REQUIRE(v == 1);
        CHECK(bases.size() == t.tiles / (row_tiles * col_tiles));  // every batch index reaches its own plane
      }
}

TEST_CASE("NVRTC compiles every legal config for sm_80 and sm_90 at every unit size") {
  Compiler compiler;
  // Per element size: a batched transpose whose plane every vector width divides (tiled, all vecs; general),
  // and a permute keeping a 16-byte last dim (general at every movement; tiled with 16-byte units once it
  // collapses).
  const char* dtypes[] = {"int8", "float16", "float32", "float64"};
  const char* keep_last[] = {"8x16x16", "8x16x8", "8x16x4", "8x16x2"};
  for (int cc : {80, 90})
    for (int i = 0; i < 4; ++i)
      for (const auto& [shape, perm] : {std::pair<std::string, std::string>{"3x40x56", "021"},
                                        std::pair<std::string, std::string>{keep_last[i], "102"}}) {
        auto p = problem(dtypes[i], shape, perm);
        auto r = tuner::dry_run(compiler, fam(), *p, nominal_device(cc), 0);
        INFO("sm_", cc, " ", p->signature());
        REQUIRE(!r.candidates.empty());
        std::set<std::string> unit_sizes;
        std::size_t reported = 0;
        for (const auto& c : r.candidates) {
          INFO(c.config.text(), "\n", c.reason);
          CHECK(c.status == "ok");
          // -1: no ptxas report line was found for this kernel (seen for a few kernels of large batched
          // programs).
          CHECK(c.resources.registers != 0);
          reported += c.resources.registers > 0;
          CHECK_FALSE(c.resources.spills());
          unit_sizes.insert(std::to_string(c.config.at("kind")) + "/" +
                            std::to_string(c.config.at("movement")));
        }
        CHECK(reported * 10 >= r.candidates.size() * 9);
        if (perm == "102") CHECK(unit_sizes.count("1/16") == 1);
        if (perm == "021") CHECK(unit_sizes.count("2/2") == (i == 1 ? 1u : 0u));  // pairs: 2-byte units only
      }
}

}  // namespace jitune
