// Conv2d config legality: the heuristic default, the kernel's hard limits and the tuned neighbourhood.
#include <algorithm>
#include <initializer_list>

#include "templates/conv2d/conv2d_detail.hpp"

namespace jitune::templates::conv2d {
namespace {

constexpr std::int64_t kMaxUnrolledFmas = 4096;  // per input channel and thread: instruction-cache budget
using detail::kMaxRegisters;
constexpr std::int64_t kMaxPrefetch = 24;  // double buffering: loads held in registers per thread

std::int64_t largest_divisor(std::int64_t n, std::initializer_list<std::int64_t> options) {
  for (std::int64_t v : options)
    if (n % v == 0) return v;
  return 1;
}

// No register cap (the compiler's choice) unless the block is too large for 255 registers a thread.
std::int64_t default_cap(const ConvProblem& p, const Config& c, const DeviceInfo& device) {
  return tile_geometry(p, c).threads * kMaxRegisters <= device.registers_per_block ? kMaxRegisters : 128;
}

// The default before any fallback: 128 threads (8 x 16) of 1 x 4 pixels x up to 8 output channels, stages
// of up to 4 input channels, double buffered, the widest aligned loads; the tile shrinks towards small
// outputs.
Config base_config(const ConvProblem& p, const DeviceInfo& device) {
  const auto& s = p.shape();
  const std::int64_t es = static_cast<std::int64_t>(dtype_size(p.dtype()));
  std::int64_t load = 1;
  for (std::int64_t v : {8, 4, 2})
    if (v * es <= 16 && s.w % v == 0) {
      load = v;
      break;
    }
  std::int64_t out_w = 4, block_w = 16, block_h = 8;
  while (out_w > 1 && block_w * out_w >= 2 * p.q()) out_w /= 2;
  while (block_w > 8 && block_w * out_w >= 2 * p.q()) block_w /= 2;
  while (block_h > 1 && block_h >= 2 * p.p()) block_h /= 2;
  while (block_h * block_w < 32) block_h *= 2;
  const std::int64_t c_stage = largest_divisor(s.c, {4, 3, 2});
  Config c{{"algo", 0},
           {"out_h", 1},
           {"out_w", out_w},
           {"block_h", block_h},
           {"block_w", block_w},
           {"k_block", largest_divisor(s.k, {8, 6, 4, 3, 2})},
           {"c_stage", c_stage},
           {"load", load},
           {"double_buffer", s.c / c_stage >= 2 ? 1 : 0}};
  c.set("max_regs", default_cap(p, c, device));
  return detail::complete_config(c);
}

// What the kernel cannot run, or cannot run well enough to be worth timing anywhere.
std::string hard_check(const ConvProblem& p, const Config& config, const DeviceInfo& device) {
  const auto& s = p.shape();
  if (s.layout != ImageLayout::kNCHW)
    return "the direct kernel (algo 0) reads NCHW; channels last runs on the implicit GEMM (algo 1: float16 or "
           "bfloat16 on sm_80+) or Winograd (algo 3: float32 3x3 filters of stride 1 and dilation 1)";
  const std::int64_t es = static_cast<std::int64_t>(dtype_size(p.dtype()));
  const std::int64_t load = config.at("load"), k_block = config.at("k_block"), c_stage = config.at("c_stage");
  if (load * es > 16)
    return "load " + std::to_string(load) + " moves " + std::to_string(load * es) +
           " bytes per access; the widest vector access is 16 bytes";
  if (load > 1 && s.w % load != 0)
    return "load " + std::to_string(load) + " needs input rows of a multiple of " + std::to_string(load) +
           " elements (W = " + std::to_string(s.w) + "): most rows would not be aligned";
  if (s.k % k_block != 0)
    return "k_block " + std::to_string(k_block) + " does not divide K = " + std::to_string(s.k);
  if (s.c % c_stage != 0)
    return "c_stage " + std::to_string(c_stage) + " does not divide C = " + std::to_string(s.c);
  if (config.at("double_buffer") != 0 && s.c / c_stage < 2)
    return "double buffering needs at least two stages (C / c_stage = " + std::to_string(s.c / c_stage) + ")";
  const TileGeometry g = tile_geometry(p, config);
  if (g.threads < 32 || g.threads > std::min(512, device.max_threads_per_block))
    return "block of " + std::to_string(g.threads) + " threads; allowed 32 to " +
           std::to_string(std::min(512, device.max_threads_per_block));
  // A tile twice the output or more leaves half the block idle (32-thread blocks always pass).
  if (g.threads > 32 && config.at("block_h") > 1 && g.tile_h >= 2 * p.p())
    return "tile height " + std::to_string(g.tile_h) + " is at least twice the output height " +
           std::to_string(p.p()) + ": more than half of the block would idle";
  if (g.threads > 32 && (config.at("block_w") > 8 || config.at("out_w") > 1) && g.tile_w >= 2 * p.q())
    return "tile width " + std::to_string(g.tile_w) + " is at least twice the output width " +
           std::to_string(p.q()) + ": more than half of the block would idle";
  const std::int64_t fmas = config.at("out_h") * config.at("out_w") * k_block * s.r * s.s;
  if (fmas > kMaxUnrolledFmas)
    return "unrolled body of " + std::to_string(fmas) + " FMAs per input channel exceeds " +
           std::to_string(kMaxUnrolledFmas) + " (instruction cache)";
  if (g.shared_bytes > device.max_shared_per_block_optin)
    return "needs " + std::to_string(g.shared_bytes) + " bytes of shared memory; the device allows " +
           std::to_string(device.max_shared_per_block_optin) + " per block";
  if (config.at("double_buffer") != 0 && g.in_per_thread + g.w_per_thread > kMaxPrefetch)
    return "double buffering would hold " + std::to_string(g.in_per_thread + g.w_per_thread) +
           " prefetched loads per thread (at most " + std::to_string(kMaxPrefetch) + ")";
  const std::int64_t max_regs = config.at("max_regs");
  if (g.register_estimate > max_regs)
    return "needs about " + std::to_string(g.register_estimate) +
           " registers per thread (accumulators, operands" +
           (config.at("double_buffer") ? ", prefetch" : "") + "); the cap is " + std::to_string(max_regs);
  if (max_regs * g.threads > device.registers_per_block)
    return "a block of " + std::to_string(g.threads) + " threads cannot hold " + std::to_string(max_regs) +
           " registers each; the device has " + std::to_string(device.registers_per_block) + " per block";
  return {};
}

// Keeps tuning tractable (the kernel is recompiled per candidate, about a second of NVRTC each): candidates
// vary each knob around the default `base` by one step. Per-thread work: k_block the default's or twice it,
// accumulators (out_h * out_w * k_block) half, equal or twice the default's, rows no taller than wide;
// block: the default's shape, half as tall and twice as wide, or twice as tall; stages: one channel double
// buffered or the default's stage with and without double buffering; register caps that change the blocks
// per SM; the widest load the rows allow.
std::string neighbourhood_check(const Config& c, const Config& base, const DeviceInfo& device) {
  auto tail = [] { return std::string(" (outside the tuned neighbourhood of the default config)"); };
  if (c.at("load") != base.at("load"))
    return "load " + std::to_string(c.at("load")) + ": the rows allow load " +
           std::to_string(base.at("load")) + ", and narrower loads only add instructions";
  const std::int64_t kb = c.at("k_block"), kb0 = base.at("k_block");
  if (kb != kb0 && kb != 2 * kb0)
    return "k_block " + std::to_string(kb) + " is neither " + std::to_string(kb0) + " nor twice it" + tail();
  const std::int64_t acc = c.at("out_h") * c.at("out_w") * kb, acc0 = base.at("out_w") * kb0;
  if (!(acc == acc0 || acc == 2 * acc0 || (acc * 2 == acc0 && kb == kb0)))
    return std::to_string(acc) + " accumulators per thread; tuned: " + std::to_string(acc0) +
           " or twice that (or " + "half with k_block " + std::to_string(kb0) + ")" + tail();
  if (c.at("out_h") > c.at("out_w"))
    return "out_h " + std::to_string(c.at("out_h")) + " > out_w " + std::to_string(c.at("out_w")) + tail();
  const std::int64_t bh = c.at("block_h"), bw = c.at("block_w"), bh0 = base.at("block_h"),
                     bw0 = base.at("block_w");
  if (!((bh == bh0 && bw == bw0) || (2 * bh == bh0 && bw == 2 * bw0) || (bh == 2 * bh0 && bw == bw0)))
    return "block " + std::to_string(bh) + " x " + std::to_string(bw) + tail();
  const std::int64_t cs = c.at("c_stage"), cs0 = base.at("c_stage"), db = c.at("double_buffer");
  if (!((cs == cs0) || (cs == 1 && db == 1)))
    return "c_stage " + std::to_string(cs) + " with double_buffer " + std::to_string(db) + tail();
  // Register caps: only those that fit more blocks per SM than the next larger cap.
  const std::int64_t threads = bh * bw, cap = c.at("max_regs");
  auto blocks = [&](std::int64_t r) {
    return device.registers_per_sm / std::max<std::int64_t>(1, r * threads);
  };
  for (std::int64_t larger : {168, 255})
    if (larger > cap && larger * threads <= device.registers_per_block && blocks(larger) >= blocks(cap))
      return "max_regs " + std::to_string(cap) + " fits no more blocks per SM than max_regs " +
             std::to_string(larger);
  return {};
}

}  // namespace

namespace detail {

Config heuristic(const ConvProblem& p, const DeviceInfo& device) {
  const auto& s = p.shape();
  if (stream_preferred(p, device)) {
    const Config st = stream_heuristic(p, device);
    if (stream_hard_check(p, st, device).empty()) return st;
  }
  if (tcd_preferred(p, device)) {
    const Config tc = tcd_heuristic(p, device);
    if (tcd_hard_check(p, tc, device).empty()) return tc;
  }
  if (igemm_preferred(p, device)) {
    const Config tc = igemm_heuristic(p, device);
    if (igemm_hard_check(p, tc, device).empty()) return tc;
  }
  if (wino_preferred(p, device)) {
    const Config w = wino_heuristic(p, device);
    if (wino_hard_check(p, w, device).empty()) return w;
  }
  Config c = base_config(p, device);
  if (hard_check(p, c, device).empty()) return c;
  // Large filters / dilations: fewer registers, then less shared memory, until the hard rules pass.
  const std::vector<std::pair<const char*, std::int64_t>> steps = {
      {"double_buffer", 0},
      {"c_stage", 1},
      {"k_block", largest_divisor(s.k, {4, 3, 2})},
      {"out_w", 2},
      {"k_block", largest_divisor(s.k, {2})},
      {"out_w", 1},
      {"k_block", 1},
      {"block", 0}};
  for (const auto& [name, value] : steps) {
    if (std::string_view(name) == "block") {
      c.set("block_h", 4);
      c.set("block_w", 8);
    } else {
      c.set(name, std::min(c.at(name), value));
    }
    c.set("max_regs", default_cap(p, c, device));
    if (hard_check(p, c, device).empty()) return c;
  }
  return c;  // the smallest tile; when even that is illegal, check() says why (the op reports it)
}

std::string check(const ConvProblem& p, const Config& config, const DeviceInfo& device) {
  if (config.at("algo") == 1) {
    std::string why = igemm_hard_check(p, config, device);
    return why.empty() ? igemm_neighbourhood_check(p, config, device) : why;
  }
  if (config.at("algo") == 2) {
    std::string why = tcd_hard_check(p, config, device);
    return why.empty() ? tcd_neighbourhood_check(p, config, device) : why;
  }
  if (config.at("algo") == 6) {
    std::string why = stream_hard_check(p, config, device);
    return why.empty() ? stream_neighbourhood_check(p, config, device) : why;
  }
  if (config.at("algo") >= 3) {
    std::string why = wino_hard_check(p, config, device);
    return why.empty() ? wino_neighbourhood_check(p, config, device) : why;
  }
  std::string why = hard_check(p, config, device);
  if (!why.empty()) return why;
  // The tuned neighbourhood of the default: only where the default itself is legal (ordinary problems).
  const Config base = base_config(p, device);
  if (!hard_check(p, base, device).empty()) return {};
  return neighbourhood_check(config, base, device);
}

}  // namespace detail

std::string kernel_limits(const ConvProblem& problem, const Config& config, const DeviceInfo& device) {
  if (config.at("algo") == 1) return detail::igemm_hard_check(problem, config, device);
  if (config.at("algo") == 2) return detail::tcd_hard_check(problem, config, device);
  if (config.at("algo") == 6) return detail::stream_hard_check(problem, config, device);
  if (config.at("algo") >= 3) return detail::wino_hard_check(problem, config, device);
  return hard_check(problem, config, device);
}

}  // namespace jitune::templates::conv2d
