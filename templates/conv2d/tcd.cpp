// The conv2d tensor-core direct variant (algo 2, tcd.cuh) on the host: geometry, legality, default and launch.
#include <algorithm>

#include "templates/conv2d/conv2d_detail.hpp"

namespace jitune::templates::conv2d::detail {
namespace {

// Filter fragments a thread keeps for the whole block: more would crowd out the accumulators and A fragments
// (C * R * S of about 288 for 16 channels a block, 576 for 8).
constexpr std::int64_t kMaxFilterRegisters = 72;

// Output channels a block by default: K rounded up to 8, 16, 32 or 64, halved while the filter fragments would
// exceed their registers.
std::int64_t default_n_block(const ConvProblem& p) {
  const auto& s = p.shape();
  const std::int64_t k8 = ceil_div(s.k, 8) * 8, steps = ceil_div(s.r * s.s * ceil_div(s.c, 8), 2);
  std::int64_t nb = k8 <= 8 ? 8 : k8 <= 16 ? 16 : k8 <= 32 ? 32 : 64;
  while (nb > 8 && steps * (nb / 8) * 2 > kMaxFilterRegisters) nb /= 2;
  return nb;
}

}  // namespace

TcdGeometry tcd_geometry(const ConvProblem& p, const Config& c) {
  const auto& s = p.shape();
  const std::int64_t rows = c.at("rows"), cols = c.at("cols"), nb = c.at("n_block");
  TcdGeometry g;
  g.threads = static_cast<int>(32 * c.at("warps"));
  g.chunks = ceil_div(s.c, 8);
  g.pitch = g.chunks | 1;
  g.halo_h = (rows - 1) * s.stride_h + (s.r - 1) * s.dilation_h + 1;
  g.halo_w = (cols - 1) * s.stride_w + (s.s - 1) * s.dilation_w + 1;
  g.steps = ceil_div(s.r * s.s * g.chunks, 2);
  g.groups = rows * cols / 16;
  // NCHW's staged tile starts at the halo's first column rounded down to 8; one extra chunk every 8 columns.
  const std::int64_t staged_w = s.layout == ImageLayout::kNHWC ? g.halo_w : (g.halo_w + 14) / 8 * 8;
  const std::int64_t row_chunks = staged_w * g.pitch + ceil_div(staged_w, 8);
  const std::int64_t halo_bytes = g.halo_h * row_chunks * 16 + 16;
  const std::int64_t raw_bytes = s.layout == ImageLayout::kNHWC ? 0 : s.c * g.halo_h * staged_w * 2;
  const std::int64_t weight_bytes = g.steps * nb * 24 * 2;
  g.shared_bytes = halo_bytes + raw_bytes + weight_bytes;
  g.filter_registers = g.steps * (nb / 8) * 2;
  const std::int64_t accumulators = c.at("m_tiles") * (nb / 8) * 4;
  // Filter fragments, accumulators, one A fragment per m-tile, pixel bases and indexing (NCHW: the transpose's
  // 8 x 8 channels and pixels besides the filters).
  g.register_estimate = g.filter_registers + std::max<std::int64_t>(accumulators + 5 * c.at("m_tiles"),
                                                                    s.layout == ImageLayout::kNHWC ? 0 : 32) + 32;
  g.tiles_x = ceil_div(p.q(), cols);
  g.tiles_y = ceil_div(p.p(), rows);
  g.tiles = g.tiles_x * g.tiles_y * s.n;
  g.grid_n = ceil_div(s.k, nb);
  return g;
}

std::string tcd_hard_check(const ConvProblem& p, const Config& c, const DeviceInfo& device) {
  const auto& s = p.shape();
  if (p.dtype() != DType::kFloat16 && p.dtype() != DType::kBFloat16)
    return "algo 2 (direct on tensor cores) takes float16 or bfloat16; " + std::string(dtype_name(p.dtype())) +
           " runs the direct kernel (algo 0)";
  if (device.cc() < 80)
    return "algo 2 needs mma.sync on bfloat16 / float16 (sm_80 or newer); the device is " + device.arch();
  const TcdGeometry g = tcd_geometry(p, c);
  const std::int64_t nb = c.at("n_block"), warps = c.at("warps"), mt = c.at("m_tiles");
  if (nb != 8 && nb % 16 != 0) return "n_block " + std::to_string(nb) + " is neither 8 nor a multiple of 16";
  if (g.groups * 16 != c.at("rows") * c.at("cols") || g.groups % (warps * mt) != 0)
    return "rows x cols = " + std::to_string(c.at("rows") * c.at("cols")) +
           " pixels do not split into 16-pixel groups evenly over warps x m_tiles = " +
           std::to_string(warps * mt);
  if (g.filter_registers > kMaxFilterRegisters)
    return "C * R * S = " + std::to_string(s.c * s.r * s.s) + " for " + std::to_string(nb) +
           " channels a block keeps " + std::to_string(g.filter_registers) +
           " filter registers per thread; algo 2 allows " + std::to_string(kMaxFilterRegisters) +
           " (longer reductions run the implicit GEMM, algo 1)";
  if (g.register_estimate > kMaxRegisters)
    return "needs about " + std::to_string(g.register_estimate) + " registers per thread; at most " +
           std::to_string(kMaxRegisters);
  if (g.shared_bytes > device.max_shared_per_block_optin)
    return "needs " + std::to_string(g.shared_bytes) +
           " bytes of shared memory (the input tile with its halo, " + "the filters" +
           (s.layout == ImageLayout::kNHWC ? "" : ", the raw input rows") + "); the device allows " +
           std::to_string(device.max_shared_per_block_optin) + " per block";
  // One image's offsets in the halo fill and the output are 64-bit; the tile and block indices are 32-bit.
  if (g.tiles >= (std::int64_t{1} << 30))
    return "algo 2 numbers the " + std::to_string(g.tiles) + " output tiles of the batch in 32 bits";
  if (s.h + 2 * s.pad_h >= (std::int64_t{1} << 29) || s.w + 2 * s.pad_w >= (std::int64_t{1} << 29))
    return "algo 2 indexes the padded image rows and columns (H = " + std::to_string(s.h) +
           ", W = " + std::to_string(s.w) + ") in 32 bits";
  // Tiles more than twice the problem leave most of the block idle.
  if (c.at("cols") > 16 && c.at("cols") >= 2 * p.q())
    return "cols " + std::to_string(c.at("cols")) + " is at least twice the output width " +
           std::to_string(p.q());
  if (c.at("rows") > 1 && c.at("rows") >= 2 * p.p())
    return "rows " + std::to_string(c.at("rows")) + " is at least twice the output height " +
           std::to_string(p.p());
  if (nb > 8 && nb >= 2 * s.k)
    return "n_block " + std::to_string(nb) + " is at least twice K = " + std::to_string(s.k);
  return {};
}

std::string tcd_neighbourhood_check(const ConvProblem& p, const Config& c, const DeviceInfo&) {
  // Blocks of 128 to 1024 output pixels (fewer leave the filter staging unamortised, more cap the blocks per SM).
  const std::int64_t pixels = c.at("rows") * c.at("cols");
  if (pixels < 128 || pixels > 1024)
    return std::to_string(pixels) + " output pixels a block (tuned: 128 to 1024)";
  // As many channels of K a block as the filter registers allow (the halo is staged once per block), or half
  // that from 32 up.
  const std::int64_t nb = c.at("n_block"), want = default_n_block(p);
  if (nb != want && !(want >= 32 && nb == want / 2))
    return "n_block " + std::to_string(nb) + " for K = " + std::to_string(p.shape().k) + " (tuned: " +
           std::to_string(want) + (want >= 32 ? " or " + std::to_string(want / 2) : "") + ")";
  return {};
}

bool tcd_preferred(const ConvProblem& p, const DeviceInfo& device) {
  const auto& s = p.shape();
  // Measured on the H100 (bench/RESULTS.md, 2026-11-26): C = 16, 6 and 4 ran 1.10-2.3x faster than the direct
  // kernel; C = 3 (five of eight staged channels padding) 0.89x; a 1x1 over C = 256 (short, but 32 chunks a
  // pixel) 3.4x slower than the implicit GEMM.
  return (p.dtype() == DType::kFloat16 || p.dtype() == DType::kBFloat16) && device.cc() >= 80 && s.c >= 4 &&
         s.c <= 32 && s.c * s.r * s.s <= 288;
}

Config tcd_heuristic(const ConvProblem& p, const DeviceInfo& device) {
  // 512 output pixels a block, 64 columns by 8 rows where the output allows; then (large strides, dilations or
  // channel counts: the halo tile and the raw rows must fit the shared memory) 256 and 128 pixels, narrower
  // tiles first.
  Config c = complete_config({{"algo", 2}, {"n_block", default_n_block(p)}, {"warps", 4}, {"m_tiles", 2}});
  Config first;
  for (std::int64_t pixels : {512, 256, 128})
    for (std::int64_t cols : {64, 32, 128, 16}) {
      const std::int64_t rows = pixels / cols;
      if (rows > 32 || (cols > 16 && cols >= 2 * p.q()) || (rows > 1 && rows >= 2 * p.p())) continue;
      c.set("rows", rows);
      c.set("cols", cols);
      if (first.values().empty()) first = c;
      if (tcd_hard_check(p, c, device).empty()) return c;
    }
  return first.values().empty() ? c : first;  // none fits: the caller takes another algorithm
}

KernelSource tcd_source(const ConvProblem& p, const Config& config) {
  const auto& s = p.shape();
  std::string name = "jitune::conv::conv2d_tcd<" + std::string(dtype_cuda_type(p.dtype()));
  for (std::int64_t v : {std::int64_t{s.layout == ImageLayout::kNHWC ? 1 : 0}, s.c, s.k, s.r, s.s, s.stride_h,
                         s.stride_w, s.dilation_h, s.dilation_w, config.at("rows"), config.at("cols"),
                         config.at("n_block"), config.at("warps"), config.at("m_tiles"),
                         std::int64_t{s.bias ? 1 : 0}})
    name += ", " + std::to_string(v);
  name += ">";
  return program(p, std::move(name));
}

LaunchShape tcd_launch_shape(const ConvProblem& p, const Config& config, const DeviceInfo& device) {
  const TcdGeometry g = tcd_geometry(p, config);
  // Persistent blocks: as many as fit the SMs at once (by threads, shared memory and the register estimate),
  // each looping over tiles, never more than the tiles. The estimate can exceed what the compiled kernel's
  // registers allow; the blocks beyond then start as others finish (the same tiles, one more filter staging).
  const std::int64_t by_threads = device.max_threads_per_sm / g.threads;
  const std::int64_t by_shared = device.max_shared_per_sm / (g.shared_bytes + 1024);
  const std::int64_t by_registers = device.registers_per_sm / (g.threads * std::max<std::int64_t>(64, g.register_estimate));
  const std::int64_t resident = std::max<std::int64_t>(1, std::min({by_threads, by_shared, by_registers}));
  LaunchShape shape;
  shape.grid.x = static_cast<unsigned>(std::min(g.tiles, resident * std::max(1, device.sm_count)));
  shape.grid.y = static_cast<unsigned>(g.grid_n);
  shape.grid.z = 1;
  shape.block.x = static_cast<unsigned>(g.threads);
  shape.shared_bytes = static_cast<unsigned>(g.shared_bytes);
  return shape;
}

}  // namespace jitune::templates::conv2d::detail
