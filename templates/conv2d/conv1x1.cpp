// conv2d algo 6 on the host: an NCHW 1x1 convolution as a streaming GEMM (conv1x1.cuh): geometry, limits, the
// tuned neighbourhood, default, launch, and the kernel a misaligned call runs instead.
#include <algorithm>

#include "templates/conv2d/conv2d_detail.hpp"

namespace jitune::templates::conv2d::detail {

StreamGeometry stream_geometry(const ConvProblem& p, const Config& c) {
  const auto& s = p.shape();
  StreamGeometry g;
  g.tile_k = c.at("tile_n");
  g.tile_p = c.at("tile_m");
  g.warps_k = c.at("warps_n");
  g.warps_p = c.at("warps_m");
  g.threads = 32 * g.warps_k * g.warps_p;
  g.warp_k = g.tile_k / g.warps_k;
  g.warp_p = g.tile_p / g.warps_p;
  g.accumulators = (g.warp_k / 16) * (g.warp_p / 8) * 4;
  g.cp = round_up(s.c, 16);
  g.kp = round_up(s.k, g.tile_k);
  g.pixels = p.p() * p.q();
  g.tiles = s.n * ceil_div(g.pixels, g.tile_p);
  // StreamLayout: w [Kp][Cp + 8], the ring [stages][Cp][tile_p + 8], each warp's stage [warp_k][warp_p + 8].
  const std::int64_t elements = g.kp * (g.cp + 8) + c.at("stages") * g.cp * (g.tile_p + 8) +
                                g.warps_k * g.warps_p * g.warp_k * (g.warp_p + 8);
  g.shared_bytes = elements * 2;
  // Accumulators, one k16 step's A and B fragments, addressing; the bias's two values a row group and an
  // epilogue's residual run and expression (a 64 x 64 warp tile with both spilled at 255 registers).
  g.register_estimate = g.accumulators + (g.warp_k / 16) * 4 + (g.warp_p / 8) * 2 + 40 + (s.bias ? 16 : 0) +
                        (p.epilogue() ? 48 : 0);
  return g;
}

std::string stream_problem_check(const ConvProblem& p) {
  const auto& s = p.shape();
  if (p.dtype() != DType::kFloat16 && p.dtype() != DType::kBFloat16)
    return "algo 6 (the NCHW 1x1 streaming GEMM) takes float16 or bfloat16; " + std::string(dtype_name(p.dtype())) +
           " runs algos 0 or 1";
  if (s.layout != ImageLayout::kNCHW || s.r != 1 || s.s != 1 || s.stride_h != 1 || s.stride_w != 1 || s.pad_h != 0 ||
      s.pad_w != 0)
    return "algo 6 runs NCHW 1x1 convolutions of stride 1 without padding (channels last and other filters run algo 1)";
  if ((p.p() * p.q()) % 8 != 0)
    return "algo 6 copies and stores 16-byte runs of 8 pixels: H * W = " + std::to_string(p.p() * p.q()) +
           " is not a multiple of 8 (algo 1 reads any size)";
  if (s.c % 8 != 0)
    return "algo 6 copies w's rows in 16-byte chunks: C = " + std::to_string(s.c) +
           " is not a multiple of 8 (algo 1 reads any C)";
  return {};
}

std::string stream_hard_check(const ConvProblem& p, const Config& c, const DeviceInfo& device) {
  if (std::string why = stream_problem_check(p); !why.empty()) return why;
  if (device.cc() < 80)
    return "algo 6 needs mma.sync and cp.async on bfloat16 / float16 (sm_80 or newer); the device is " + device.arch();
  const StreamGeometry g = stream_geometry(p, c);
  if (g.tile_k % g.warps_k != 0 || g.tile_p % g.warps_p != 0 || g.warp_k % 16 != 0 || g.warp_p % 16 != 0)
    return "warp tile " + std::to_string(g.tile_k) + " / " + std::to_string(g.warps_k) + " channels x " +
           std::to_string(g.tile_p) + " / " + std::to_string(g.warps_p) +
           " pixels (tile_n / warps_n x tile_m / warps_m) must be whole multiples of 16 x 16";
  const std::int64_t stages = c.at("stages");
  if (stages < 2 || stages > 4)
    return "stages " + std::to_string(stages) + ": algo 6 keeps a ring of 2 to 4 tiles of x";
  // Tiles more than twice the problem leave most of the block idle.
  if (g.tile_k > 16 && g.tile_k >= 2 * p.shape().k)
    return "tile_n " + std::to_string(g.tile_k) + " is at least twice K = " + std::to_string(p.shape().k);
  if (g.tile_p > 32 && g.tile_p >= 2 * g.pixels)
    return "tile_m " + std::to_string(g.tile_p) + " is at least twice the image's " +
           std::to_string(g.pixels) + " pixels";
  if (g.threads > std::min(512, device.max_threads_per_block))
    return "block of " + std::to_string(g.threads) + " threads (warps_n x warps_m warps); at most 512";
  if (g.accumulators > 128)
    return std::to_string(g.accumulators) + " accumulators a thread (warp tile " + std::to_string(g.warp_k) +
           " x " + std::to_string(g.warp_p) + "); at most 128";
  const std::int64_t cap = register_cap(g.threads, c.at("min_blocks"), device.registers_per_sm);
  if (g.register_estimate > cap)
    return "needs about " + std::to_string(g.register_estimate) + " registers per thread; " +
           std::to_string(c.at("min_blocks")) + " blocks of " + std::to_string(g.threads) +
           " threads per SM allow " + std::to_string(cap);
  if (g.shared_bytes > device.max_shared_per_block_optin)
    return "algo 6 keeps all of w (K x C = " + std::to_string(p.shape().k) + " x " +
           std::to_string(p.shape().c) +
           ") and a ring of x tiles in shared memory: " + std::to_string(g.shared_bytes) +
           " bytes, more than the device's " + std::to_string(device.max_shared_per_block_optin) +
           " per block (algo 1 streams w)";
  if (g.tiles >= (std::int64_t{1} << 31))
    return "algo 6 numbers the batch's " + std::to_string(g.tiles) + " pixel tiles in 32 bits";
  return {};
}

std::string stream_neighbourhood_check(const ConvProblem& p, const Config& c, const DeviceInfo& device) {
  // Measured on the H200 (bench/experiments/conv1x1_stream.py, bench/RESULTS.md 2026-11-28, twentieth session): the
  // fastest shapes had 4 or 8 warps of 32 or 64 channels x 32 or 64 pixels.
  const StreamGeometry g = stream_geometry(p, c);
  const std::int64_t warps = g.warps_k * g.warps_p;
  if (warps != 4 && warps != 8) return std::to_string(warps) + " warps a block (tuned: 4 or 8)";
  if ((g.warp_k != 32 && g.warp_k != 64) || (g.warp_p != 32 && g.warp_p != 64))
    return "warp tile " + std::to_string(g.warp_k) + " x " + std::to_string(g.warp_p) +
           " (tuned: 32 or 64 channels x 32 or 64 pixels)";
  // A second block an SM only where the shared memory holds two.
  if (c.at("min_blocks") == 2 && 2 * (g.shared_bytes + 1024) > device.max_shared_per_sm)
    return "min_blocks 2 where the shared memory holds one block of " + std::to_string(g.shared_bytes) + " bytes";
  return {};
}

bool stream_preferred(const ConvProblem& p, const DeviceInfo& device) {
  // Where the stores outweigh the loads (K >= C): on the H200 the suite's 56x56 expansion C = 64 -> K = 256 ran
  // 1.66x faster than the implicit GEMM's default (22.14 against 36.66 us) and its reduction C = 256 -> K = 64 8%
  // slower (27.65 against 25.51; bench/RESULTS.md 2026-11-28, twentieth session).
  return stream_problem_check(p).empty() && device.cc() >= 80 && p.shape().k >= p.shape().c;
}

Config stream_heuristic(const ConvProblem& p, const DeviceInfo& device) {
  // The H200's fastest shapes (bench/RESULTS.md 2026-11-28, twentieth session): 128 channels x 64 pixels of four
  // 32 x 64 warps, two blocks an SM, for K = 256 over C = 64; 64 x 64 of four 32 x 32 where K is 64 or less.
  const std::int64_t k = p.shape().k;
  const std::int64_t tn = k > 64 ? 128 : k > 32 ? 64 : 32;
  Config c = complete_config({{"algo", 6},
                              {"tile_n", tn},
                              {"tile_m", 64},
                              {"warps_n", tn / 32},
                              {"warps_m", tn == 128 ? 1 : 2},
                              {"stages", 2},
                              {"min_blocks", 2}});
  if (!stream_neighbourhood_check(p, c, device).empty()) c.set("min_blocks", 1);
  return c;  // where w and the ring do not fit the shared memory, the caller takes algo 1
}

Config stream_fallback(const ConvProblem& p, const DeviceInfo& device) {
  // The implicit GEMM through registers (it reads any alignment): its default's tiles on mma.sync, else the first
  // legal warp grid (every problem algo 6 takes has one: host test).
  Config c = igemm_heuristic(p, device);
  c.set("mma", 0), c.set("stages", 0), c.set("persist", 0), c.set("repack", 0), c.set("split_k", 1);
  if (igemm_hard_check(p, c, device).empty()) return c;
  for (std::int64_t tm : {128, 64, 32})
    for (std::int64_t tn : {64, 32, 16})
      for (std::int64_t wm : {2, 4, 1})
        for (std::int64_t wn : {2, 1}) {
          c.set("tile_m", tm), c.set("tile_n", tn), c.set("warps_m", wm), c.set("warps_n", wn);
          c.set("min_blocks", 1);
          if (igemm_hard_check(p, c, device).empty()) return c;
        }
  return c;
}

KernelSource stream_source(const ConvProblem& p, const Config& config) {
  const auto& s = p.shape();
  std::string name = "jitune::conv::conv2d_1x1_stream<" + std::string(dtype_cuda_type(p.dtype()));
  for (std::int64_t v : {s.c, s.k, config.at("tile_n"), config.at("tile_m"), config.at("warps_n"), config.at("warps_m"),
                         config.at("stages"), config.at("min_blocks"), std::int64_t{s.bias ? 1 : 0}})
    name += ", " + std::to_string(v);
  name += ">";
  return program(p, std::move(name), kStreamTemplate);
}

LaunchShape stream_launch_shape(const ConvProblem& p, const Config& config, const DeviceInfo& device) {
  const StreamGeometry g = stream_geometry(p, config);
  // Persistent blocks: min_blocks an SM where the shared memory holds them, never more than the tiles.
  const std::int64_t by_shared = device.max_shared_per_sm / (g.shared_bytes + 1024);
  const std::int64_t resident = std::clamp<std::int64_t>(std::min(config.at("min_blocks"), by_shared), 1, 2);
  LaunchShape shape;
  shape.grid.x = static_cast<unsigned>(std::max<std::int64_t>(1, std::min(g.tiles, resident * std::max(1, device.sm_count))));
  shape.block.x = static_cast<unsigned>(g.threads);
  shape.shared_bytes = static_cast<unsigned>(g.shared_bytes);
  return shape;
}

}  // namespace jitune::templates::conv2d::detail
