// conv2d algo 5 on the host: Winograd F(4x4, 3x3) as batched GEMMs in one cooperative launch
// (winograd4_gemm.cuh): geometry, workspace, limits and launch. The problem's limits (float32, 3x3 of stride 1,
// C >= 64) are wino_hard_check's, shared with algos 3 and 4.
#include <algorithm>

#include "templates/conv2d/conv2d_detail.hpp"

namespace jitune::templates::conv2d::detail {
namespace {

constexpr std::int64_t kPoints = 36;  // 6 x 6 transform positions of F(4x4, 3x3)

}  // namespace

WgemmGeometry wgemm_geometry(const ConvProblem& p, const Config& c) {
  const auto& s = p.shape();
  const std::int64_t bk = c.at("wino_k"), bt = c.at("wino_tiles"), bc = c.at("wino_c"), rk = c.at("wino_rk"),
                     rt = c.at("wino_rt");
  WgemmGeometry g;
  g.tk = bk / rk;
  g.tt = bt / rt;
  g.threads = std::max<std::int64_t>(g.tk * g.tt, 1);
  g.cp = round_up(s.c, bc);
  g.kp = round_up(s.k, bk);
  g.tiles = s.n * ceil_div(p.p(), 4) * ceil_div(p.q(), 4);
  g.tp = round_up(g.tiles, bt);
  g.gemm_items = kPoints * (g.kp / bk) * (g.tp / bt);
  // Static: two stages of U and V (channels last: V's rows padded by 4 floats).
  g.shared_bytes = 4 * 2 * bc * (bk + bt + (s.layout == ImageLayout::kNHWC ? 4 : 0));
  // The GEMM pass: accumulators, one stage row of U and V, the next stage's 16-byte loads and indexing; the
  // transform passes hold a 6x6 patch and its transform.
  const std::int64_t loads = ceil_div(bc * bk / 4, g.threads) + ceil_div(bc * bt / 4, g.threads);
  g.register_estimate = std::max<std::int64_t>(rk * rt + rk + rt + 4 * loads + 24, 96);
  g.blocks = std::max({g.gemm_items, ceil_div(g.cp * (g.kp + g.tp), g.threads), ceil_div(s.k * g.tiles, g.threads)});
  // The barrier counter, U [36][Cp][Kp], V [36][Cp][Tp], M [36][Kp][Tp] (winograd4_gemm.cuh's wgemm_align).
  const auto floats = [](std::int64_t a, std::int64_t b) { return static_cast<std::size_t>(kPoints * a * b) * 4; };
  g.workspace_bytes = 256 + align256(floats(g.cp, g.kp)) + align256(floats(g.cp, g.tp)) + floats(g.kp, g.tp);
  return g;
}

std::string wgemm_hard_check(const ConvProblem& p, const Config& c, const DeviceInfo& device) {
  const std::int64_t bk = c.at("wino_k"), bt = c.at("wino_tiles"), rk = c.at("wino_rk"), rt = c.at("wino_rt");
  if (bk % rk != 0 || bt % rt != 0)
    return "wino_rk " + std::to_string(rk) + " and wino_rt " + std::to_string(rt) + " must divide wino_k " +
           std::to_string(bk) + " and wino_tiles " + std::to_string(bt);
  const WgemmGeometry g = wgemm_geometry(p, c);
  const std::int64_t max_threads = std::min(512, device.max_threads_per_block);
  if (g.threads < 64 || g.threads > max_threads)
    return "block of " + std::to_string(g.threads) +
           " threads (wino_k / wino_rk x wino_tiles / wino_rt); allowed 64 to " + std::to_string(max_threads);
  const std::int64_t cap = register_cap(g.threads, c.at("wino_min_blocks"), device.registers_per_sm);
  if (g.register_estimate > cap)
    return "needs about " + std::to_string(g.register_estimate) + " registers per thread; " +
           std::to_string(c.at("wino_min_blocks")) + " blocks of " + std::to_string(g.threads) +
           " threads per SM allow " + std::to_string(cap);
  if (g.shared_bytes > 48 * 1024)
    return "needs " + std::to_string(g.shared_bytes) + " bytes of static shared memory (at most 49152)";
  // The workspace bound also keeps every index of the kernel in 32 bits (36 Cp Tp floats < 2^30).
  if (g.workspace_bytes > kMaxRepackWorkspace)
    return "algo 5 keeps the transformed input and products in a workspace of " +
           std::to_string(g.workspace_bytes) + " bytes, more than " + std::to_string(kMaxRepackWorkspace) +
           "; algo 4 runs it without one";
  if (bt > 16 && bt >= 2 * g.tiles)
    return "wino_tiles " + std::to_string(bt) + " is at least twice the " + std::to_string(g.tiles) +
           " output tiles";
  if (bk > 16 && bk >= 2 * p.shape().k)
    return "wino_k " + std::to_string(bk) + " is at least twice K = " + std::to_string(p.shape().k);
  return {};
}

std::string wgemm_neighbourhood_check(const ConvProblem&, const Config& c, const DeviceInfo&) {
  const std::int64_t threads = c.at("wino_k") / c.at("wino_rk") * (c.at("wino_tiles") / c.at("wino_rt"));
  if (threads != 128 && threads != 256)
    return std::to_string(threads) + " threads a block (tuned: 128 or 256)";
  if (c.at("wino_rk") * c.at("wino_rt") < 32)
    return std::to_string(c.at("wino_rk") * c.at("wino_rt")) + " accumulators a thread (tuned: 32 or 64)";
  if (c.at("wino_c") < 8) return "wino_c " + std::to_string(c.at("wino_c")) + " (tuned: 8 or 16)";
  if (c.at("wino_min_blocks") == 2 && threads > 256) return "wino_min_blocks 2 with more than 256 threads";
  return {};
}

KernelSource wgemm_source(const ConvProblem& p, const Config& config) {
  const auto& s = p.shape();
  std::string name = "jitune::conv::conv2d_winograd_gemm<" + std::to_string(s.layout == ImageLayout::kNHWC ? 1 : 0);
  for (std::int64_t v : {s.c, s.k, config.at("wino_k"), config.at("wino_tiles"), config.at("wino_c"),
                         config.at("wino_rk"), config.at("wino_rt"), config.at("wino_min_blocks")})
    name += ", " + std::to_string(v);
  name += s.bias ? ", 1>" : ", 0>";
  return program(p, std::move(name), kWinogradGemmTemplate);
}

LaunchShape wgemm_launch_shape(const ConvProblem& p, const Config& config) {
  const WgemmGeometry g = wgemm_geometry(p, config);
  LaunchShape shape;
  shape.grid.x = static_cast<unsigned>(std::min<std::int64_t>(g.blocks, std::int64_t{1} << 30));
  shape.block.x = static_cast<unsigned>(g.threads);
  shape.cooperative = true;
  return shape;
}

LaunchPrep wgemm_prep(const ConvProblem& p, const Config& config) {
  LaunchPrep prep;
  prep.workspace_bytes = wgemm_geometry(p, config).workspace_bytes;
  prep.zero_end = 4;  // the barrier counter
  prep.rezeroed_by_kernel = true;
  return prep;
}

}  // namespace jitune::templates::conv2d::detail
