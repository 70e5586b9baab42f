// Permute instantiation and launch: the kernel's name expression, its launch shape and its parameter struct.
#include <algorithm>

#include "templates/permute/permute_detail.hpp"

namespace jitune::templates::permute {
namespace {

// Input strides (units) of a plan's dims, and each input dim's stride in the output.
struct Strides {
  std::array<std::int64_t, kMaxRank> in{}, out{};
};

Strides strides_of(const Plan& plan) {
  Strides s;
  std::int64_t in = 1, out = 1;
  for (int d = plan.rank - 1; d >= 0; --d) {
    s.in[d] = in;
    in *= plan.dims[d];
  }
  for (int i = plan.rank - 1; i >= 0; --i) {
    s.out[plan.perm[i]] = out;
    out *= plan.dims[plan.perm[i]];
  }
  return s;
}

std::int64_t blocks_per_wave(const DeviceInfo& device, std::int64_t block, std::int64_t shared_bytes) {
  std::int64_t per_sm = std::clamp<std::int64_t>(device.max_threads_per_sm / block, 1, 32);
  if (shared_bytes > 0)
    per_sm = std::clamp<std::int64_t>(device.max_shared_per_sm / (shared_bytes + 1024), 1, per_sm);
  return std::int64_t{device.sm_count} * per_sm;
}

}  // namespace

namespace detail {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// The tiled kernel's plane: R (contiguous in the output) and C (contiguous in the input).
std::int64_t plane_rows(const Plan& plan) {
  return plan.dims[plan.perm[plan.rank - 1]];
}
std::int64_t plane_cols(const Plan& plan) {
  return plan.dims[plan.rank - 1];
}

// Shared memory of a tiled config (static up to 48 KiB, dynamic above: permute.cuh).
std::int64_t shared_bytes(const Config& config) {
  const std::int64_t tile = config.at("tile");
  if (config.at("kind") == kTiledPairs) return tile * (tile / 2 + 1) * 4;
  return tile * (tile + 1) * config.at("movement");
}

KernelSource source(const PermuteProblem& p, const Config& config) {
  const int movement = static_cast<int>(config.at("movement"));
  const Plan& plan = p.plan(movement);
  const std::string index = needs_index64(plan.units) ? "unsigned long long" : "unsigned";
  const auto n = [&](const char* key) { return std::to_string(config.at(key)); };
  std::string name;
  if (config.at("kind") == kTiled) {
    name = "jitune::pmt::permute_tiled<" + std::to_string(movement) + ", " + n("vec") + ", " + n("tile") +
           ", " + n("rows") + ", " + std::to_string(plan.rank - 2) + ", " + index + ">";
  } else if (config.at("kind") == kTiledPairs) {
    name = "jitune::pmt::permute_tiled_pairs<" + n("vec") + ", " + n("tile") + ", " + n("rows") + ", " +
           std::to_string(plan.rank - 2) + ", " + index + ">";
  } else {
    name = "jitune::pmt::permute_general<" + std::to_string(movement) + ", " +
           std::to_string(std::max(plan.rank, 1)) + ", " + n("rows") + ", " + n("block") + ", " + index + ">";
  }
  return {"#include \"permute/permute.cuh\"\n", std::move(name)};
}

LaunchShape launch_shape(const PermuteProblem& p, const Config& config, const DeviceInfo& device) {
  const int movement = static_cast<int>(config.at("movement"));
  const Plan& plan = p.plan(movement);
  const std::int64_t block = config.at("block"), rows = config.at("rows"), waves = config.at("waves");
  std::int64_t needed = 1, shared = 0;
  if (config.at("kind") != kGeneral) {
    const std::int64_t tile = config.at("tile");
    shared = shared_bytes(config);
    const std::int64_t r = plane_rows(plan), c = plane_cols(plan);
    needed = plan.units / (r * c) * ceil_div(r, tile) * ceil_div(c, tile);
  } else {
    needed = ceil_div(std::max<std::int64_t>(plan.units, 1), block * rows);
  }
  LaunchShape s;
  const std::int64_t cap = std::max<std::int64_t>(waves, 1) * blocks_per_wave(device, block, shared);
  s.grid.x = static_cast<unsigned>(std::clamp<std::int64_t>(std::min(needed, cap), 1, 0x7fffffff));
  if (waves == 0) s.balance_units = static_cast<std::uint64_t>(std::max<std::int64_t>(needed, 1));
  s.block.x = static_cast<unsigned>(block);
  if (shared > 48 * 1024) s.shared_bytes = static_cast<unsigned>(shared);  // the tiled kernel's dynamic tile
  // Every permute kernel waits for the previous kernel before touching memory (permute.cuh).
  s.programmatic = device.cc() >= 90;
  return s;
}

}  // namespace detail

using detail::ceil_div;

bool needs_index64(std::int64_t units) noexcept {
  return units > 0x7fffffff;
}

Divisor make_divisor(std::uint64_t d) noexcept {
  Divisor out{d, 0};
  if (d == 0 || d > (std::uint64_t{1} << 31)) return out;  // only 64-bit indices divide by it
  unsigned shift = 0;
  while ((std::uint64_t{1} << shift) < d) ++shift;
  const std::uint64_t magic = ((std::uint64_t{1} << 32) * ((std::uint64_t{1} << shift) - d)) / d + 1;
  out.magic = (magic & 0xffffffffull) | (std::uint64_t{shift} << 32);
  return out;
}

void push_params(const PermuteProblem& problem, const Config& config, const void* src, void* dst,
                 KernelArgs& args) {
  const Plan& plan = problem.plan(static_cast<int>(config.at("movement")));
  const auto out = static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(dst));
  const auto in = static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(src));
  const Strides s = strides_of(plan);
  if (config.at("kind") != kGeneral) {
    TiledParams t{};
    t.out = out;
    t.in = in;
    const int c = plan.rank - 1, r = plan.perm[plan.rank - 1];
    const std::int64_t tile = config.at("tile");
    t.rows = static_cast<unsigned long long>(plan.dims[r]);
    t.cols = static_cast<unsigned long long>(plan.dims[c]);
    t.in_row_stride = static_cast<unsigned long long>(s.in[r]);
    t.out_col_stride = static_cast<unsigned long long>(s.out[c]);
    const std::int64_t row_tiles = ceil_div(plan.dims[r], tile), col_tiles = ceil_div(plan.dims[c], tile);
    const std::int64_t group = std::min(config.at("group"), row_tiles);
    const std::int64_t last = row_tiles % group;
    const auto u = [](std::int64_t v) { return make_divisor(static_cast<std::uint64_t>(v)); };
    t.plane_tiles = u(row_tiles * col_tiles);
    t.band_tiles = u(group * col_tiles);
    t.band_rows = u(group);
    t.last_rows = u(last == 0 ? group : last);
    t.full_bands = static_cast<unsigned long long>(row_tiles / group);
    std::int64_t batch = 1;
    int k = 0;
    const bool output_order = config.at("batch_order") == 1;
    for (int j = 0; j < plan.rank; ++j) {
      const int d = output_order ? plan.perm[j] : j;
      if (d == r || d == c) continue;
      t.batch[k] = make_divisor(static_cast<std::uint64_t>(plan.dims[d]));
      t.in_batch_strides[k] = static_cast<unsigned long long>(s.in[d]);
      t.out_batch_strides[k] = static_cast<unsigned long long>(s.out[d]);
      batch *= plan.dims[d];
      ++k;
    }
    t.tiles = static_cast<unsigned long long>(batch * row_tiles * col_tiles);
    args.push_raw(&t, sizeof t, alignof(TiledParams));
    return;
  }
  GeneralParams g{};
  g.out = out;
  g.in = in;
  if (plan.rank == 0) {  // a single unit
    g.count = static_cast<unsigned long long>(plan.units);
    g.dims[0] = make_divisor(1);
    g.in_strides[0] = 1;
  } else {
    g.count = static_cast<unsigned long long>(plan.units);
    for (int i = 0; i < plan.rank; ++i) {
      g.dims[i] = make_divisor(static_cast<std::uint64_t>(plan.dims[plan.perm[i]]));
      g.in_strides[i] = static_cast<unsigned long long>(s.in[plan.perm[i]]);
    }
  }
  args.push_raw(&g, sizeof g, alignof(GeneralParams));
}

}  // namespace jitune::templates::permute
