// Permute config legality: the heuristic default, the constraints on a config and the alignment adaptation.
#include <algorithm>
#include <cstdlib>
#include <optional>

#include "templates/permute/permute_detail.hpp"

namespace jitune::templates::permute {
namespace detail {

Config heuristic(const PermuteProblem& p) {
  const int movement = p.max_movement();
  const Plan& plan = p.plan(movement);
  // OneFlow's defaults: a 32 x 32 tile, 256 threads (8 rows each pass), the half2 trick for even 2-byte
  // planes; the general kernel with one unit per thread. Grid capped at 32 waves.
  if (plan.last_dim_moves()) {
    const bool pairs = movement == 2 && plane_rows(plan) % 2 == 0 && plane_cols(plan) % 2 == 0;
    return Config{{"kind", kTiled},        {"movement", movement}, {"vec", pairs ? 2 : 1}, {"tile", 32},
                  {"rows", pairs ? 2 : 4}, {"block", 256},         {"waves", 32},          {"group", 1},
                  {"batch_order", 0}};
  }
  return Config{{"kind", kGeneral}, {"movement", movement}, {"vec", 1},   {"tile", 32},      {"rows", 1},
                {"block", 256},     {"waves", 32},          {"group", 1}, {"batch_order", 0}};
}

std::string check(const PermuteProblem& p, const Config& config, const DeviceInfo& device) {
  const std::int64_t movement = config.at("movement"), vec = config.at("vec"), tile = config.at("tile"),
                     rows = config.at("rows"), block = config.at("block");
  const auto n = [](std::int64_t v) { return std::to_string(v); };
  if (movement < p.element_size())
    return "movement " + n(movement) + " is narrower than the " + n(p.element_size()) + "-byte element";
  if (movement > p.max_movement())
    return "movement " + n(movement) + " exceeds the widest legal movement for this shape, " +
           n(p.max_movement()) +
           " bytes (the last dim must stay and its bytes be a multiple of the movement)";
  if (block > device.max_threads_per_block)
    return "block " + n(block) + " exceeds the device's " + n(device.max_threads_per_block) +
           " threads per block";
  const Plan& plan = p.plan(static_cast<int>(movement));
  if (config.at("kind") == kGeneral) {
    if (vec != 1) return "the general kernel moves one unit per access: vec must be 1";
    if (tile != 32) return "the general kernel has no tile: only tile=32 is enumerated";
    if (config.at("group") != 1 || config.at("batch_order") != 0)
      return "the general kernel has no tile order: only group=1, batch_order=0 are enumerated";
    if (rows * movement > 64)
      return "rows " + n(rows) + " x movement " + n(movement) +
             " bytes in flight per thread exceed 64 (16 registers; more spills at large blocks)";
    return {};
  }
  const std::int64_t kind = config.at("kind");
  if (kind != kTiled && kind != kTiledPairs)
    return "kind " + n(kind) + " is none of 0 (general), 1 (tiled), 2 (tiled pairs)";
  if (!plan.last_dim_moves())
    return "the tiled kernel needs the last dim to move; with movement " + n(movement) +
           " the simplified permutation keeps it last";
  if (kind == kTiledPairs && (movement != 2 || vec < 2))
    return "the pair kernel packs two 2-byte units per word: it needs movement 2 and vec >= 2";
  if (vec * movement > 16)
    return "vec " + n(vec) + " x movement " + n(movement) + " is more than the widest (16-byte) access";
  if (plane_rows(plan) % vec != 0 || plane_cols(plan) % vec != 0)
    return "vec " + n(vec) + " does not divide the transposed plane " + n(plane_rows(plan)) + " x " +
           n(plane_cols(plan));
  const std::int64_t row_span = kind == kTiledPairs ? 2 * rows : rows;  // tile rows one thread reads
  if (row_span > tile) return "rows " + n(rows) + " exceeds tile " + n(tile);
  const std::int64_t threads = (tile / vec) * (tile / row_span);
  if (threads != block)
    return "the tiled kernel runs tile/vec x tile/" + std::string(kind == kTiledPairs ? "(2 rows)" : "rows") +
           " = " + n(threads) + " threads, not block " + n(block);
  const std::int64_t shared = shared_bytes(config);
  const std::int64_t limit = shared > 48 * 1024
                                 ? device.max_shared_per_block_optin
                                 : std::min<std::int64_t>(48 * 1024, device.max_shared_per_block);
  if (shared > limit)
    return "tile " + n(tile) + " of " + n(movement) + "-byte units needs " + n(shared) +
           " bytes of shared memory; the device allows " + n(limit) + " per block";
  const std::int64_t group = config.at("group"), row_tiles = ceil_div(plane_rows(plan), tile);
  if (group != 1 && group >= row_tiles)
    return "group " + n(group) + " is not below the plane's " + n(row_tiles) +
           " tile rows (it would order tiles as group 1 of the transposed plane does)";
  if (config.at("batch_order") != 0 && plan.rank - 2 < 2)
    return "batch_order 1 needs two or more batch dims; this plan has " + n(plan.rank - 2);
  return {};
}

}  // namespace detail

int pointer_alignment(const void* a, const void* b) noexcept {
  const auto bits = reinterpret_cast<std::uintptr_t>(a) | reinterpret_cast<std::uintptr_t>(b) | 16u;
  return static_cast<int>(bits & (~bits + 1));
}

Config adapt_config(const PermuteProblem& problem, const Config& config, int alignment,
                    const DeviceInfo& device) {
  const Family& family = permute_family();
  const std::int64_t movement = std::max<std::int64_t>(
      problem.element_size(), std::min<std::int64_t>(config.at("movement"), alignment));
  Config c = config;
  c.set("movement", movement);
  if (c == config && family.validate(problem, c, device).empty()) {
    // Vector accesses of the tiled kernels need vec * movement-byte alignment too.
    if (c.at("kind") == kGeneral || c.at("vec") * movement <= alignment) return config;
  }
  if (c.at("kind") != kGeneral) {
    // Narrower vectors; the same kernel (then the one-unit tiled kernel) with the block size closest to the
    // tuned one.
    const std::int64_t tile = c.at("tile"), block = c.at("block");
    for (std::int64_t vec = std::min<std::int64_t>(c.at("vec"), alignment / movement); vec >= 1; vec /= 2) {
      for (std::int64_t kind : {c.at("kind"), std::int64_t{kTiled}}) {
        const std::int64_t span = kind == kTiledPairs ? 2 : 1;  // tile rows per unit of `rows`
        std::optional<Config> best;
        for (std::int64_t rows : {1, 2, 4, 8, 16}) {
          if (rows * span > tile) break;
          Config t = c;
          t.set("kind", kind);
          t.set("vec", vec);
          t.set("rows", rows);
          t.set("block", (tile / vec) * (tile / (rows * span)));
          if (!family.validate(problem, t, device).empty()) continue;
          if (!best || std::abs(t.at("block") - block) < std::abs(best->at("block") - block)) best = t;
        }
        if (best) return *best;
      }
    }
  }
  Config general{{"kind", kGeneral},
                 {"movement", movement},
                 {"vec", 1},
                 {"tile", 32},
                 {"rows", c.at("kind") == kGeneral ? c.at("rows") : 1},
                 {"block", c.at("block")},
                 {"waves", c.at("waves")},
                 {"group", 1},
                 {"batch_order", 0}};
  if (family.validate(problem, general, device).empty()) return general;
  general.set("rows", 1);
  general.set("block", 256);
  general.set("waves", 32);
  return general;
}

}  // namespace jitune::templates::permute
