// Private to the conv2d family: what its files share and its family object delegates to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "templates/conv2d/conv2d.hpp"

namespace jitune::templates::conv2d::detail {

/// The template of algo 4 (Winograd F(4x4, 3x3)): its configs' programs include it instead of conv2d.cuh, so its
/// records carry its own template hash (Family::template_of).
inline constexpr std::string_view kWinograd4Template = "conv2d/winograd4.cuh";
/// The template of algo 5 (Winograd F(4x4, 3x3) as batched GEMMs in one cooperative launch), likewise.
inline constexpr std::string_view kWinogradGemmTemplate = "conv2d/winograd4_gemm.cuh";
/// The template of algo 6 (the NCHW 1x1 streaming GEMM), likewise.
inline constexpr std::string_view kStreamTemplate = "conv2d/conv1x1.cuh";
/// The template of algo 1's repack 2 (NCHW copied to channels last by a ring of cp.async tiles), likewise.
inline constexpr std::string_view kRepackTemplate = "conv2d/igemm_repack.cuh";
/// The template of algo 1's repack 3 (the repacking as a call of up to three launches), likewise.
inline constexpr std::string_view kLaunchesTemplate = "conv2d/igemm_launches.cuh";
/// Registers a thread can hold; the kernels' register estimates are checked against it.
inline constexpr std::int64_t kMaxRegisters = 255;
/// The largest workspace repack 1 or 2 may ask for (its copies of x and w): 4 GiB.
inline constexpr std::size_t kMaxRepackWorkspace = std::size_t{1} << 32;
inline constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}
inline constexpr std::int64_t round_up(std::int64_t a, std::int64_t b) {
  return ceil_div(a, b) * b;
}
/// Workspace regions start on 256 bytes.
inline constexpr std::size_t align256(std::size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// problem.cpp
/// The problem of the options dtype, n, c, h, w, k, r, s, stride, padding, dilation, bias
/// (Family::make_problem).
std::unique_ptr<Problem> make_problem(const std::map<std::string, std::string>& options);
/// The problem of a public call's values: dtype, input and weight shapes, stride, padding, dilation, bias
/// (Family::problem_from_call).
std::unique_ptr<Problem> problem_from_call(const CallArgs& args);

// checks.cpp
/// The default config, shrunk until the kernel's hard limits pass (Family::heuristic).
Config heuristic(const ConvProblem& p, const DeviceInfo& device);
/// The kernel's hard limits, then the tuned neighbourhood of the default (Family::check).
std::string check(const ConvProblem& p, const Config& config, const DeviceInfo& device);

// launch.cpp
/// The epilogue's functor, `struct jitune_conv_epilogue` (conv2d.cuh's NoEpilogue shape) over the elementwise
/// expression engine's functor of p.epilogue(); empty without an epilogue.
std::string epilogue_source(const ConvProblem& p);
/// The program of a kernel's name expression: its entry template (conv2d.cuh, or algo 4's) and, with an epilogue,
/// epilogue_source as the kernel's last template argument.
KernelSource program(const ConvProblem& p, std::string name, std::string_view entry = "conv2d/conv2d.cuh");
/// The kernel's name expression (Family::source).
KernelSource source(const ConvProblem& p, const Config& config);
/// One block per output tile and k_block channels, grid z over the batch; algo 2: persistent blocks
/// (Family::launch_shape).
LaunchShape launch_shape(const ConvProblem& p, const Config& config, const DeviceInfo& device);

// reference.cpp
/// Random x, w and bias, never zero (Family::workload).
Workload workload(const ConvProblem& p, std::uint64_t seed);
/// The convolution summed in double, either layout (Family::reference).
std::vector<std::vector<std::byte>> reference(const ConvProblem& p, const Workload& work);

// igemm.cpp: the implicit-GEMM variant (algo 1)
/// `config` with every space parameter present, inactive ones at their first value.
Config complete_config(Config config);
/// igemm.cuh's block shape and shared memory for a config, with the register estimate the limits use.
struct IgemmGeometry {
  int threads = 0, warp_m = 0, warp_n = 0, accumulators = 0, register_estimate = 0;
  std::int64_t m_total = 0, shared_bytes = 0, grid_m = 0, grid_n = 0;
  std::int64_t k_tiles = 0, per_split = 0;  ///< Stages of tile_k over C * R * S; stages per split_k block.
};
IgemmGeometry igemm_geometry(const ConvProblem& p, const Config& config);
/// Why an NCHW x cannot feed the cp.async pipeline in place (its A operand as runs of consecutive pixels of one
/// channel: a 1x1 filter, stride 1, no padding, H * W even), empty if it can.
std::string pixel_runs_check(const ConvProblem& p);
/// igemm_repack.cuh's RepackPlan for one batched transpose [B][C][L] -> [B][L][C] in ring stages of `capacity`
/// elements of 16 / v bytes: channels and positions a tile (kc 0: neither whole rows nor 64-position segments fit).
struct RepackPlan {
  std::int64_t kc = 0, kl = 0;
  bool flat = true;
};
RepackPlan repack_plan(std::int64_t c, std::int64_t l, std::int64_t capacity, std::int64_t v);
/// Why repack 2's (config's `repack`) plan fits neither form for x or w, or repack 2's or 3's unstaging
/// cannot take y (repack 1 copies any shape), empty if it fits.
std::string repack2_check(const ConvProblem& p, const Config& config);
/// Whether repack 2 stages y channels last in the workspace and unstages it to NCHW (P * Q not a multiple of the
/// 16-byte chunk, where igemm.cuh's NCHW epilogue stores element by element).
bool repack2_stages_y(const ConvProblem& p);
/// Elements of one of repack 2's ring stages (igemm_repack.cuh's kCapacity).
std::int64_t repack_capacity(const ConvProblem& p, const Config& config);
/// Whether the default (and the only implicit GEMM of the tuned neighbourhood) reads x as pixel runs on wgmma: sm_90,
/// float16 / bfloat16, pixel_runs_check passes, C a multiple of 8 and at least 64, K and N * P * Q above 32.
bool pixel_runs_default(const ConvProblem& p, const DeviceInfo& device);
/// What the implicit-GEMM kernel cannot run (dtype, architecture, 32-bit indexing, warp tiles, threads,
/// registers, shared memory, tiles mostly idle), empty if it can.
std::string igemm_hard_check(const ConvProblem& p, const Config& config, const DeviceInfo& device);
/// The implicit-GEMM configs worth timing: warp tiles of 32-64 x 16-32, at most 8 warps, min_blocks 2 only
/// where it lowers the register cap, tile_k 16 only for short reductions.
std::string igemm_neighbourhood_check(const ConvProblem& p, const Config& config, const DeviceInfo& device);
/// Whether the untuned default runs on tensor cores (float16 / bfloat16 on sm_80+: channels last always, NCHW
/// where C * R * S >= 256 and K >= 32).
bool igemm_preferred(const ConvProblem& p, const DeviceInfo& device);
/// The implicit-GEMM default: the H100's usual picks by K and the number of output pixels.
Config igemm_heuristic(const ConvProblem& p, const DeviceInfo& device);
KernelSource igemm_source(const ConvProblem& p, const Config& config);
/// The split-K workspace (algo 1 with split_k > 1): arrival counters, then the partial tiles; nothing otherwise.
LaunchPrep igemm_prep(const ConvProblem& p, const Config& config);
LaunchShape igemm_launch_shape(const ConvProblem& p, const Config& config, const DeviceInfo& device);
/// Byte offsets in a repacking config's workspace (igemm_prep): the split-K part after the 256-byte header,
/// x's copy {N,H,W,C}, w's {K,R,S,C}, and y staged {N,P,Q,K} (repack 2 and 3 where repack2_stages_y; else y
/// == the end).
struct RepackOffsets {
  std::size_t split = 0, x = 0, w = 0, y = 0, end = 0;
};
RepackOffsets repack_offsets(const ConvProblem& p, const Config& config);
/// Blocks of repack 3's copy (igemm_launches.cuh: a tile per block, x's then w's) and of its unstaging.
std::int64_t repack3_tiles(const ConvProblem& p);
std::int64_t repack3_unstage_tiles(const ConvProblem& p);
/// repack 3's steps: the copy of x and w before the GEMM, the unstaging of y after it where y is staged.
std::vector<StepKernel> igemm_steps(const ConvProblem& p, const Config& config, const DeviceInfo& device);
/// Lays out the kernels' Args<T> alone (push_args without the workspace).
void push_call_args(const ConvProblem& p, const Config& config, const void* x, const void* w,
                    const void* bias, void* y, const void* residual, KernelArgs& args);
/// Parameters of repack 3's step `index` (igemm_steps order) and of its main kernel after push_args' (the
/// copies' addresses).
void igemm_step_args(const ConvProblem& p, const Config& config, std::size_t index, const Bindings& b,
                     KernelArgs& args);
void igemm_main_extra_args(const ConvProblem& p, const Config& config, void* workspace, KernelArgs& args);

// tcd.cpp: the tensor-core direct variant (algo 2)
/// tcd.cuh's block shape, halo tile and shared memory for a config, with the register estimate the limits use.
struct TcdGeometry {
  int threads = 0;
  std::int64_t chunks = 0, pitch = 0;   ///< 16-byte chunks of a pixel's channels; chunks per staged pixel (odd).
  std::int64_t halo_h = 0, halo_w = 0;  ///< The staged input tile with its halo.
  std::int64_t steps = 0, groups = 0;   ///< k16 steps of the reduction; 16-pixel groups of the block.
  std::int64_t shared_bytes = 0, filter_registers = 0, register_estimate = 0;
  std::int64_t tiles_x = 0, tiles_y = 0, tiles = 0, grid_n = 0;  ///< tiles: of the whole batch.
};
TcdGeometry tcd_geometry(const ConvProblem& p, const Config& config);
/// What the tensor-core direct kernel cannot run (dtype, architecture, filter registers, shared memory, 32-bit
/// tile numbering, tiles mostly idle), empty if it can.
std::string tcd_hard_check(const ConvProblem& p, const Config& config, const DeviceInfo& device);
/// The configs worth timing: 128 to 1024 pixels a block, every channel of K in one block up to 64.
std::string tcd_neighbourhood_check(const ConvProblem& p, const Config& config, const DeviceInfo& device);
/// Whether the untuned default runs the tensor-core direct kernel: float16 / bfloat16 on sm_80+, 4 <= C <= 32
/// and C * R * S <= 288 (its default must also pass the kernel's limits).
bool tcd_preferred(const ConvProblem& p, const DeviceInfo& device);
/// The tensor-core direct default: 512-pixel tiles shaped by the output, K in one block up to 64.
Config tcd_heuristic(const ConvProblem& p, const DeviceInfo& device);
KernelSource tcd_source(const ConvProblem& p, const Config& config);
LaunchShape tcd_launch_shape(const ConvProblem& p, const Config& config, const DeviceInfo& device);

// winograd.cpp: Winograd F(2x2, 3x3) (algo 3) and F(4x4, 3x3) (algo 4) in float32
/// winograd.cuh's (algo 3) or winograd4.cuh's (algo 4) block shape and shared memory for a config, with the
/// register estimate the limits use.
struct WinoGeometry {
  std::int64_t m = 0, points = 0;            ///< Output tile m x m; transform positions (m + 2)^2.
  std::int64_t threads = 0, tk = 0, tt = 0;  ///< Threads a block; along K and along tiles for each position.
  std::int64_t group = 0;                    ///< Accumulator rows a thread stages per output pass.
  std::int64_t shared_bytes = 0, in_per_thread = 0, w_per_thread = 0, prefetch = 0, register_estimate = 0;
  std::int64_t tiles = 0, grid_x = 0, grid_y = 0;  ///< tiles: m x m output tiles of the batch.
  bool prefetch_stage = true;  ///< The next stage's loads held in registers during the products (F(4x4): if they fit).
};
WinoGeometry wino_geometry(const ConvProblem& p, const Config& config);
/// Registers a thread may hold with `blocks` blocks of `threads` an SM: the register file is four partitions, each
/// holding the warps its scheduler runs (9 warps put 3 on one: 168 registers, where 8 warps may take 255), in units
/// of 8 registers a thread.
std::int64_t register_cap(std::int64_t threads, std::int64_t blocks, std::int64_t registers_per_sm);
/// What the Winograd kernels (algo 3 or 4) cannot run (dtype, filter, stride, dilation, block shape, prefetch,
/// registers, shared memory, 32-bit tile numbering, tiles mostly idle), empty if it can.
std::string wino_hard_check(const ConvProblem& p, const Config& config, const DeviceInfo& device);
/// The configs worth timing: 128 or 256 threads (algo 4: 144 or 288), stages no wider than twice C, two blocks per
/// SM only for kernels of few registers.
std::string wino_neighbourhood_check(const ConvProblem& p, const Config& config, const DeviceInfo& device);
/// Whether the untuned default runs Winograd: float32 3x3 of stride 1 and dilation 1 where C and K reach 32, or
/// channels last (which the direct kernel does not read).
bool wino_preferred(const ConvProblem& p, const DeviceInfo& device);
/// The Winograd default: 16 x 32 tiles, 16 x 16 where those leave half the SMs idle; wider stages for few blocks.
Config wino_heuristic(const ConvProblem& p, const DeviceInfo& device);
KernelSource wino_source(const ConvProblem& p, const Config& config);
LaunchShape wino_launch_shape(const ConvProblem& p, const Config& config);

// winograd_gemm.cpp: Winograd F(4x4, 3x3) as batched GEMMs (algo 5), after wino_hard_check's common limits
/// winograd4_gemm.cuh's block, GEMM tiles and workspace (U, V and M) for a config.
struct WgemmGeometry {
  std::int64_t threads = 0, tk = 0, tt = 0;  ///< Threads a block; along K and along tiles.
  std::int64_t cp = 0, kp = 0;               ///< C and K rounded up to wino_c and wino_k.
  std::int64_t tiles = 0, tp = 0;            ///< The batch's 4x4 output tiles; rounded up to wino_tiles.
  std::int64_t gemm_items = 0;               ///< Block tiles of the 36 GEMMs.
  std::int64_t shared_bytes = 0, register_estimate = 0, blocks = 0;  ///< blocks: the most any pass can use.
  std::size_t workspace_bytes = 0;
};
WgemmGeometry wgemm_geometry(const ConvProblem& p, const Config& config);
/// algo 5's own limits (thread tiles, registers, workspace, 32-bit indexing, tiles mostly idle).
std::string wgemm_hard_check(const ConvProblem& p, const Config& config, const DeviceInfo& device);
/// The configs worth timing: 128 or 256 threads of at least 32 accumulators, stages of 8 or 16 channels.
std::string wgemm_neighbourhood_check(const ConvProblem& p, const Config& config, const DeviceInfo& device);
KernelSource wgemm_source(const ConvProblem& p, const Config& config);
/// One cooperative wave (the loader caps the grid at the kernel's occupancy).
LaunchShape wgemm_launch_shape(const ConvProblem& p, const Config& config);
/// The barrier counter (zeroed once; the kernel resets it), then U, V and M.
LaunchPrep wgemm_prep(const ConvProblem& p, const Config& config);

// conv1x1.cpp: the NCHW 1x1 convolution as a streaming GEMM (algo 6)
/// conv1x1.cuh's block, warp tiles and shared memory (StreamLayout) for a config: tile_n output channels and tile_m
/// pixels a block, warps_n x warps_m warps.
struct StreamGeometry {
  std::int64_t tile_k = 0, tile_p = 0, warps_k = 0, warps_p = 0, warp_k = 0, warp_p = 0;
  std::int64_t threads = 0, accumulators = 0, register_estimate = 0;
  std::int64_t cp = 0, kp = 0;         ///< C rounded up to 16, K to tile_n.
  std::int64_t pixels = 0, tiles = 0;  ///< P * Q; pixel tiles of the batch.
  std::int64_t shared_bytes = 0;
};
StreamGeometry stream_geometry(const ConvProblem& p, const Config& config);
/// Why the problem is not algo 6's (float16 / bfloat16, NCHW 1x1 of stride 1 without padding, H * W and C multiples
/// of 8), empty if it is.
std::string stream_problem_check(const ConvProblem& p);
/// What algo 6 cannot run (the problem, sm_80, warp tiles, stages, threads, registers, shared memory, tiles mostly
/// idle), empty if it can.
std::string stream_hard_check(const ConvProblem& p, const Config& config, const DeviceInfo& device);
/// The configs worth timing: 4 or 8 warps of 32 or 64 channels x 32 or 64 pixels, two blocks an SM only where they fit.
std::string stream_neighbourhood_check(const ConvProblem& p, const Config& config, const DeviceInfo& device);
/// Whether the untuned default runs algo 6: stream_problem_check passes, sm_80 or newer, K >= C (where the stores
/// outweigh the loads); its default must also pass the kernel's limits.
bool stream_preferred(const ConvProblem& p, const DeviceInfo& device);
Config stream_heuristic(const ConvProblem& p, const DeviceInfo& device);
/// What a call with x, w, y or the residual less than 16-byte aligned runs instead (Family::variant slot 1): the
/// implicit GEMM through registers.
Config stream_fallback(const ConvProblem& p, const DeviceInfo& device);
KernelSource stream_source(const ConvProblem& p, const Config& config);
/// Persistent blocks: min_blocks an SM where the shared memory holds them.
LaunchShape stream_launch_shape(const ConvProblem& p, const Config& config, const DeviceInfo& device);

}  // namespace jitune::templates::conv2d::detail
