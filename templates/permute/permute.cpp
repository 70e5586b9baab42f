// Permute family: simplification by rule, space and constraints, heuristic default, instantiation, launch
// geometry, kernel parameters, workload and CPU reference.
#include "templates/permute/permute.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <optional>
#include <thread>

#include "templates/host_parallel.hpp"

namespace jitune::templates::permute {
namespace {

constexpr std::int64_t kMaxBytes = std::int64_t{1} << 62;

// Drops size-1 dims and merges runs of input dims that stay adjacent and in order in the output. dims/perm of
// rank n in, the plan's rank, dims and perm out (unit and units untouched). Every extent must be >= 1.
void collapse(int n, const std::int64_t* dims, const int* perm, Plan& out) {
  out.dims.fill(0);
  out.perm.fill(0);
  int index[kMaxRank];
  std::int64_t kept_dims[kMaxRank];
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    index[i] = dims[i] == 1 ? -1 : kept;
    if (dims[i] != 1) kept_dims[kept++] = dims[i];
  }
  int kept_perm[kMaxRank];
  int m = 0;
  for (int i = 0; i < n; ++i)
    if (index[perm[i]] >= 0) kept_perm[m++] = index[perm[i]];
  // Groups of consecutive output dims whose input dims are consecutive and ascending.
  int first[kMaxRank], last[kMaxRank];
  int groups = 0;
  for (int i = 0; i < m; ++i) {
    if (groups > 0 && kept_perm[i] == last[groups - 1] + 1) {
      last[groups - 1] = kept_perm[i];
    } else {
      first[groups] = last[groups] = kept_perm[i];
      ++groups;
    }
  }
  out.rank = groups;
  for (int g = 0; g < groups; ++g) {
    int position = 0;  // the group's place in input order
    for (int h = 0; h < groups; ++h) position += first[h] < first[g];
    std::int64_t extent = 1;
    for (int d = first[g]; d <= last[g]; ++d) extent *= kept_dims[d];
    out.dims[position] = extent;
    out.perm[g] = position;
  }
}

std::string join(std::span<const std::int64_t> values, char sep) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i)
    out += (i ? std::string(1, sep) : "") + std::to_string(values[i]);
  return out;
}

std::string join(std::span<const int> values, char sep) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i)
    out += (i ? std::string(1, sep) : "") + std::to_string(values[i]);
  return out;
}

std::int64_t parse_count(std::string_view text, const char* what) {
  std::int64_t v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0)
    throw InvalidArgument(std::string("permute problem: ") + what + " '" + std::string(text) +
                          "' is not a non-negative integer");
  return v;
}

// "64x1024x1024" or "64,1024,1024"; empty: a 0-d tensor.
std::vector<std::int64_t> parse_shape(std::string_view text) {
  std::vector<std::int64_t> out;
  if (text.empty()) return out;
  std::size_t start = 0;
  while (true) {
    const std::size_t sep = text.find_first_of("x,", start);
    out.push_back(parse_count(text.substr(start, sep - start), "shape extent"));
    if (sep == std::string_view::npos) break;
    start = sep + 1;
  }
  return out;
}

// "0,2,1" or the digits alone, "021" (at most 8 dims, so one digit each); empty: a 0-d tensor.
std::vector<int> parse_perm(std::string_view text) {
  std::vector<int> out;
  if (text.find(',') == std::string_view::npos) {
    for (char c : text) {
      if (c < '0' || c > '9')
        throw InvalidArgument("permute problem: perm '" + std::string(text) +
                              "' is neither comma-separated dims (0,2,1) nor digits (021)");
      out.push_back(c - '0');
    }
    return out;
  }
  std::size_t start = 0;
  while (true) {
    const std::size_t sep = text.find(',', start);
    out.push_back(static_cast<int>(parse_count(text.substr(start, sep - start), "perm entry")));
    if (sep == std::string_view::npos) break;
    start = sep + 1;
  }
  return out;
}

int log2_of(int bytes) {
  return std::countr_zero(static_cast<unsigned>(bytes));
}

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

std::int64_t blocks_per_wave(const DeviceInfo& device, std::int64_t block, std::int64_t shared_bytes) {
  std::int64_t per_sm = std::clamp<std::int64_t>(device.max_threads_per_sm / block, 1, 32);
  if (shared_bytes > 0)
    per_sm = std::clamp<std::int64_t>(device.max_shared_per_sm / (shared_bytes + 1024), 1, per_sm);
  return std::int64_t{device.sm_count} * per_sm;
}

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
    for (const auto& [key, value] : options)
      if (key != "dtype" && key != "shape" && key != "perm")
        throw InvalidArgument("permute problem: unknown option '" + key +
                              "'; options are dtype, shape, perm");
    auto get = [&](const char* key) -> const std::string& {
      auto it = options.find(key);
      if (it == options.end())
        throw InvalidArgument(std::string("permute problem: missing '") + key +
                              "' (options: dtype, shape, perm)");
      return it->second;
    };
    return std::make_unique<PermuteProblem>(parse_dtype(get("dtype")), parse_shape(get("shape")),
                                            parse_perm(get("perm")));
  }

  Config heuristic(const Problem& problem, const DeviceInfo&) const override {
    const auto& p = static_cast<const PermuteProblem&>(problem);
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

  std::string check(const Problem& problem, const Config& config, const DeviceInfo& device) const override {
    const auto& p = static_cast<const PermuteProblem&>(problem);
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
      return "the tiled kernel runs tile/vec x tile/" +
             std::string(kind == kTiledPairs ? "(2 rows)" : "rows") + " = " + n(threads) +
             " threads, not block " + n(block);
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

  KernelSource source(const Problem& problem, const Config& config) const override {
    const auto& p = static_cast<const PermuteProblem&>(problem);
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
             std::to_string(std::max(plan.rank, 1)) + ", " + n("rows") + ", " + n("block") + ", " + index +
             ">";
    }
    return {"#include \"permute/permute.cuh\"\n", std::move(name)};
  }

  LaunchShape launch_shape(const Problem& problem, const Config& config,
                           const DeviceInfo& device) const override {
    const auto& p = static_cast<const PermuteProblem&>(problem);
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
    if (shared > 48 * 1024)
      s.shared_bytes = static_cast<unsigned>(shared);  // the tiled kernel's dynamic tile
    // Every permute kernel waits for the previous kernel before touching memory (permute.cuh).
    s.programmatic = device.cc() >= 90;
    return s;
  }

  std::unique_ptr<Problem> problem_from_call(const CallArgs& args) const override {
    CallReader in(args);
    const DType dtype = in.next_dtype();
    std::vector<std::int64_t> shape = in.next_list();
    std::vector<int> perm = in.next_list<int>();
    return std::make_unique<PermuteProblem>(dtype, std::move(shape), std::move(perm));
  }

  std::vector<BufferSpec> buffers(const Problem& problem) const override {
    const auto& p = static_cast<const PermuteProblem&>(problem);
    std::vector<std::int64_t> out_shape;
    for (int d : p.perm()) out_shape.push_back(p.shape()[static_cast<std::size_t>(d)]);
    return {{"src", BufferRole::kIn, p.dtype(), p.shape(), {}}, {"dst", BufferRole::kOut, p.dtype(), out_shape, {}}};
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

  void kernel_args(const Problem& problem, const Config& config, const Bindings& b, KernelArgs& args) const override {
    push_params(static_cast<const PermuteProblem&>(problem), config, b.pointers[0], b.at(1), args);
  }

  Workload workload(const Problem& problem, std::uint64_t seed) const override {
    const auto& p = static_cast<const PermuteProblem&>(problem);
    const auto es = static_cast<std::size_t>(p.element_size());
    const auto count = static_cast<std::uint64_t>(p.elements());
    Workload w;
    w.inputs.emplace_back(count * es);
    std::byte* data = w.inputs[0].data();
    parallel_for(count, [&](std::uint64_t b, std::uint64_t e) {
      std::uint64_t state = seed * 1000003u ^ (b * 0x2545f4914f6cdd1dull);
      for (std::uint64_t i = b; i < e; ++i) {
        const std::uint64_t r = splitmix(state);
        std::byte* el = data + i * es;
        std::memcpy(el, &r, es);
        // Never all 0xFF (the poison: an unwritten element must fail) and never all zero.
        bool all_ff = true, all_zero = true;
        for (std::size_t k = 0; k < es; ++k) {
          all_ff = all_ff && el[k] == std::byte{0xFF};
          all_zero = all_zero && el[k] == std::byte{0};
        }
        if (all_ff) el[0] = std::byte{0x5A};
        if (all_zero) el[0] = std::byte{0xA5};
      }
    });
    w.output_bytes = {count * es};
    return w;
  }

  // Straight from the unsimplified shape and permutation (no plan), so a simplification bug cannot hide in
  // it.
  std::vector<std::vector<std::byte>> reference(const Problem& problem, const Workload& w) const override {
    const auto& p = static_cast<const PermuteProblem&>(problem);
    const auto es = static_cast<std::size_t>(p.element_size());
    const int n = static_cast<int>(p.shape().size());
    const auto count = static_cast<std::uint64_t>(p.elements());
    std::vector<std::byte> out(count * es);
    if (count == 0) return {std::move(out)};
    std::int64_t in_stride[kMaxRank], out_dims[kMaxRank], src_stride[kMaxRank];
    std::int64_t s = 1;
    for (int d = n - 1; d >= 0; --d) {
      in_stride[d] = s;
      s *= p.shape()[d];
    }
    for (int i = 0; i < n; ++i) {
      out_dims[i] = p.shape()[p.perm()[i]];
      src_stride[i] = in_stride[p.perm()[i]];
    }
    const std::byte* in = w.inputs.at(0).data();
    parallel_for(count, [&](std::uint64_t b, std::uint64_t e) {
      std::int64_t index[kMaxRank] = {};
      std::int64_t src = 0;
      std::uint64_t rest = b;
      for (int i = n - 1; i >= 0; --i) {
        index[i] = static_cast<std::int64_t>(rest % static_cast<std::uint64_t>(out_dims[i]));
        rest /= static_cast<std::uint64_t>(out_dims[i]);
        src += index[i] * src_stride[i];
      }
      for (std::uint64_t o = b; o < e; ++o) {
        std::memcpy(out.data() + o * es, in + static_cast<std::uint64_t>(src) * es, es);
        for (int i = n - 1; i >= 0; --i) {  // odometer over the output index
          src += src_stride[i];
          if (++index[i] < out_dims[i]) break;
          src -= src_stride[i] * out_dims[i];
          index[i] = 0;
        }
      }
    });
    return {std::move(out)};
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
        const auto perm = parse_perm(c[1]);
        cases.emplace_back(std::string("permute_") + dtype + "_" + c[0] + "_" + c[1],
                           std::string("dtype=") + dtype + ";perm=" + join(perm, ',') + ";shape=" + c[0]);
      }
    return cases;
  }

 private:
  Space space_;
};

}  // namespace

void validate(std::span<const std::int64_t> shape, std::span<const int> perm, std::size_t element_size) {
  const std::string where = "permute of shape (" + join(shape, ',') + ") by perm (" + join(perm, ',') + ")";
  if (shape.size() > static_cast<std::size_t>(kMaxRank))
    throw InvalidArgument(where + ": " + std::to_string(shape.size()) +
                          " dims; at most 8 are supported (merge dims that stay together first)");
  if (perm.size() != shape.size())
    throw InvalidArgument(where + ": the permutation has " + std::to_string(perm.size()) + " entries for " +
                          std::to_string(shape.size()) + " dims; give one output position per input dim");
  unsigned seen = 0;
  for (int d : perm) {
    if (d < 0 || d >= static_cast<int>(shape.size()))
      throw InvalidArgument(where + ": entry " + std::to_string(d) + " is outside 0.." +
                            std::to_string(static_cast<int>(shape.size()) - 1) +
                            "; perm must be a permutation of 0..n-1");
    if (seen & (1u << d))
      throw InvalidArgument(where + ": dim " + std::to_string(d) +
                            " appears twice; perm must be a permutation of 0..n-1");
    seen |= 1u << d;
  }
  std::int64_t bytes = static_cast<std::int64_t>(element_size);
  bool empty = false;
  for (std::int64_t extent : shape) {
    if (extent < 0) throw InvalidArgument(where + ": extent " + std::to_string(extent) + " is negative");
    empty = empty || extent == 0;
  }
  if (!empty)
    for (std::int64_t extent : shape) {
      if (bytes > kMaxBytes / extent)
        throw InvalidArgument(where + ": the tensor holds more than 2^62 bytes");
      bytes *= extent;
    }
}

Plan simplify(std::span<const std::int64_t> shape, std::span<const int> perm, int element_size,
              int max_movement) {
  Plan plan;
  plan.unit = element_size;
  std::int64_t count = 1;
  for (std::int64_t extent : shape) count *= extent;
  if (count == 0) return plan;  // rank 0, units 0: nothing to move
  collapse(static_cast<int>(shape.size()), shape.data(), perm.data(), plan);
  plan.units = count;
  if (plan.rank >= 1 && plan.perm[plan.rank - 1] == plan.rank - 1) {
    const std::int64_t last_bytes = plan.dims[plan.rank - 1] * element_size;
    for (int movement = 16; movement > element_size; movement /= 2) {
      if (movement > max_movement || last_bytes % movement != 0) continue;
      Plan widened = plan;
      widened.dims[widened.rank - 1] = last_bytes / movement;
      collapse(widened.rank, widened.dims.data(), widened.perm.data(), plan);
      plan.unit = movement;
      plan.units = count * element_size / movement;
      break;
    }
  }
  return plan;
}

int pointer_alignment(const void* a, const void* b) noexcept {
  const auto bits = reinterpret_cast<std::uintptr_t>(a) | reinterpret_cast<std::uintptr_t>(b) | 16u;
  return static_cast<int>(bits & (~bits + 1));
}

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

bool is_identity(std::span<const std::int64_t> shape, std::span<const int> perm) noexcept {
  int last = -1;
  for (int d : perm) {
    if (shape[d] == 1) continue;
    if (d < last) return false;
    last = d;
  }
  return true;
}

PermuteProblem::PermuteProblem(DType dtype, std::vector<std::int64_t> shape, std::vector<int> perm)
    : dtype_(dtype), shape_(std::move(shape)), perm_(std::move(perm)) {
  const int es = element_size();
  validate(shape_, perm_, static_cast<std::size_t>(es));
  elements_ = 1;
  for (std::int64_t extent : shape_) elements_ *= extent;
  max_movement_ = simplify(shape_, perm_, es, 16).unit;
  for (int m = es; m <= max_movement_; m *= 2) plans_[log2_of(m)] = simplify(shape_, perm_, es, m);
}

const Plan& PermuteProblem::plan(int bytes) const {
  if (bytes < element_size() || bytes > max_movement_ || !std::has_single_bit(static_cast<unsigned>(bytes)))
    throw InvalidArgument("permute " + signature() + ": movement " + std::to_string(bytes) +
                          " is not a power of two between the element size and " +
                          std::to_string(max_movement_));
  return plans_[log2_of(bytes)];
}

std::string PermuteProblem::signature() const {
  return "dtype=" + std::string(dtype_name(dtype_)) + ";perm=" + join(perm_, ',') +
         ";shape=" + join(shape_, 'x');
}

std::string PermuteProblem::group() const {
  const Plan& p = plans_[log2_of(max_movement_)];
  return "bytes=" + std::to_string(p.unit) +
         "|perm=" + join(std::span<const int>(p.perm.data(), p.rank), ',');
}

std::vector<double> PermuteProblem::features() const {
  const Plan& p = plans_[log2_of(max_movement_)];
  std::vector<double> f;
  for (int d = 0; d < p.rank; ++d) f.push_back(std::log2(static_cast<double>(p.dims[d])));
  return f;
}

double PermuteProblem::bytes_moved() const {
  return 2.0 * static_cast<double>(elements_) * element_size();
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

const Family& permute_family() {
  static const PermuteFamily family;
  return family;
}

}  // namespace jitune::templates::permute
