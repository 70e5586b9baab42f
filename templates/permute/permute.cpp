// The permute family object: its space and the Family contract, each part delegated to the file that does it.
#include <algorithm>
#include <bit>

#include "templates/permute/permute_detail.hpp"

namespace jitune::templates::permute {
namespace {

class PermuteFamily final : public Family {
 public:
  PermuteFamily()
      : space_({
            {"kind",
             {kGeneral, kTiled, kTiledPairs},
             "0: general N-d gather (always legal); 1: tiled through shared "
             "memory (the last dim moves); 2: tiled, 2-byte units packed "
             "in row pairs"},
            {"movement",
             {1, 2, 4, 8, 16},
             "bytes per moved unit: the element size up to the widest that divides the "
             "last dim's bytes when it stays"},
            {"vec",
             {1, 2, 4, 8},
             "tiled: units per vector access on both sides, vec * movement <= 16; general: 1"},
            {"tile",
             {16, 32, 64, 128},
             "tiled: tile edge in units, tile * (tile + 1) * movement bytes of shared memory (dynamic above "
             "48 KiB); general: 32"},
            {"rows",
             {1, 2, 4, 8, 16},
             "tiled: tile rows per thread, block = tile/vec * tile/rows; general: units "
             "per thread per iteration, rows * movement <= 64 bytes"},
            {"block", {64, 128, 256, 512, 1024}, "threads per block"},
            {"waves",
             {0, 1, 2, 4, 8, 32},
             "grid cap: at most waves x (blocks resident on the GPU at once); 0: one balanced wave, every "
             "block resident (the compiled kernel's occupancy) with the same number of tiles or chunks"},
            {"group",
             {1, 8, 32},
             "tiled: tile rows per band of the tile order (1: row by row along C), < the plane's "
             "tile rows; general: 1"},
            {"batch_order",
             {0, 1},
             "tiled, 2+ batch dims: 0 walks batch dims in input order, 1 in output order; "
             "otherwise 0"},
        }) {}

  std::string_view name() const override { return "permute"; }
  std::string_view template_name() const override { return "permute/permute.cuh"; }
  const Space& space() const override { return space_; }

  std::vector<ProblemOption> problem_options() const override {
    return {{"dtype", "element type: float32, float16, bfloat16, float64, int8, uint8, int16, int32, int64"},
            {"shape", "input shape, e.g. 64x1024x1024 (up to 8 dims)"},
            {"perm", "output dim i is input dim perm[i], e.g. 0,2,1 or 021"}};
  }

  std::unique_ptr<Problem> make_problem(const std::map<std::string, std::string>& options) const override {
    return detail::make_problem(options);
  }

  Config heuristic(const Problem& problem, const DeviceInfo&) const override {
    return detail::heuristic(static_cast<const PermuteProblem&>(problem));
  }

  std::string check(const Problem& problem, const Config& config, const DeviceInfo& device) const override {
    return detail::check(static_cast<const PermuteProblem&>(problem), config, device);
  }

  KernelSource source(const Problem& problem, const Config& config) const override {
    return detail::source(static_cast<const PermuteProblem&>(problem), config);
  }

  LaunchShape launch_shape(const Problem& problem, const Config& config,
                           const DeviceInfo& device) const override {
    return detail::launch_shape(static_cast<const PermuteProblem&>(problem), config, device);
  }

  std::unique_ptr<Problem> problem_from_call(const CallArgs& args) const override {
    return detail::problem_from_call(args);
  }

  std::vector<BufferSpec> buffers(const Problem& problem) const override {
    const auto& p = static_cast<const PermuteProblem&>(problem);
    std::vector<std::int64_t> out_shape;
    for (int d : p.perm()) out_shape.push_back(p.shape()[static_cast<std::size_t>(d)]);
    return {{"src", BufferRole::kIn, p.dtype(), p.shape(), {}},
            {"dst", BufferRole::kOut, p.dtype(), out_shape, {}}};
  }

  // An empty tensor moves nothing; what simplifies to an identity is one device copy.
  Shortcut shortcut(const Problem& problem) const override {
    const auto& p = static_cast<const PermuteProblem&>(problem);
    if (p.elements() == 0) return {Shortcut::Kind::kNothing};
    if (is_identity(p.shape(), p.perm())) return {Shortcut::Kind::kCopy, 0, 1};
    return {};
  }

  // The slot is log2 of the alignment both pointers share (1..16 bytes).
  int variant(const Problem&, const Config&, const Bindings& b) const override {
    return std::countr_zero(static_cast<unsigned>(std::min(b.alignment[0], b.alignment[1])));
  }

  Config variant_config(const Problem& problem, const Config& tuned, int slot,
                        const DeviceInfo& device) const override {
    return adapt_config(static_cast<const PermuteProblem&>(problem), tuned, 1 << slot, device);
  }

  void kernel_args(const Problem& problem, const Config& config, const Bindings& b,
                   KernelArgs& args) const override {
    push_params(static_cast<const PermuteProblem&>(problem), config, b.pointers[0], b.at(1), args);
  }

  Workload workload(const Problem& problem, std::uint64_t seed) const override {
    return detail::workload(static_cast<const PermuteProblem&>(problem), seed);
  }

  std::vector<std::vector<std::byte>> reference(const Problem& problem, const Workload& w) const override {
    return detail::reference(static_cast<const PermuteProblem&>(problem), w);
  }

  // Exact, as unsigned integers of the element size (8-byte elements as pairs of 32-bit words).
  OutputCheck output_check(const Problem& problem, std::size_t) const override {
    const auto& p = static_cast<const PermuteProblem&>(problem);
    switch (p.element_size()) {
      case 1:
        return {DType::kUInt8, 0, 0};
      case 2:
        return {DType::kInt16, 0, 0};
      default:
        return {DType::kInt32, 0, 0};
    }
  }

  std::vector<std::pair<std::string, std::string>> default_suite() const override {
    static const char* const kCases[][2] = {
        {"8192x8192", "10"},         {"64x1024x1024", "021"},   {"32x512x16x128", "0213"},
        {"64x64x64x64", "2301"},     {"16x64x128x128", "0231"}, {"16x128x128x64", "0312"},
        {"128x128x3x3x64", "43210"},
    };
    std::vector<std::pair<std::string, std::string>> cases;
    for (const char* dtype : {"float32", "float16"})
      for (const auto& c : kCases) {
        const auto perm = detail::parse_perm(c[1]);
        cases.emplace_back(
            std::string("permute_") + dtype + "_" + c[0] + "_" + c[1],
            std::string("dtype=") + dtype + ";perm=" + detail::join(perm, ',') + ";shape=" + c[0]);
      }
    return cases;
  }

 private:
  Space space_;
};

}  // namespace

const Family& permute_family() {
  static const PermuteFamily family;
  return family;
}

}  // namespace jitune::templates::permute
