// The conv2d implicit-GEMM variant (algo 1, igemm.cuh) on the host: geometry, legality, default and launch.
#include <algorithm>

#include "templates/conv2d/conv2d_detail.hpp"

namespace jitune::templates::conv2d::detail {
namespace {

constexpr std::int64_t kMaxAccumulators = 128;  // floats per thread: the rest of the body needs the other half

// Blocks sharing a tile's reduction where the output tiles leave SMs idle: two where there are fewer tiles than
// SMs and at least 8 stages to share. On the H100 the tuned picks of the public cases (28 tiles x 36 stages, 98 x 9,
// 100 x 36) were all split_k 2; 4 ran 1.21x slower than 2 on the first (partial-tile traffic, one summing block).
std::int64_t heuristic_split(const ConvProblem& p, std::int64_t tm, std::int64_t tn, std::int64_t tk,
                             const DeviceInfo& device) {
  const auto& s = p.shape();
  const std::int64_t tiles = ceil_div(s.n * p.p() * p.q(), tm) * ceil_div(s.k, tn);
  const std::int64_t k_tiles = ceil_div(s.c * s.r * s.s, tk);
  return tiles < device.sm_count && k_tiles >= 8 ? 2 : 1;
}

// Bytes per staged element (2, or 4 for float32 on TF32 tensor cores) and elements per 16-byte chunk.
std::int64_t element_bytes(const ConvProblem& p) {
  return static_cast<std::int64_t>(dtype_size(p.dtype()));
}
std::int64_t chunk_elements(const ConvProblem& p) {
  return 16 / element_bytes(p);
}

}  // namespace

RepackPlan repack_plan(std::int64_t c, std::int64_t l, std::int64_t capacity, std::int64_t v) {
  // Mirrors igemm_repack.cuh's repack_plan: 64-position segments of up to 64 channels where whole rows of 64
  // channels do not fit a stage and L is a multiple of v, else whole rows split evenly over the tiles.
  RepackPlan plan;
  const std::int64_t wanted = std::min<std::int64_t>(c, 64);
  const std::int64_t flat = std::min(c, capacity / l / v * v);
  if (flat < wanted && l % v == 0 && capacity >= 64 * v) {
    std::int64_t kc = wanted;  // halved in whole v groups until 64 positions of it fit (v channels always do)
    while (kc > v && kc * 64 > capacity) kc = std::max(v, kc / 2 / v * v);
    const std::int64_t kl = capacity / kc / 64 * 64;
    plan.kc = kc, plan.kl = kl < l ? kl : round_up(l, 64), plan.flat = false;
  } else if (flat >= v) {
    const std::int64_t parts = ceil_div(c, flat);
    plan.kc = round_up(ceil_div(c, parts), v), plan.kl = l;
  }
  return plan;
}

std::string repack2_check(const ConvProblem& p, const Config& c) {
  const auto& s = p.shape();
  const std::string rp = "repack " + std::to_string(c.at("repack"));
  const std::int64_t v = chunk_elements(p);
  // y staged channels last, then unstaged from 16-byte chunks of channels.
  if (repack2_stages_y(p) && s.k % v != 0)
    return rp + " stages y channels last where P * Q = " + std::to_string(p.p() * p.q()) +
           " is not a multiple of " + std::to_string(v) +
           ", in 16-byte chunks of channels: K a multiple of " + std::to_string(v) +
           " (K = " + std::to_string(s.k) + "); repack 1 stores y in place";
  // repack 3's steps take any shape (igemm_launches.cuh: tiles of at most 64 positions) whose 64 rows of H *
  // W positions have 32-bit offsets; repack 2's ring lives in the GEMM's stage buffers.
  if (c.at("repack") == 3)
    return 64 * s.h * s.w < (std::int64_t{1} << 31)
               ? std::string()
               : rp + " indexes a tile of 64 channels x H * W = " + std::to_string(s.h * s.w) +
                     " positions in 32 bits (at most 33554431 positions); repack 1 copies any shape";
  const std::int64_t capacity = repack_capacity(p, c);
  for (const std::int64_t l : {s.r * s.s, s.h * s.w})
    if (repack_plan(s.c, l, capacity, v).kc == 0)
      return rp + " copies whole rows of " + std::to_string(l) + " positions or 64-position segments (" +
             std::to_string(l) + " is not a multiple of " + std::to_string(v) + ") through ring stages of " +
             std::to_string(capacity) + " elements, and neither fits: repack 1 copies any shape";
  if (repack2_stages_y(p) && 4 * capacity < v * p.p() * p.q())
    return rp + " unstages y " + std::to_string(v) + " channels of a whole " + std::to_string(p.p()) + " x " +
           std::to_string(p.q()) + " image at a time, more than its " + std::to_string(4 * capacity) +
           " elements of stage buffers; repack 1 stores y in place";
  return {};
}

bool repack2_stages_y(const ConvProblem& p) {
  return p.p() * p.q() % chunk_elements(p) != 0;
}

namespace {
/// igemm_launches.cuh's StepSplit::copy_tiles: a [rows][l] source in pieces of at most 64 positions, whole
/// rows grouped into tiles of up to 64 positions, rows in groups of 32 words of channels; rows of 65 to 256
/// positions whole, 8 words of channels a tile.
std::int64_t step_tiles(std::int64_t rows, std::int64_t l, std::int64_t element_bytes) {
  if (l > 64 && l <= 256) return ceil_div(rows, 32 / element_bytes);  // whole rows, 32 bytes of channels a tile
  const std::int64_t parts = ceil_div(l, 64), span = ceil_div(l, parts);
  const std::int64_t groups = span == l ? 64 / l : 1, tile_rows = groups * 128 / element_bytes;
  return ceil_div(rows, tile_rows) * parts;
}
}  // namespace

std::int64_t repack3_tiles(const ConvProblem& p) {
  const auto& s = p.shape();
  const std::int64_t es = element_bytes(p);
  return step_tiles(s.n * s.c, s.h * s.w, es) + step_tiles(s.k * s.c, s.r * s.s, es);
}

std::int64_t repack3_unstage_tiles(const ConvProblem& p) {
  const auto& s = p.shape();
  const std::int64_t pq = p.p() * p.q(), parts = ceil_div(pq, 64);
  return s.n * ceil_div(s.k, 128 / element_bytes(p)) * parts;
}

std::int64_t repack_capacity(const ConvProblem& p, const Config& c) {
  // igemm_repack.cuh: kRepackRing (4) buffers in the GEMM's min(stages, stages per split) stage buffers.
  const IgemmGeometry g = igemm_geometry(p, c);
  const std::int64_t v = chunk_elements(p), stages = std::min(c.at("stages"), g.per_split);
  const std::int64_t pitch = c.at("mma") == 1 ? c.at("tile_k") : c.at("tile_k") + v;
  return stages * (c.at("tile_m") + c.at("tile_n")) * pitch / 4 / v * v;
}

std::string pixel_runs_check(const ConvProblem& p) {
  const auto& s = p.shape();
  if (s.r != 1 || s.s != 1 || s.stride_h != 1 || s.stride_w != 1 || s.pad_h != 0 || s.pad_w != 0)
    return "it needs a 1x1 filter, stride 1 and no padding (an output pixel's input is the same pixel; this "
           "problem has a " + std::to_string(s.r) + "x" + std::to_string(s.s) + " filter, stride " +
           std::to_string(s.stride_h) + "x" + std::to_string(s.stride_w) + ", padding " + std::to_string(s.pad_h) +
           "x" + std::to_string(s.pad_w) + ")";
  if ((s.h * s.w) % 2 != 0)
    return "it copies at least 2 pixels (4 bytes) at a time within one image: H * W = " +
           std::to_string(s.h * s.w) + " is odd";
  return {};
}

bool pixel_runs_default(const ConvProblem& p, const DeviceInfo& device) {
  const auto& s = p.shape();
  // Tiles of 64 pixels, 64 channels and 64 reduction elements are legal (less than twice the problem) where M > 32,
  // K > 32 and C > 32; C = 64 is the smallest the H100 measured.
  return device.cc() == 90 && (p.dtype() == DType::kFloat16 || p.dtype() == DType::kBFloat16) &&
         s.layout == ImageLayout::kNCHW && s.c % 8 == 0 && s.c >= 64 && s.k > 32 &&
         s.n * p.p() * p.q() > 32 && pixel_runs_check(p).empty();
}

Config complete_config(Config config) {
  for (const Param& p : conv2d_family().space().params())
    if (!config.find(p.name)) config.set(p.name, p.values.front());
  return conv2d_family().space().canonical(std::move(config));
}

IgemmGeometry igemm_geometry(const ConvProblem& p, const Config& c) {
  const std::int64_t tm = c.at("tile_m"), tn = c.at("tile_n"), tk = c.at("tile_k"), wm = c.at("warps_m"),
                     wn = c.at("warps_n");
  // wgmma: warps_m x warps_n warpgroups of four warps, each warp 16 of its warpgroup's 64 rows.
  const bool wgmma = c.at("mma") == 1;
  IgemmGeometry g;
  g.threads = static_cast<int>((wgmma ? 128 : 32) * wm * wn);
  g.warp_m = static_cast<int>(tm / wm / (wgmma ? 4 : 1));
  g.warp_n = static_cast<int>(tn / wn);
  g.m_total = p.shape().n * p.p() * p.q();
  // The pipeline touches no more buffers than a block has stages to multiply (igemm.cuh's ring: slice i goes to
  // buffer i % stages), so a short reduction (a 1x1 of 64 channels: one stage) leaves room for more blocks an SM.
  g.k_tiles = ceil_div(p.shape().c * p.shape().r * p.shape().s, c.at("tile_k"));
  g.per_split = ceil_div(g.k_tiles, c.at("split_k"));
  const std::int64_t stages = c.at("stages");
  const bool persist = c.at("persist") == 1;  // the ring runs on across tiles, the tile staged past it
  const std::int64_t buffers = stages > 0 ? (persist ? stages : std::min(stages, g.per_split)) : 2;
  // Rows padded by 16 bytes (mma.sync's ldmatrix), or swizzled unpadded in buffers aligned to 1024 bytes.
  const std::int64_t es = element_bytes(p), v = chunk_elements(p);
  const std::int64_t pitch = wgmma ? tk : tk + v, main_bytes = buffers * (tm + tn) * pitch * es;
  const std::int64_t out_bytes = std::max(tn * (tm + 8), tm * (tn + 8)) * es;  // [k][m] (NCHW) or [m][k] (NHWC)
  // The register-staged kernel adds two stages' reduction tables; repack 1 first stages x in tiles of 64 channels
  // x one pixel per thread (2 halves of padding a channel).
  g.shared_bytes = (persist ? main_bytes + out_bytes : std::max(main_bytes, out_bytes)) +
                   (stages > 0 ? 0 : 2 * tk * 16) + (wgmma ? 1024 : 0);
  // (TF32: one word of padding a channel).
  if (c.at("repack") == 1)  // (repack 2's ring lives in the stage buffers)
    g.shared_bytes = std::max<std::int64_t>(g.shared_bytes, 64 * (g.threads + (es == 2 ? 2 : 1)) * es +
                                                                (wgmma ? 1024 : 0));
  const std::int64_t mi = g.warp_m / 16, ni = g.warp_n / 8;
  g.accumulators = static_cast<int>(mi * ni * 4);
  const std::int64_t a_per = ceil_div(tm * tk / v, g.threads), b_per = ceil_div(tn * tk / v, g.threads);
  // Accumulators, one k-step's fragments (none for wgmma: descriptors), the next stage's chunks (4 registers
  // each; none for cp.async), gather addressing (image pointer pair, row / column bases and offset per A chunk)
  // and indices.
  // TF32's chunks are 4 elements of 4 bytes: a register more per staged chunk and four more of addressing per
  // gathered one (fitted to NVRTC's sm_80 / sm_90 allocations of the host test's sample).
  const bool tf32 = es == 4;
  g.register_estimate = static_cast<int>(g.accumulators + (wgmma ? 4 : mi * 4 + ni * 2) +
                                         (stages > 0 ? 0 : (tf32 ? 5 : 4) * (a_per + b_per)) +
                                         (tf32 ? 9 : 5) * a_per + 32);
  g.grid_m = ceil_div(g.m_total, tm);
  g.grid_n = ceil_div(p.shape().k, tn);
  return g;
}

std::string igemm_hard_check(const ConvProblem& p, const Config& c, const DeviceInfo& device) {
  const auto& s = p.shape();
  if (p.dtype() != DType::kFloat16 && p.dtype() != DType::kBFloat16 && !p.tf32())
    return "algo 1 (implicit GEMM on tensor cores) takes float16 or bfloat16, or float32 where the problem opts in "
           "to TF32 (precision tf32); this " + std::string(dtype_name(p.dtype())) +
           " problem keeps its products exact: the direct kernel (algo 0) or Winograd (algo 3)";
  if (device.cc() < 80)
    return "algo 1 needs mma.sync on bfloat16 / float16 / TF32 (sm_80 or newer); the device is " + device.arch();
  // 256 channels a block: wgmma warpgroups only (mma.sync's warp tiles stop at 64 x 32 channels).
  if (c.at("tile_n") > 128 && c.at("mma") != 1)
    return "tile_n " + std::to_string(c.at("tile_n")) +
           " with mma.sync (mma 0); algo 1 takes 256 on wgmma (mma 1), "
           "16 to 128 otherwise";
  const std::int64_t v = chunk_elements(p);
  if (s.c * s.r * s.s > (std::int64_t{1} << 30))
    return "algo 1 indexes the reduction C * R * S = " + std::to_string(s.c * s.r * s.s) + " in 32 bits";
  // One image's offsets (with the padding's reach) in 32 bits; rows past the output sit 2^30 above the input.
  if ((s.h + 2 * s.pad_h + 1) * (s.w + 2 * s.pad_w) * s.c >= (std::int64_t{1} << 31) ||
      s.h + 2 * s.pad_h >= (std::int64_t{1} << 29) || s.w + 2 * s.pad_w >= (std::int64_t{1} << 29))
    return "algo 1 indexes one padded image (C x H x W = " + std::to_string(s.c) + " x " + std::to_string(s.h) +
           " x " + std::to_string(s.w) + ") in 32 bits";
  if (c.at("repack") != 0) {
    const std::string rp = "repack " + std::to_string(c.at("repack"));
    if (s.layout != ImageLayout::kNCHW)
      return rp + " copies an NCHW input to channels last; this x is channels last already: repack 0";
    if (s.c % v != 0 || c.at("stages") == 0)
      return rp + " feeds the cp.async pipeline 16-byte taps: C a multiple of " + std::to_string(v) +
             " (C = " + std::to_string(s.c) + ") and stages 2 to 8 (stages " +
             std::to_string(c.at("stages")) + ")";
    if (const std::size_t bytes = igemm_prep(p, c).workspace_bytes; bytes > kMaxRepackWorkspace)
      return rp + " copies x and w into a workspace of " + std::to_string(bytes) +
             " bytes; at most 4 GiB: repack 0 reads them in place";
    // (A TF32 tile of two warpgroups spilled repack 2's copy ring's addressing under min_blocks 2's 128
    // registers; repack 3 copies in a kernel of its own.)
    if (c.at("repack") == 2 && c.at("min_blocks") != 1)
      return "repack 2 with min_blocks " + std::to_string(c.at("min_blocks")) +
             ": its copy ring spills under the lower register cap (repack 1 takes it)";
    if (c.at("repack") >= 2)
      if (std::string why = repack2_check(p, c); !why.empty()) return why;
  }
  if (c.at("stages") > 0 && c.at("repack") == 0) {
    if (s.c % v != 0)
      return "stages " + std::to_string(c.at("stages")) + " (cp.async pipeline) copies 16 bytes (" +
             std::to_string(v) + " weights) of a filter row at a time: C a multiple of " + std::to_string(v) +
             " (C = " + std::to_string(s.c) + "); stages 0 stages through registers";
    if (s.layout == ImageLayout::kNCHW && p.tf32())
      return "stages " + std::to_string(c.at("stages")) +
             " on an NCHW x (repack 0) copies runs of pixels for a pixel-major wgmma operand, which TF32 "
             "does not "
             "take (wgmma reads TF32 K-major only): stages 0 (through registers), or repack 1 (x copied to "
             "channels "
             "last first) for a float32 NCHW x";
    if (s.layout == ImageLayout::kNCHW) {
      if (const std::string why = pixel_runs_check(p); !why.empty())
        return "stages " + std::to_string(c.at("stages")) +
               " on an NCHW x (repack 0) copies runs of pixels: " + why +
               "; stages 0 stages through registers, and repack 1 copies x to channels last first";
      if (c.at("mma") != 1)
        return "stages " + std::to_string(c.at("stages")) +
               " on an NCHW x (repack 0) feeds wgmma a pixel-major operand: mma 1";
    }
  }
  if (c.at("persist") == 1 &&
      (s.layout != ImageLayout::kNCHW || c.at("stages") == 0 || c.at("repack") != 0 || c.at("split_k") != 1 ||
       c.at("mma") != 1))
    return "persist 1 runs the NCHW 1x1 pixel-run pipeline (an NCHW x, stages 3 to 8, repack 0, mma 1) "
           "without "
           "split-K (split_k 1)";
  if (c.at("mma") == 1) {
    if (device.cc() != 90)
      return "mma 1 (wgmma) runs on sm_90 only; the device is " + device.arch() + ": mma 0 (mma.sync) runs there";
    if (c.at("tile_k") * element_bytes(p) != 128)
      return "mma 1 (wgmma) stages 128-byte rows: tile_k " + std::to_string(128 / element_bytes(p)) +
             " for " + std::string(dtype_name(p.dtype())) + ", not " + std::to_string(c.at("tile_k"));
    if (c.at("tile_m") != 64 * c.at("warps_m"))
      return "mma 1 (wgmma): each of warps_m warpgroups takes 64 pixels, so tile_m = 64 * warps_m (" +
             std::to_string(c.at("tile_m")) + " with warps_m " + std::to_string(c.at("warps_m")) + ")";
    if ((c.at("tile_n") / c.at("warps_n")) % 64 != 0)
      return "mma 1 (wgmma): each warpgroup takes channels in 64s; tile_n / warps_n = " +
             std::to_string(c.at("tile_n") / c.at("warps_n"));
    if (c.at("stages") == 2)
      return "mma 1 (wgmma) keeps one stage's products in flight: stages 0 (through registers) or 3 and more";
  }
  const IgemmGeometry g = igemm_geometry(p, c);
  if ((c.at("split_k") - 1) * g.per_split >= g.k_tiles)
    return "split_k " + std::to_string(c.at("split_k")) +
           " leaves a split without work: C * R * S = " + std::to_string(s.c * s.r * s.s) + " is " +
           std::to_string(g.k_tiles) + " stages of tile_k " + std::to_string(c.at("tile_k"));
  if (g.grid_m * g.grid_n * c.at("split_k") > (std::int64_t{1} << 30))
    return "split_k " + std::to_string(c.at("split_k")) + " over " + std::to_string(g.grid_m * g.grid_n) +
           " output tiles: too many partial tiles";
  if (g.m_total + c.at("tile_m") > (std::int64_t{1} << 31) - 1)
    return "algo 1 indexes the N * P * Q = " + std::to_string(g.m_total) + " output pixels in 32 bits";
  if (g.warp_m % 16 != 0 || g.warp_n % 16 != 0)
    return "warp tile " + std::to_string(g.warp_m) + " x " + std::to_string(g.warp_n) +
           " (tile_m / warps_m x tile_n / warps_n) is not a multiple of 16 x 16";
  if (g.threads > std::min(256, device.max_threads_per_block))
    return "block of " + std::to_string(g.threads) + " threads; algo 1 allows at most 256";
  if (g.accumulators > kMaxAccumulators)
    return std::to_string(g.accumulators) + " accumulators per thread (warp tile " +
           std::to_string(g.warp_m) + " x " + std::to_string(g.warp_n) + "); at most " +
           std::to_string(kMaxAccumulators);
  if (g.register_estimate > kMaxRegisters)
    return "needs about " + std::to_string(g.register_estimate) + " registers per thread; at most " +
           std::to_string(kMaxRegisters);
  if (p.tf32()) {
    // The register-staged TF32 kernel holds a stage's chunks in registers: 128-byte rows (32 floats) at most,
    // as for 16-bit elements; wider stages spilled in NVRTC's sm_80 and sm_90 builds.
    if (c.at("stages") == 0 && c.at("tile_k") > 32)
      return "tile_k " + std::to_string(c.at("tile_k")) +
             " through registers in TF32: 256-byte rows spill; at most 32 floats a row";
    const std::int64_t cap = std::min<std::int64_t>(kMaxRegisters, 65536 / (g.threads * c.at("min_blocks")));
    if (g.register_estimate > cap)
      return "needs about " + std::to_string(g.register_estimate) + " registers per thread; min_blocks " +
             std::to_string(c.at("min_blocks")) + " caps " + std::to_string(g.threads) + " threads at " +
             std::to_string(cap);
  }
  if (c.at("min_blocks") * (g.shared_bytes + 1024) > device.max_shared_per_sm)
    return std::to_string(c.at("min_blocks")) + " blocks of " + std::to_string(g.shared_bytes) +
           " bytes of shared memory do not fit one SM (" + std::to_string(device.max_shared_per_sm) + ")";
  if (g.shared_bytes > device.max_shared_per_block_optin)
    return "needs " + std::to_string(g.shared_bytes) + " bytes of shared memory; the device allows " +
           std::to_string(device.max_shared_per_block_optin) + " per block";
  // Tiles more than twice the problem leave most of the block idle.
  if (c.at("tile_n") > 16 && c.at("tile_n") >= 2 * s.k)
    return "tile_n " + std::to_string(c.at("tile_n")) + " is at least twice K = " + std::to_string(s.k) +
           ": more than half of the block's channels would idle";
  if (c.at("tile_m") > 32 && c.at("tile_m") >= 2 * g.m_total)
    return "tile_m " + std::to_string(c.at("tile_m")) + " is at least twice the " +
           std::to_string(g.m_total) + " output pixels";
  if (c.at("tile_k") > 16 && c.at("tile_k") >= 2 * s.c * s.r * s.s)
    return "tile_k " + std::to_string(c.at("tile_k")) +
           " is at least twice C * R * S = " + std::to_string(s.c * s.r * s.s);
  return {};
}

std::string igemm_neighbourhood_check(const ConvProblem& p, const Config& c, const DeviceInfo& device) {
  // Short reductions stage 16 at a time; longer ones 32 or 64 (fewer barriers per MMA).
  const std::int64_t crs = p.shape().c * p.shape().r * p.shape().s;
  if (c.at("tile_k") == 16 && crs > 64)
    return "tile_k 16 for C * R * S = " + std::to_string(crs) + " (tuned: 32 or 64 above 64)";
  // Warp tiles of 32 x 16 to 64 x 32: smaller ones reload the fragments for too few MMAs, larger ones cap
  // the blocks per SM (64 channels a warp never won on the H100, through registers or cp.async); at most 8 warps.
  const std::int64_t wm = c.at("tile_m") / c.at("warps_m"), wn = c.at("tile_n") / c.at("warps_n");
  const bool wgmma = c.at("mma") == 1;
  const std::int64_t warps = c.at("warps_m") * c.at("warps_n") * (wgmma ? 4 : 1);
  if (!wgmma && (wm < 32 || wm > 64 || wn < 16 || wn > 32))
    return "warp tile " + std::to_string(wm) + " x " + std::to_string(wn) +
           " (tuned: 32 to 64 pixels x 16 to 32 channels)";
  // Where the cp.async pipeline applies it beat the register-staged stages by 10-17% on every channels-last case
  // of the H100 (the register-staged kernel still runs pointers less than 16-byte aligned: Family::variant),
  // and a second block per SM (min_blocks 2) only lost.
  const auto& s = p.shape();
  if (c.at("stages") == 0 && s.layout == ImageLayout::kNHWC && s.c % chunk_elements(p) == 0)
    return "stages 0 where the cp.async pipeline applies (channels last, C a multiple of " +
           std::to_string(chunk_elements(p)) + "; tuned: 2 to 8)";
  // An NCHW 1x1 read as pixel runs on wgmma: the exhaustive H100 tunes of the suite's three 1x1 rows all picked it
  // (N32 C256 56x56: 28.87 us against 44.61 through registers and 68.17 repacked).
  if (pixel_runs_default(p, device) && (c.at("stages") == 0 || c.at("repack") != 0))
    return (c.at("repack") != 0 ? "repack " + std::to_string(c.at("repack")) : std::string("stages 0")) +
           " where the NCHW 1x1 is read in place as pixel runs (tuned: stages 3 to 8, repack 0, wgmma)";
  // The repacking kernel's GEMM is the channels-last pipeline, where wgmma beat mma.sync by 1.16-1.55x on every
  // channels-last case of the H100.
  if (c.at("repack") != 0 && device.cc() == 90 && !wgmma)
    return "repack " + std::to_string(c.at("repack")) + " with mma.sync on sm_90 (tuned: wgmma, mma 1)";
  if (c.at("stages") > 0 && c.at("min_blocks") == 2)
    return "min_blocks 2 with the cp.async pipeline (tuned: 1)";
  // The repacked layers' picks on the H200 took 4 to 8 stages, never 3 (a copy ring of 3 stages is shallow too),
  // and split_k 1 or 2.
  if (c.at("repack") >= 2 && (c.at("stages") < 4 || c.at("split_k") > 2))
    return "repack " + std::to_string(c.at("repack")) + " with " + std::to_string(c.at("stages")) +
           " stages and split_k " + std::to_string(c.at("split_k")) +
           " (tuned: 4 to 8 stages, split_k 1 or 2)";
  // Three launches a call pay their launch gaps back only over a few waves of tiles: not where 64 x 64 output tiles
  // number fewer than the SMs (N1 C = K = 256 14x14: 16 tiles).
  if (c.at("repack") == 3) {
    const std::int64_t tiles = ceil_div(p.shape().n * p.p() * p.q(), 64) * ceil_div(p.shape().k, 64);
    if (tiles < device.sm_count)
      return "repack 3 (three launches) where 64 x 64 output tiles number " + std::to_string(tiles) +
             ", fewer than the " + std::to_string(device.sm_count) + " SMs (repack 1 and 2 are one launch)";
  }
  // Split-K pays where the output tiles leave SMs idle, and only with a few stages per split.
  if (c.at("split_k") > 1) {
    const IgemmGeometry g = igemm_geometry(p, c);
    if (g.grid_m * g.grid_n >= device.sm_count)
      return "split_k " + std::to_string(c.at("split_k")) + " where the " + std::to_string(g.grid_m * g.grid_n) +
             " output tiles already give every SM a block";
    if (g.grid_m * g.grid_n * c.at("split_k") > 2 * device.sm_count)
      return "split_k " + std::to_string(c.at("split_k")) + " over " + std::to_string(g.grid_m * g.grid_n) +
             " output tiles: more than two blocks per SM";
    if (g.per_split < 3)
      return "split_k " + std::to_string(c.at("split_k")) + " leaves " + std::to_string(g.per_split) +
             " stages per split (at least 3)";
  }
  if (warps > 8) return std::to_string(warps) + " warps per block (tuned: at most 8)";
  // 256 channels a block: two warpgroups of 64 x 128 in the cp.async pipeline (the H200's N32 C256 14x14
  // channels-last pick, 2% ahead of 128 x 128; one warpgroup of 64 x 256, 128 x 256 tiles and the register-staged
  // or repack 1 kernels never led with it).
  if (c.at("tile_n") == 256 &&
      (c.at("tile_m") != 64 || c.at("warps_n") != 2 || c.at("stages") == 0 || c.at("repack") == 1))
    return "tile_n 256 as " + std::to_string(c.at("tile_m")) + " x 256 of " +
           std::to_string(c.at("warps_m") * c.at("warps_n")) + " warpgroups, stages " +
           std::to_string(c.at("stages")) + ", repack " + std::to_string(c.at("repack")) +
           " (tuned: 64 x 256 of two warpgroups, 128 channels each, in the cp.async pipeline, repack 0, 2 or "
           "3)";
  if (c.at("min_blocks") == 2 && 32 * warps * 2 * 255 <= 65536)
    return "min_blocks 2 with " + std::to_string(32 * warps) + " threads: the register cap stays 255";
  return {};
}

bool igemm_preferred(const ConvProblem& p, const DeviceInfo& device) {
  const auto& s = p.shape();
  // Measured on the H100 (bench/RESULTS.md): C = K = 64 3x3 runs 1.5x faster on tensor cores than the direct
  // kernel, C = K = 16 three times slower; an NCHW 1x1 of C = 64, K = 256 read as pixel runs on wgmma 12.6x faster.
  return (p.dtype() == DType::kFloat16 || p.dtype() == DType::kBFloat16 || p.tf32()) && device.cc() >= 80 &&
         (s.layout == ImageLayout::kNHWC || (s.c * s.r * s.s >= 256 && s.k >= 32) || pixel_runs_default(p, device));
}

Config igemm_heuristic(const ConvProblem& p, const DeviceInfo& device) {
  const auto& s = p.shape();
  const std::int64_t m_total = s.n * p.p() * p.q();
  // From the H100's tuned picks (bench/experiments/conv_algos.py, tune_breakdown.py): 64 x 128 tiles where K
  // reaches 128, 128 x 64 where it reaches 64, 32-pixel tiles of four warps where the problem has too few pixels
  // to give every SM a block. Through registers (NCHW): eight 32 x 32 warps, two blocks per SM where that makes
  // eight; channels last would spill under that cap. The cp.async pipeline (channels last, C a multiple of 8):
  // four 64 x 32 or 32 x 64 warps, three stages, one block per SM's register cap.
  std::int64_t tn = s.k >= 128 ? 128 : s.k >= 64 ? 64 : s.k > 16 ? 32 : 16;
  auto blocks = [&](std::int64_t tm, std::int64_t n) { return ceil_div(m_total, tm) * ceil_div(s.k, n); };
  if (tn == 128 && blocks(32, tn) < device.sm_count) tn = 64;
  std::int64_t tm = tn == 128 ? 64 : 128;
  while (tm > 32 && blocks(tm, tn) < device.sm_count) tm /= 2;
  // Stages of 128 bytes a row where the reduction is long (64 halves, 32 TF32 floats).
  const std::int64_t wide_k = 128 / element_bytes(p);
  const std::int64_t tk = s.c * s.r * s.s >= 256 ? wide_k : s.c * s.r * s.s >= 64 ? 32 : 16;
  const bool pipelined = s.layout == ImageLayout::kNHWC && s.c % chunk_elements(p) == 0;
  // wgmma on sm_90 (channels last through the cp.async pipeline), where 64 x 64 tiles give every SM a block: the
  // H100's tuned picks were 128-pixel tiles of two warpgroups, 128 channels where K reaches 128, four stages
  // (bench/RESULTS.md; 1.16-1.55x the mma.sync kernel's best). Through registers (NCHW) it lost to mma.sync; an
  // NCHW x with C a multiple of 8 is repacked to channels last first (repack 1).
  // An NCHW 1x1 convolution of stride 1 without padding reads x in place as runs of pixels (pixel-major A) instead.
  // Its tuned neighbourhood keeps only that kernel there, so it is the default at any size (64-pixel tiles and
  // split-K where the tiles are few).
  const std::int64_t wg_n = s.k >= 128 ? 128 : 64;
  const bool pixel_runs = pixel_runs_default(p, device);
  // (TF32 has no pixel-run operand: its NCHW 1x1 layers are repacked too.)
  const bool repack = s.layout == ImageLayout::kNCHW && s.c % chunk_elements(p) == 0 &&
                      (p.tf32() || !pixel_runs_check(p).empty());
  if (pixel_runs || ((pipelined || repack) && device.cc() == 90 && s.k > 32 && s.c * s.r * s.s >= 128 &&
                     blocks(64, 64) >= device.sm_count)) {
    const std::int64_t wg_m = blocks(128, wg_n) >= device.sm_count / 2 && m_total > 64 ? 128 : 64;
    Config c = complete_config({{"algo", 1},    {"mma", 1},     {"tile_m", wg_m},       {"tile_n", wg_n},
                                      {"tile_k", wide_k}, {"warps_m", wg_m / 64}, {"warps_n", 1}, {"min_blocks", 1},
                                      // split 2 lost 1.16x on the C = 320 row; pixel runs: 3 stages won
                                      // 1.04x on the H100's 1x1 rows
                                      {"stages", pixel_runs ? 3 : 4},
                                      {"split_k", pixel_runs ? heuristic_split(p, wg_m, wg_n, 64, device) : 1},
                                      {"repack", repack ? 1 : 0}});
    // repack 2 (its copy rings, y staged channels last) for small images and wherever it stages y (P * Q not
    // a multiple of the 16-byte chunk, where repack 1 stores y element by element): on the H200 its default
    // beat repack 1's on the 7x7 layers (C = K = 512: 45.5 against 48.9 us, TF32 68.0 against 86.7) and, once
    // the unstaging was spread over every block, on 14x14 (37.1 against 40.1); it lost where y is not staged:
    // 28x28 (34.5 / 32.0), 56x56 (43.2 / 42.1), TF32 14x14 (54.5 / 51.0; bench/RESULTS.md 2026-11-29). repack
    // 3 (the same copies as launches of their own) beat both up to 14x14 on the H200 with these tiles: C = K
    // = 512 7x7 38.5 against 41.1 (repack 2), C = K = 256 14x14 35.8 / 36.8, TF32 14x14 47.7 / 51.5 (repack
    // 1), and lost from 28x28 on (33.7 / 29.5; bench/RESULTS.md 2026-11-29, twenty-third session). With its
    // steps rewritten (twenty-fourth session) it won further up to 14x14 (29.8 / 36.3 against repack 2 on C =
    // K = 256 14x14) and TF32 28x28 by 1.5% in the exhaustive tune; float16 28x28 and 56x56 stayed with
    // repack 1. Where the copies would pass the workspace limit, the in-place kernels below.
    const bool small = p.p() * p.q() <= 196 || repack2_stages_y(p);
    if (repack && small) {
      c.set("repack", 3);
      if (!repack2_check(p, c).empty()) c.set("repack", p.p() * p.q() <= 64 || repack2_stages_y(p) ? 2 : 1);
      if (!repack2_check(p, c).empty()) c.set("repack", 1);
    }
    if (!repack || igemm_prep(p, c).workspace_bytes <= kMaxRepackWorkspace) return c;
  }
  std::int64_t wm = tm == 32 ? 1 : 2;
  std::int64_t wn = tm == 32 ? std::min<std::int64_t>(4, tn / 16) : std::max<std::int64_t>(1, tn / 32);
  if (pipelined && tm > 32) wm = std::max<std::int64_t>(1, tm / 64);
  const Config c{{"algo", 1},     {"tile_m", tm},  {"tile_n", tn},
                 {"tile_k", tk},  {"warps_m", wm}, {"warps_n", wn},
                 {"min_blocks", wm * wn == 8 && s.layout == ImageLayout::kNCHW ? 2 : 1},
                 {"stages", pipelined ? 3 : 0},
                 {"split_k", heuristic_split(p, tm, tn, tk, device)}};
  return complete_config(c);
}

KernelSource igemm_source(const ConvProblem& p, const Config& config) {
  const auto& s = p.shape();
  if (config.at("repack") == 2) {  // conv::conv2d_igemm_repacked, its own template
    std::string name = "jitune::conv::conv2d_igemm_repacked<" + std::string(dtype_cuda_type(p.dtype()));
    for (std::int64_t v : {s.c, s.k, s.r, s.s, s.stride_h, s.stride_w, s.dilation_h, s.dilation_w, config.at("tile_m"),
                           config.at("tile_n"), config.at("tile_k"), config.at("warps_m"), config.at("warps_n"),
                           config.at("min_blocks"), config.at("mma"), config.at("stages"), config.at("split_k"),
                           std::int64_t{s.bias ? 1 : 0}, std::int64_t{repack2_stages_y(p) ? 1 : 0}})
      name += ", " + std::to_string(v);
    return program(p, name + ">", kRepackTemplate);
  }
  if (config.at("repack") == 3) {  // conv::conv2d_igemm_after_copy, the main kernel of three launches
    std::string name = "jitune::conv::conv2d_igemm_after_copy<" + std::string(dtype_cuda_type(p.dtype()));
    for (std::int64_t v :
         {s.c, s.k, s.r, s.s, s.stride_h, s.stride_w, s.dilation_h, s.dilation_w, config.at("tile_m"),
          config.at("tile_n"), config.at("tile_k"), config.at("warps_m"), config.at("warps_n"),
          config.at("min_blocks"), config.at("mma"), config.at("stages"), config.at("split_k"),
          std::int64_t{s.bias ? 1 : 0}, std::int64_t{repack2_stages_y(p) ? 1 : 0}})
      name += ", " + std::to_string(v);
    return program(p, name + ">", kLaunchesTemplate);
  }
  std::string name = "jitune::conv::conv2d_igemm<" + std::string(dtype_cuda_type(p.dtype()));
  const std::int64_t layout = s.layout == ImageLayout::kNHWC ? 1 : config.at("repack") == 1 ? 2 : 0;
  for (std::int64_t v : {layout, s.c, s.k, s.r, s.s, s.stride_h, s.stride_w, s.dilation_h, s.dilation_w, config.at("tile_m"),
                         config.at("tile_n"), config.at("tile_k"), config.at("warps_m"), config.at("warps_n"),
                         config.at("min_blocks"), config.at("mma"), config.at("stages"), config.at("split_k"),
                         std::int64_t{s.bias ? 1 : 0}, config.at("persist")})
    name += ", " + std::to_string(v);
  name += ">";
  return program(p, std::move(name));
}

LaunchShape igemm_launch_shape(const ConvProblem& p, const Config& config, const DeviceInfo& device) {
  const IgemmGeometry g = igemm_geometry(p, config);
  LaunchShape shape;
  if (config.at("repack") == 3) {
    // A block per output tile and split, as the channels-last kernel; it waits for the copy kernel's writes.
    shape.grid.x = static_cast<unsigned>(
        std::min<std::int64_t>(g.grid_m * g.grid_n * config.at("split_k"), (std::int64_t{1} << 31) - 1));
    shape.programmatic = device.cc() >= 90;
    shape.spread = shape.programmatic;  // its blocks start while the copy drains
  } else if (config.at("repack") != 0) {
    // One resident wave (the loader caps it at the loaded kernel's occupancy), output tiles taken in turn.
    shape.grid.x = static_cast<unsigned>(std::min<std::int64_t>(g.grid_m * g.grid_n * config.at("split_k"),
                                                                std::int64_t{1} << 30));
    shape.cooperative = true;
  } else if (config.at("persist") == 1) {
    // One balanced wave (settled at load from the kernel's occupancy), each block taking tiles in turn.
    shape.balance_units = static_cast<std::uint64_t>(g.grid_m * g.grid_n);
    shape.grid.x = static_cast<unsigned>(std::min<std::int64_t>(g.grid_m * g.grid_n, std::int64_t{1} << 30));
  } else {
    shape.grid.x = static_cast<unsigned>(g.grid_m);
    shape.grid.y = static_cast<unsigned>(g.grid_n);
    shape.grid.z = static_cast<unsigned>(config.at("split_k"));
  }
  shape.block.x = static_cast<unsigned>(g.threads);
  shape.shared_bytes = static_cast<unsigned>(g.shared_bytes);
  return shape;
}

namespace {

// Split-K's part of the workspace: arrival counters (conv::igemm_counter_bytes), then the partial tiles; 0
// without.
std::size_t split_workspace_bytes(const ConvProblem& p, const Config& config) {
  if (config.at("split_k") == 1) return 0;
  const IgemmGeometry g = igemm_geometry(p, config);
  const auto tiles = static_cast<std::size_t>(g.grid_m * g.grid_n);
  return align256(tiles * 4) +
         tiles * static_cast<std::size_t>(config.at("split_k") * config.at("tile_m") * config.at("tile_n")) *
             sizeof(float);
}

}  // namespace

LaunchPrep igemm_prep(const ConvProblem& p, const Config& config) {
  LaunchPrep prep;
  if (config.at("algo") != 1) return prep;
  const bool repack = config.at("repack") != 0;
  if (config.at("split_k") == 1 && !repack) return prep;
  const IgemmGeometry g = igemm_geometry(p, config);
  const auto tiles = static_cast<std::size_t>(g.grid_m * g.grid_n);
  prep.rezeroed_by_kernel = true;
  if (!repack) {
    prep.zero_end = tiles * 4;
    prep.workspace_bytes = split_workspace_bytes(p, config);
    return prep;
  }
  // repack 1 (conv::conv2d_igemm layout 2), 2 (conv::conv2d_igemm_repacked) and 3 (igemm_launches.cuh): the
  // barrier counter (conv::kRepackHeaderBytes; repack 3 has no barrier), the split-K part, x as {N,H,W,C},
  // then w as {K,R,S,C} (repack_offsets); zeroed up to the last split-K counter.
  prep.zero_end = config.at("split_k") > 1 ? 256 + tiles * 4 : 4;
  prep.workspace_bytes = repack_offsets(p, config).end;
  return prep;
}

RepackOffsets repack_offsets(const ConvProblem& p, const Config& config) {
  const auto& s = p.shape();
  const auto es = static_cast<std::size_t>(element_bytes(p));
  const std::size_t split_bytes = split_workspace_bytes(p, config);
  const std::size_t x_bytes = static_cast<std::size_t>(s.n * s.h * s.w * s.c) * es;
  const std::size_t w_bytes = static_cast<std::size_t>(s.k * s.r * s.s * s.c) * es;
  RepackOffsets o;
  o.split = 256;  // conv::kRepackHeaderBytes: repack 1 and 2's barrier counter
  o.x = o.split + align256(split_bytes);
  o.w = o.x + align256(x_bytes);
  o.y = o.end = o.w + w_bytes;
  // repack 2 and 3 where they stage y: y channels last after w.
  if (config.at("repack") >= 2 && repack2_stages_y(p)) {
    o.y = o.w + align256(w_bytes);
    o.end = o.y + static_cast<std::size_t>(s.n * p.p() * p.q() * s.k) * es;
  }
  return o;
}

std::vector<StepKernel> igemm_steps(const ConvProblem& p, const Config& config, const DeviceInfo& device) {
  if (config.at("algo") != 1 || config.at("repack") != 3) return {};
  const auto& s = p.shape();
  const std::string type(dtype_cuda_type(p.dtype()));
  // igemm_launches.cuh: kStepThreads threads, static shared memory, a block per tile.
  LaunchShape shape;
  shape.block.x = 256;
  shape.grid.x = static_cast<unsigned>(repack3_tiles(p));
  std::vector<StepKernel> steps;
  // The copy's program has no epilogue: every epilogue of a problem shares it.
  steps.push_back({{"#include \"" + std::string(kLaunchesTemplate) + "\"\n",
                    "jitune::conv::conv2d_repack_copy<" + type + ", " + std::to_string(s.c) + ", " +
                        std::to_string(s.k) + ", " + std::to_string(s.r * s.s) + ">"},
                   shape,
                   false});
  if (repack2_stages_y(p)) {
    LaunchShape after = shape;
    after.grid.x = static_cast<unsigned>(repack3_unstage_tiles(p));
    after.programmatic = device.cc() >= 90;  // conv2d_unstage waits for the GEMM
    steps.push_back({program(p, "jitune::conv::conv2d_unstage<" + type + ", " + std::to_string(s.k) + ">",
                             kLaunchesTemplate),
                     after, true});
  }
  return steps;
}

void igemm_step_args(const ConvProblem& p, const Config& config, std::size_t index, const Bindings& b,
                     KernelArgs& args) {
  const RepackOffsets o = repack_offsets(p, config);
  auto* const ws = static_cast<unsigned char*>(b.workspace);
  push_call_args(p, config, b.pointers[0], b.pointers[1], p.shape().bias ? b.pointers[2] : nullptr, b.at(3),
                 p.residual() ? b.pointers[4] : nullptr, args);
  if (index == 0) {
    args.push(static_cast<void*>(ws + o.x));
    args.push(static_cast<void*>(ws + o.w));
  } else {
    args.push(static_cast<void*>(ws + o.y));
  }
}

void igemm_main_extra_args(const ConvProblem& p, const Config& config, void* workspace, KernelArgs& args) {
  const RepackOffsets o = repack_offsets(p, config);
  auto* const ws = static_cast<unsigned char*>(workspace);
  args.push(static_cast<void*>(ws + o.x));
  args.push(static_cast<void*>(ws + o.w));
  args.push(repack2_stages_y(p) ? static_cast<void*>(ws + o.y) : nullptr);
}

}  // namespace jitune::templates::conv2d::detail
