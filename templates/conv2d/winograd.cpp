// The conv2d Winograd variants on the host: algo 3, F(2x2, 3x3) (winograd.cuh), and algo 4, F(4x4, 3x3)
// (winograd4.cuh): geometry, legality, default and launch; the limits all three share (algo 5's own are in
// winograd_gemm.cpp).
#include <algorithm>

#include "templates/conv2d/conv2d_detail.hpp"

namespace jitune::templates::conv2d::detail {
namespace {

// Loads a thread holds in registers for the next stage (16 or 36 per input patch, 9 per filter): more crowd out
// the accumulators.
constexpr std::int64_t kMaxPrefetch = 48;

// The kernels' kGroup: the largest divisor of rk whose staged rows fit the stage buffers.
std::int64_t group_of(std::int64_t points, std::int64_t rk, std::int64_t tk, std::int64_t pitch, std::int64_t floats) {
  for (std::int64_t g = rk; g > 1; --g)
    if (rk % g == 0 && points * tk * g * pitch <= floats) return g;
  return 1;
}

// The register file of every architecture the kernels build for (sm_80 to sm_90): where a config holds its next
// stage in registers is part of its program, so it is decided without a device.
constexpr std::int64_t kRegistersPerSm = 65536;

std::string name_of(const Config& c) {
  const std::int64_t algo = c.at("algo");
  return "algo " + std::string(algo == 5   ? "5 (Winograd F(4x4, 3x3) as batched GEMMs)"
                               : algo == 4 ? "4 (Winograd F(4x4, 3x3))"
                                           : "3 (Winograd F(2x2, 3x3))");
}

}  // namespace

std::int64_t register_cap(std::int64_t threads, std::int64_t blocks, std::int64_t registers_per_sm) {
  const std::int64_t warps = ceil_div(ceil_div(threads, 32) * blocks, 4);
  return std::min<std::int64_t>(kMaxRegisters, registers_per_sm / 4 / (warps * 32) / 8 * 8);
}

WinoGeometry wino_geometry(const ConvProblem& p, const Config& c) {
  const auto& s = p.shape();
  const bool nhwc = s.layout == ImageLayout::kNHWC;
  const std::int64_t bk = c.at("wino_k"), bt = c.at("wino_tiles"), bc = c.at("wino_c"), rk = c.at("wino_rk"),
                     rt = c.at("wino_rt");
  WinoGeometry g;
  g.m = c.at("algo") >= 4 ? 4 : 2;
  g.points = (g.m + 2) * (g.m + 2);
  g.tk = bk / rk;
  g.tt = bt / rt;
  g.threads = g.points * g.tk * g.tt;
  const std::int64_t v_pitch = bt + (nhwc ? 4 : 0), m_pitch = bt + (nhwc ? 1 : 4);
  const std::int64_t stage = g.points * bc * (v_pitch + bk);
  g.group = group_of(g.points, rk, g.tk, m_pitch, stage);
  g.shared_bytes = 4 * std::max(stage, g.points * g.tk * g.group * m_pitch);
  g.in_per_thread = ceil_div(bc * bt, g.threads);
  g.w_per_thread = ceil_div(bc * bk, g.threads);
  g.prefetch = g.points * g.in_per_thread + 9 * g.w_per_thread;
  // Accumulators, the prefetched loads, one stage row of U and V, and the patches' bases and masks and indexing;
  // F(4x4)'s 64-bit masks and its transforms' rows (fitted to NVRTC's sm_80 / sm_90 builds).
  g.register_estimate = rk * rt + g.prefetch + rk + rt + 3 * g.in_per_thread + 32 + (g.m == 4 ? 20 : 0);
  // F(4x4) loads a stage where it stores it (no overlap with the products) where the prefetch does not fit the
  // registers its blocks may hold: the products then hold no loads, the stage store the patch and its transform.
  g.prefetch_stage = g.m == 2 || g.register_estimate <= register_cap(g.threads, c.at("wino_min_blocks"), kRegistersPerSm);
  if (!g.prefetch_stage) g.register_estimate -= rk + rt + 8;
  g.tiles = s.n * ceil_div(p.p(), g.m) * ceil_div(p.q(), g.m);
  g.grid_x = ceil_div(g.tiles, bt);
  g.grid_y = ceil_div(s.k, bk);
  return g;
}

std::string wino_hard_check(const ConvProblem& p, const Config& c, const DeviceInfo& device) {
  const auto& s = p.shape();
  const WinoGeometry g = wino_geometry(p, c);
  if (p.dtype() != DType::kFloat32)
    return name_of(c) + " takes float32; " + std::string(dtype_name(p.dtype())) +
           " runs on tensor cores (algo 1 or 2) or the direct kernel (algo 0)";
  if (s.r != 3 || s.s != 3 || s.stride_h != 1 || s.stride_w != 1 || s.dilation_h != 1 || s.dilation_w != 1)
    return name_of(c) + " takes 3x3 filters of stride 1 and dilation 1; this is " +
           std::to_string(s.r) + "x" + std::to_string(s.s) + ", stride " + std::to_string(s.stride_h) + "x" +
           std::to_string(s.stride_w) + ", dilation " + std::to_string(s.dilation_h) + "x" +
           std::to_string(s.dilation_w) + " (the direct kernel, algo 0, runs it)";
  // F(4x4)'s float32 error grows with the square root of C, the family's tolerance with C: it holds from C = 64 on
  // (about half the tolerance at C = 64-512 on the workload's values; 1.05x at C = 3: docs/conv2d.md).
  if (g.m == 4 && s.c < 64)
    return name_of(c) + " rounds within the float32 tolerance only where C >= 64 (here C = " + std::to_string(s.c) +
           "); algo 3 (F(2x2)) runs it";
  if (c.at("algo") == 5) return wgemm_hard_check(p, c, device);
  const std::int64_t bk = c.at("wino_k"), bt = c.at("wino_tiles"), rk = c.at("wino_rk"), rt = c.at("wino_rt");
  if (g.m == 2 && bt < 16) return "wino_tiles 8 is F(4x4)'s (algo 4): algo 3 takes 16 or more";
  if (bk > 64 || bt > 64)
    return "wino_k and wino_tiles 128 are the batched GEMMs' block tiles (algo 5); " + name_of(c) +
           " takes at most 64";
  if (bk % rk != 0 || bt % rt != 0)
    return "wino_rk " + std::to_string(rk) + " and wino_rt " + std::to_string(rt) + " must divide wino_k " +
           std::to_string(bk) + " and wino_tiles " + std::to_string(bt);
  const std::int64_t max_threads = std::min(512, device.max_threads_per_block);
  if (g.threads < 64 || g.threads > max_threads)
    return "block of " + std::to_string(g.threads) + " threads (" + std::to_string(g.points) +
           " x wino_k / wino_rk x wino_tiles / wino_rt); allowed 64 to " + std::to_string(max_threads);
  if (g.prefetch > kMaxPrefetch)
    return "a stage of wino_c " + std::to_string(c.at("wino_c")) + " channels holds " +
           std::to_string(g.prefetch) + " prefetched loads per thread (at most " +
           std::to_string(kMaxPrefetch) + ")";
  const std::int64_t cap = register_cap(g.threads, c.at("wino_min_blocks"), device.registers_per_sm);
  if (g.register_estimate > cap)
    return "needs about " + std::to_string(g.register_estimate) + " registers per thread; " +
           std::to_string(c.at("wino_min_blocks")) + " blocks of " + std::to_string(g.threads) +
           " threads per SM allow " + std::to_string(cap);
  if (g.shared_bytes > device.max_shared_per_block_optin)
    return "needs " + std::to_string(g.shared_bytes) + " bytes of shared memory; the device allows " +
           std::to_string(device.max_shared_per_block_optin) + " per block";
  if (ceil_div(p.p(), g.m) * ceil_div(p.q(), g.m) >= (std::int64_t{1} << 31) || g.grid_x >= (std::int64_t{1} << 31))
    return name_of(c) + " numbers one image's output tiles and the blocks in 32 bits";
  if (g.grid_y > 65535) return "K = " + std::to_string(s.k) + " needs more than 65535 blocks of wino_k";
  // Tiles more than twice the problem leave most of the block idle.
  if (bt > 16 && bt >= 2 * g.tiles)
    return "wino_tiles " + std::to_string(bt) + " is at least twice the " + std::to_string(g.tiles) +
           " output tiles";
  if (bk > 16 && bk >= 2 * s.k)
    return "wino_k " + std::to_string(bk) + " is at least twice K = " + std::to_string(s.k);
  return {};
}

std::string wino_neighbourhood_check(const ConvProblem& p, const Config& c, const DeviceInfo& device) {
  if (c.at("algo") == 5) return wgemm_neighbourhood_check(p, c, device);
  const WinoGeometry g = wino_geometry(p, c);
  // Thread tiles per transform position: 8 or 16 for F(2x2) (128 or 256 threads), 4 or 8 for F(4x4) (144 or 288).
  const std::int64_t fewer = g.m == 4 ? 4 : 8;
  if (g.tk * g.tt != fewer && g.tk * g.tt != 2 * fewer)
    return std::to_string(g.threads) + " threads a block (tuned: " + std::to_string(fewer * g.points) + " or " +
           std::to_string(2 * fewer * g.points) + ")";
  if (c.at("wino_c") > 4 && c.at("wino_c") > 2 * p.shape().c)
    return "wino_c " + std::to_string(c.at("wino_c")) + " for C = " + std::to_string(p.shape().c);
  // Two blocks of 256 threads cap a thread at 128 registers: worth timing where the estimate fits that cap (the
  // compiler's own choice may be higher; a config that then spills is rejected unrun).
  if (c.at("wino_min_blocks") == 2 && (g.register_estimate > 128 || g.threads > 256))
    return "wino_min_blocks 2 where the kernel needs about " + std::to_string(g.register_estimate) +
           " registers a thread of " + std::to_string(g.threads) + " (tuned where two blocks fit 128 each)";
  return {};
}

bool wino_preferred(const ConvProblem& p, const DeviceInfo&) {
  const auto& s = p.shape();
  return p.dtype() == DType::kFloat32 && s.r == 3 && s.s == 3 && s.stride_h == 1 && s.stride_w == 1 &&
         s.dilation_h == 1 && s.dilation_w == 1 && ((s.c >= 32 && s.k >= 32) || s.layout == ImageLayout::kNHWC);
}

Config wino_heuristic(const ConvProblem& p, const DeviceInfo& device) {
  // From C >= 64: F(4x4) as batched GEMMs (algo 5), the H200's tuned pick on every such suite layer with 64 tiles or
  // more, both layouts (1.3-2.7x cuDNN, bench/RESULTS.md 2026-11-28, nineteenth session). Block tiles of 64 channels x
  // 64 tiles in stages of 16 channels, 8 x 4 accumulators (128 threads): within 8% of each batch-32 layer's tuned
  // pick (the 64 x 128 tile of 8 x 8 was up to 21% behind at 7x7); where that leaves fewer than two GEMM blocks an
  // SM, stages of 8 channels and 4 x 8 accumulators, the tuned pick of a single 56x56 image (bench/RESULTS.md
  // 2026-11-28, twentieth session).
  if (p.shape().c >= 64) {
    struct Shape {
      std::int64_t bc, rk, rt, blocks_per_sm;
    };
    for (const Shape& sh : {Shape{16, 8, 4, 2}, Shape{8, 4, 8, 1}}) {
      const Config g = complete_config({{"algo", 5},
                                        {"wino_k", 64},
                                        {"wino_tiles", 64},
                                        {"wino_c", sh.bc},
                                        {"wino_rk", sh.rk},
                                        {"wino_rt", sh.rt},
                                        {"wino_min_blocks", 1}});
      if (wino_hard_check(p, g, device).empty() &&
          wgemm_geometry(p, g).gemm_items >= sh.blocks_per_sm * device.sm_count)
        return g;
    }
  }
  // F(4x4) where its rounding fits the tolerance (C >= 64) and its blocks of 16 channels x 32 tiles of 4x4 give at
  // least half the SMs one: the H200's tuned pick on every batch-32 ResNet layer (8 x 8 accumulators, 288 threads,
  // each stage loaded where it is stored; 1.17-1.58x F(2x2), bench/RESULTS.md 2026-11-28). Single small images keep
  // F(2x2), which won there.
  if (p.shape().c >= 64) {
    const Config f4 = complete_config({{"algo", 4},
                                       {"wino_k", 16},
                                       {"wino_tiles", 32},
                                       {"wino_c", 8},
                                       {"wino_rk", 8},
                                       {"wino_rt", 8},
                                       {"wino_min_blocks", 1}});
    if (wino_hard_check(p, f4, device).empty()) {
      const WinoGeometry g = wino_geometry(p, f4);
      if (g.grid_x * g.grid_y >= device.sm_count / 2) return f4;
    }
  }
  // The H100's tuned picks (bench/RESULTS.md, 2026-11-27): 16 channels x 32 tiles of 8 x 4 accumulators (256
  // threads, two blocks an SM) on every float32 ResNet layer but one, 16 x 16 of 4 x 4 where the larger tile gave
  // fewer blocks than half the SMs. Stages of 8 channels (4 for C <= 3), 16 where the blocks are few.
  struct Shape {
    std::int64_t bk, bt, rk, rt;
  };
  static constexpr Shape shapes[] = {{16, 32, 8, 4}, {16, 16, 4, 4}};
  Config best;
  const std::int64_t c = p.shape().c;
  for (const Shape& sh : shapes) {
    Config config = complete_config({{"algo", 3},
                                     {"wino_k", sh.bk},
                                     {"wino_tiles", sh.bt},
                                     {"wino_c", 2 * c >= 8 ? 8 : 4},
                                     {"wino_rk", sh.rk},
                                     {"wino_rt", sh.rt},
                                     {"wino_min_blocks", 1}});
    if (!wino_hard_check(p, config, device).empty()) continue;
    const WinoGeometry g = wino_geometry(p, config);
    const std::int64_t blocks = g.grid_x * g.grid_y;
    // Few blocks (a single image): stages of 16 channels, half the barriers (the tuned picks there).
    if (c >= 16 && blocks < 6 * device.sm_count) config.set("wino_c", 16);
    if (wino_hard_check(p, config, device).empty()) best = config;
    if (blocks >= device.sm_count / 2) break;
  }
  if (!best.values().empty()) return best;
  return complete_config({{"algo", 3}, {"wino_k", 16}, {"wino_tiles", 16}, {"wino_c", 4}, {"wino_rk", 4},
                          {"wino_rt", 4}, {"wino_min_blocks", 1}});  // none fits: the caller takes another algorithm
}

KernelSource wino_source(const ConvProblem& p, const Config& config) {
  if (config.at("algo") == 5) return wgemm_source(p, config);
  const auto& s = p.shape();
  const bool f4 = config.at("algo") == 4;
  std::string name = f4 ? "jitune::conv::conv2d_winograd<4, " : "jitune::conv::conv2d_wino<";
  name += std::to_string(s.layout == ImageLayout::kNHWC ? 1 : 0);
  for (std::int64_t v : {s.c, s.k, config.at("wino_k"), config.at("wino_tiles"), config.at("wino_c"),
                         config.at("wino_rk"), config.at("wino_rt"), config.at("wino_min_blocks")})
    name += ", " + std::to_string(v);
  if (f4) name += wino_geometry(p, config).prefetch_stage ? ", 1" : ", 0";
  name += s.bias ? ", 1" : ", 0";
  name += ">";
  return f4 ? program(p, std::move(name), kWinograd4Template) : program(p, std::move(name));
}

LaunchShape wino_launch_shape(const ConvProblem& p, const Config& config) {
  if (config.at("algo") == 5) return wgemm_launch_shape(p, config);
  const WinoGeometry g = wino_geometry(p, config);
  LaunchShape shape;
  shape.grid.x = static_cast<unsigned>(g.grid_x);
  shape.grid.y = static_cast<unsigned>(g.grid_y);
  shape.block.x = static_cast<unsigned>(g.threads);
  shape.shared_bytes = static_cast<unsigned>(g.shared_bytes);
  return shape;
}

}  // namespace jitune::templates::conv2d::detail
