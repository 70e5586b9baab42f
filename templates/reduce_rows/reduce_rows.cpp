// reduce_rows family: space and constraints, heuristic default, instantiation, launch geometry, kernel
// parameters and workspace, call decoding, workload, CPU reference and tolerances.
#include "templates/reduce_rows/reduce_rows.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <limits>

#include "templates/host_float.hpp"
#include "templates/host_parallel.hpp"

namespace jitune::templates::reduce_rows {
namespace {

// The kernel kind follows `threads`: teams inside a warp run reduce_rows_group, whole blocks
// reduce_rows_block (or reduce_rows_cluster when cluster = 1).
constexpr std::int64_t kMaxTeam = 32;
// Grid-stride kernels get at most this many waves of blocks (rows are uniform, so more buys nothing).
constexpr std::int64_t kWaves = 16;
// Loads of one row a team may issue in flight per thread (registers: 8 x 16 bytes).
constexpr std::int64_t kMaxLoads = 8;
// Passes over a row a team inside a warp may make; longer rows are the block kernels' (far fewer teams than
// SMs otherwise, or a warp streaming a row that a block reads in a few passes).
constexpr std::int64_t kMaxTeamPasses = 64;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}
std::int64_t pow2_ceil(std::int64_t v) {
  return static_cast<std::int64_t>(std::bit_ceil(static_cast<std::uint64_t>(std::max<std::int64_t>(v, 1))));
}
std::int64_t pow2_floor(std::int64_t v) {
  return static_cast<std::int64_t>(std::bit_floor(static_cast<std::uint64_t>(std::max<std::int64_t>(v, 1))));
}
std::string n(std::int64_t v) {
  return std::to_string(v);
}

bool supported(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16;
}

// How a config cuts one row: loads of `pack` elements ("units", the last one partial when cols % pack != 0),
// `split` slices of them, `threads` threads on a slice.
struct Cut {
  std::int64_t units, slice, passes;  // units per row, units per slice, loads per thread per slice
};

Cut cut(const ReduceRowsProblem& p, const Config& c) {
  Cut k;
  k.units = ceil_div(p.cols(), c.at("pack"));
  k.slice = ceil_div(k.units, c.at("split"));
  k.passes = ceil_div(k.slice, c.at("threads"));
  return k;
}

// Rows start off the pack: several rows of a pitch that is not a multiple of it, or an x whose alignment class
// is narrower than the pack.
bool peel_needed(const ReduceRowsProblem& p, std::int64_t pack) {
  return (p.rows() > 1 && p.cols() % pack != 0) || p.align() < pack * p.element_size();
}

bool is_group(const Config& c) {
  return c.at("threads") <= kMaxTeam;
}
bool uses_workspace(const Config& c) {
  return c.at("split") > 1 && c.at("cluster") == 0;
}

// Why a group-kernel config cannot run or cannot help, empty if it is fine.
std::string check_group(const ReduceRowsProblem& p, const Config& c, const Cut& k) {
  const std::int64_t threads = c.at("threads"), pack = c.at("pack"), unroll = c.at("unroll"),
                     rows = c.at("rows");
  if (c.at("split") != 1 || c.at("cluster") != 0)
    return "threads " + n(threads) +
           " is a team inside a warp, one team a row: split must be 1 and cluster 0";
  if (threads > pow2_ceil(k.units))
    return "threads " + n(threads) + " for rows of " + n(k.units) + " loads of pack " + n(pack) +
           ": half the team would load nothing";
  if (k.passes > kMaxTeamPasses)
    return "rows of " + n(k.units) + " loads are " + n(k.passes) + " passes of a team of " + n(threads) +
           "; rows longer than " + n(kMaxTeamPasses) + " passes go to the block kernels (threads >= 128)";
  if (unroll > pow2_ceil(k.passes))
    return "unroll " + n(unroll) + ": a thread makes at most " + n(k.passes) + " loads per row";
  if (threads < kMaxTeam && k.passes > 1 && threads * pack * p.element_size() < 32)
    return "a team of " + n(threads) + " reads " + n(threads * pack * p.element_size()) +
           " bytes of a row per pass, less than a 32-byte sector, and rows need " + n(k.passes) +
           " passes: loads would not coalesce";
  if (rows > 1 && k.passes > unroll)
    return "rows " + n(rows) + ": several rows per team only for rows one unrolled pass covers (" +
           n(k.passes) + " loads per thread here)";
  if (rows > pow2_ceil(p.rows()))
    return "rows " + n(rows) + " per team for a problem of " + n(p.rows()) + " rows";
  if (rows * unroll > kMaxLoads)
    return "rows " + n(rows) + " x unroll " + n(unroll) + " loads in flight per thread; at most " +
           n(kMaxLoads);
  return {};
}

// Why a block-kernel config cannot run or cannot help, empty if it is fine.
std::string check_block(const ReduceRowsProblem& p, const Config& c, const Cut& k, const DeviceInfo& device) {
  const std::int64_t threads = c.at("threads"), pack = c.at("pack"), unroll = c.at("unroll"),
                     split = c.at("split");
  if (c.at("rows") != 1) return "threads " + n(threads) + " reduce one row per block: rows must be 1";
  if (threads > device.max_threads_per_block)
    return "threads " + n(threads) + " exceeds the device's " + n(device.max_threads_per_block) +
           " threads per block";
  if (c.at("cluster") == 1) {
    if (split == 1) return "cluster 1 joins the blocks of a split row: it needs split >= 2";
    if (device.cc() < 90)
      return "thread-block clusters need sm_90 or newer; this device is " + device.arch() +
             " (use cluster 0)";
    if (split > 8) return "split " + n(split) + ": a portable cluster holds at most 8 blocks";
  }
  if (split > 1 && p.rows() >= device.sm_count)
    return "split " + n(split) + ": " + n(p.rows()) + " rows already give each of the " + n(device.sm_count) +
           " SMs a block";
  if (pack < p.max_pack())
    return "pack " + n(pack) + ": a block reads its slice in the widest loads the rows allow (pack " +
           n(p.max_pack()) + "); narrower ones only add passes";
  if (threads > pow2_ceil(k.slice))
    return "threads " + n(threads) + " for slices of " + n(k.slice) + " loads of pack " + n(pack) +
           ": half the block would load nothing";
  if (unroll > pow2_ceil(k.passes))
    return "unroll " + n(unroll) + ": a thread makes at most " + n(k.passes) + " loads per slice";
  if (threads == 1024 && unroll * pack * p.element_size() > 64)
    return "1024 threads get 64 registers each: unroll " + n(unroll) + " x " + n(pack * p.element_size()) +
           "-byte loads in flight exceed 64 bytes";
  return {};
}

std::int64_t parse_size(const std::map<std::string, std::string>& options, const char* key) {
  const std::string& text = options.at(key);
  std::int64_t v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0)
    throw InvalidArgument(std::string("reduce_rows problem: ") + key + "='" + text +
                          "' is not a non-negative integer");
  return v;
}

ReduceOp parse_op(const std::string& text) {
  if (text == "sum") return ReduceOp::kSum;
  if (text == "max") return ReduceOp::kMax;
  throw InvalidArgument("reduce_rows problem: op='" + text + "' is neither sum nor max");
}

class ReduceRowsFamily final : public Family {
 public:
  ReduceRowsFamily()
      : space_({
            {"threads",
             {1, 2, 4, 8, 16, 32, 128, 256, 512, 1024},
             "threads reducing one row: 1-32 a team inside a warp (256-thread blocks of teams), 128-1024 the "
             "whole "
             "block"},
            {"pack", {1, 2, 4, 8}, "elements per vector load, pack * element size <= 16 bytes"},
            {"peel",
             {0, 1},
             "1: rows may start anywhere, each row's elements before its first aligned pack and after its last "
             "read one by one (rows of a pitch that is not a multiple of the pack; the runtime also takes it "
             "for an x off the pack's alignment); 0: rows start pack-aligned"},
            {"unroll", {1, 2, 4, 8}, "loads of one row each thread issues before folding them"},
            {"rows",
             {1, 2, 4, 8},
             "teams: rows a team reduces at once (loads in flight for short rows); blocks: 1"},
            {"split", {1, 2, 4, 8, 16, 32}, "blocks: blocks per row, for few long rows; teams: 1"},
            {"cluster",
             {0, 1},
             "split > 1: 1 joins a row's blocks in a thread-block cluster through distributed shared memory "
             "(sm_90+, split <= 8), 0 through a workspace"},
        }) {}

  std::string_view name() const override { return "reduce_rows"; }
  std::string_view template_name() const override { return "reduce_rows/reduce_rows.cuh"; }
  const Space& space() const override { return space_; }

  std::vector<ProblemOption> problem_options() const override {
    return {{"dtype", "float32, float16 or bfloat16 (x and y)"},
            {"op", "sum or max"},
            {"rows", "rows of x (elements of y)"},
            {"cols", "elements per row, reduced"},
            {"align", "x's alignment class in bytes where x is a view off 16 bytes (2, 4 or 8; default 16): "
                      "tuned apart from the aligned problem"}};
  }

  std::unique_ptr<Problem> make_problem(const std::map<std::string, std::string>& options) const override {
    for (const char* key : {"dtype", "op", "rows", "cols"})
      if (!options.count(key))
        throw InvalidArgument(std::string("reduce_rows problem: missing '") + key +
                              "' (options: dtype, op, rows, cols; align optional)");
    for (const auto& [key, value] : options)
      if (key != "dtype" && key != "op" && key != "rows" && key != "cols" && key != "align")
        throw InvalidArgument("reduce_rows problem: unknown option '" + key +
                              "'; options are dtype, op, rows, cols and align");
    std::uint8_t align = 16;
    if (options.count("align")) {  // the problem checks the class; here only that it fits
      const std::int64_t a = parse_size(options, "align");
      if (a > 16)
        throw InvalidArgument("reduce_rows problem: align='" + options.at("align") +
                              "' is not an alignment class (2, 4, 8 or 16 bytes)");
      align = static_cast<std::uint8_t>(a);
    }
    return std::make_unique<ReduceRowsProblem>(parse_dtype(options.at("dtype")), parse_op(options.at("op")),
                                               parse_size(options, "rows"), parse_size(options, "cols"), align);
  }

  Config heuristic(const Problem& problem, const DeviceInfo& device) const override {
    const auto& p = static_cast<const ReduceRowsProblem&>(problem);
    std::int64_t pack = p.max_pack();
    while (pack > 1 && peel_needed(p, pack) && p.cols() < 2 * pack) pack /= 2;  // short odd rows: narrower
    const std::int64_t bytes = pack * p.element_size();
    const std::int64_t units = ceil_div(std::max<std::int64_t>(p.cols(), 1), pack);
    Config c{{"threads", 0}, {"pack", pack},   {"peel", peel_needed(p, pack) ? 1 : 0},
             {"unroll", 1},  {"rows", 1},      {"split", 1},
             {"cluster", 0}};
    if (units <= kMaxTeam * kMaxLoads) {
      // Rows of up to 8 warp-wide passes: one team a row, as narrow as covers the row in one pass, else a
      // warp unrolled over the row; short rows take several rows at once so 4 (small loads: 8) are in flight.
      const std::int64_t threads = std::min(kMaxTeam, pow2_ceil(units));
      const std::int64_t unroll = pow2_ceil(ceil_div(units, threads));
      const std::int64_t target = bytes <= 4 ? kMaxLoads : 4;
      c.set("threads", threads);
      c.set("unroll", unroll);
      c.set("rows", std::clamp<std::int64_t>(target / unroll, 1, pow2_ceil(p.rows())));
      if (c.at("peel") == 1) c.set("rows", std::min<std::int64_t>(c.at("rows"), 4));
      return c;
    }
    // Long rows: a block a row, with >= 4 loads per thread. Fewer rows than SMs: split each row over blocks
    // so about two blocks run per SM (slices of >= 1024 loads); on sm_90 a cluster of up to 8 blocks.
    std::int64_t split = 1;
    if (p.rows() >= 1 && p.rows() < device.sm_count) {
      split = std::clamp<std::int64_t>(pow2_ceil(ceil_div(2 * device.sm_count, p.rows())), 1, 32);
      split = std::min(split, pow2_floor(units / 1024));
      if (split > 1 && device.cc() >= 90) {
        split = std::min<std::int64_t>(split, 8);
        c.set("cluster", 1);
      }
    }
    const std::int64_t slice = ceil_div(units, split);
    const std::int64_t threads = std::clamp<std::int64_t>(pow2_floor(slice / 4), 128, 1024);
    std::int64_t unroll = std::min(kMaxLoads, pow2_ceil(ceil_div(slice, threads)));
    if (threads == 1024) unroll = std::min(unroll, 64 / bytes);
    c.set("threads", threads);
    c.set("unroll", unroll);
    c.set("split", split);
    return c;
  }

  std::string check(const Problem& problem, const Config& config, const DeviceInfo& device) const override {
    const auto& p = static_cast<const ReduceRowsProblem&>(problem);
    const std::int64_t pack = config.at("pack"), bytes = pack * p.element_size();
    if (bytes > 16)
      return "pack " + n(pack) + " moves " + n(bytes) + " bytes per load; the widest load is 16 bytes";
    const bool peel = config.at("peel") == 1;
    if (peel_needed(p, pack) && !peel)
      return "rows of " + n(p.cols()) + " elements start at different offsets within a pack of " + n(pack) +
             ": they need peel 1";
    if (peel && config.at("rows") > 4)
      return "rows " + n(config.at("rows")) + " with peel 1: each row of a team keeps its own cut and scalars; "
             "at most 4 rows (more spill registers)";
    if (peel && p.cols() < 2 * pack)
      return "rows of " + n(p.cols()) + " elements are shorter than two packs of " + n(pack) +
             ": with peel 1 most of each row would be read one by one; a narrower pack reads it";
    if (!peel_needed(p, pack) && peel)
      return "rows of " + n(p.cols()) + " elements start pack-aligned (pack " + n(pack) +
             "): peel 1 only adds work (the runtime takes it for an x off the pack's alignment)";
    const Cut k = cut(p, config);
    return is_group(config) ? check_group(p, config, k) : check_block(p, config, k, device);
  }

  KernelSource source(const Problem& problem, const Config& config) const override {
    const auto& p = static_cast<const ReduceRowsProblem&>(problem);
    const auto v = [&](const char* key) { return std::to_string(config.at(key)); };
    const std::string head = std::to_string(static_cast<int>(p.op())) + ", " +
                             std::string(dtype_cuda_type(p.dtype())) + ", " + v("threads") + ", " +
                             v("pack") + ", " + (config.at("peel") == 1 ? "true" : "false") + ", " +
                             v("unroll") + ", ";
    std::string name = "jitune::templates::reduce_rows::";
    if (is_group(config))
      name += "reduce_rows_group<" + head + v("rows") + ">";
    else if (config.at("cluster") == 1)
      name += "reduce_rows_cluster<" + head + v("split") + ">";
    else
      name += "reduce_rows_block<" + head + (uses_workspace(config) ? "true" : "false") + ">";
    return {"#include \"reduce_rows/reduce_rows.cuh\"\n", std::move(name)};
  }

  LaunchShape launch_shape(const Problem& problem, const Config& config,
                           const DeviceInfo& device) const override {
    const auto& p = static_cast<const ReduceRowsProblem&>(problem);
    const std::int64_t threads = config.at("threads"), split = config.at("split");
    LaunchShape s;
    if (is_group(config)) {
      const std::int64_t rows_per_block = kGroupBlock / threads * config.at("rows");
      s = grid_stride_shape(p.rows(), kGroupBlock, rows_per_block, kWaves, device);
    } else if (config.at("cluster") == 1) {
      s.grid.x = static_cast<unsigned>(p.rows() * split);  // the kernel takes one (row, slice) per block
      s.block.x = static_cast<unsigned>(threads);
    } else {
      s = grid_stride_shape(p.rows() * split, threads, 1, kWaves, device);
    }
    // Every kernel waits for the previous kernel before touching memory (reduce_rows.cuh).
    s.programmatic = device.cc() >= 90;
    return s;
  }

  std::unique_ptr<Problem> problem_from_call(const CallArgs& args) const override {
    CallReader in(args);
    const DType dtype = in.next_dtype();
    const std::int64_t op = in.next();
    const std::int64_t rows = in.next();
    const std::int64_t cols = in.next();
    if (op != static_cast<std::int64_t>(ReduceOp::kSum) && op != static_cast<std::int64_t>(ReduceOp::kMax))
      throw InvalidArgument("reduce_rows: op " + n(op) +
                            " is neither ReduceOp::kSum (0) nor ReduceOp::kMax (1)");
    return std::make_unique<ReduceRowsProblem>(dtype, static_cast<ReduceOp>(op), rows, cols);
  }

  std::vector<BufferSpec> buffers(const Problem& problem) const override {
    const auto& p = static_cast<const ReduceRowsProblem&>(problem);
    std::vector<BufferSpec> out{{"x", BufferRole::kIn, p.dtype(), {p.rows(), p.cols()}, {}},
                                {"y", BufferRole::kOut, p.dtype(), {p.rows()}, {}}};
    out[0].placement = p.align();
    return out;
  }

  // An x off the 16-byte alignment whose rows all start at the same offset is a problem of its own (its class in
  // the signature): the aligned record's config runs it correctly with peel 1 (variant below), but the threads,
  // pack and unroll that read a row from a shifted start fastest are not the aligned ones (the float16 4096 x 4096
  // view one element in ran at 80% of the aligned bandwidth on the aligned record's config). Rows of another
  // pitch start at every offset anyway: their aligned problem already tuned peel 1, so no refinement.
  std::unique_ptr<Problem> with_alignment(const Problem& problem,
                                          std::span<const std::uint8_t> classes) const override {
    const auto& p = static_cast<const ReduceRowsProblem&>(problem);
    if (classes.empty() || classes[0] >= 16 || p.rows() == 0 || p.cols() == 0 ||
        !rows_share_alignment(p.dtype(), p.rows(), p.cols()) || classes[0] < p.element_size())
      return nullptr;
    return std::make_unique<ReduceRowsProblem>(p.dtype(), p.op(), p.rows(), p.cols(), classes[0]);
  }

  // No rows: nothing to do. Rows of no elements (sum only; max refuses them): y is zero.
  Shortcut shortcut(const Problem& problem) const override {
    const auto& p = static_cast<const ReduceRowsProblem&>(problem);
    if (p.rows() == 0) return {Shortcut::Kind::kNothing};
    if (p.cols() == 0) return {Shortcut::Kind::kZero, 0, 1};
    return {};
  }

  // Slot 1: the tuned config with peel 1, for an x off the pack's alignment (the tuned pack at full width;
  // each row's head and tail one by one); slot 0: the tuned config.
  int variant(const Problem& problem, const Config& tuned, const Bindings& b) const override {
    const auto& p = static_cast<const ReduceRowsProblem&>(problem);
    return tuned.at("peel") == 0 && b.alignment[0] < tuned.at("pack") * p.element_size() ? 1 : 0;
  }

  Config variant_config(const Problem&, const Config& tuned, int slot, const DeviceInfo&) const override {
    Config c = tuned;
    if (slot == 1) c.set("peel", 1);
    return c;
  }

  // The workspace kernel: a float partial per (row, slice), then a zeroed arrival counter per row.
  LaunchPrep prep(const Problem& problem, const Config& config) const override {
    LaunchPrep prep;
    if (!uses_workspace(config)) return prep;
    const auto rows = static_cast<std::size_t>(static_cast<const ReduceRowsProblem&>(problem).rows());
    prep.zero_begin = rows * static_cast<std::size_t>(config.at("split")) * sizeof(float);
    prep.zero_end = prep.workspace_bytes = prep.zero_begin + rows * sizeof(unsigned);
    return prep;
  }

  void kernel_args(const Problem& problem, const Config& config, const Bindings& b,
                   KernelArgs& args) const override {
    const auto& p = static_cast<const ReduceRowsProblem&>(problem);
    const auto address = [](const void* ptr) {
      return static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(ptr));
    };
    Params params{};
    params.x = address(b.pointers[0]);
    params.y = address(b.pointers[1]);
    if (uses_workspace(config)) {
      params.partials = address(b.workspace);
      params.arrivals = params.partials + prep(p, config).zero_begin;
    }
    params.rows = p.rows();
    params.cols = p.cols();
    params.split = config.at("split");
    args.push_raw(&params, sizeof params, alignof(Params));
  }

  Workload workload(const Problem& problem, std::uint64_t seed) const override {
    const auto& p = static_cast<const ReduceRowsProblem&>(problem);
    const auto count = static_cast<std::uint64_t>(p.rows() * p.cols());
    Workload w;
    w.inputs.emplace_back(count * static_cast<std::uint64_t>(p.element_size()));
    fill_random_nonzero(p.dtype(), w.inputs[0].data(), count, seed);
    w.output_bytes = {static_cast<std::size_t>(p.rows()) * static_cast<std::size_t>(p.element_size())};
    return w;
  }

  // Each row in double (NaN propagates through both ops), rounded once to the dtype.
  std::vector<std::vector<std::byte>> reference(const Problem& problem, const Workload& w) const override {
    const auto& p = static_cast<const ReduceRowsProblem&>(problem);
    const auto rows = static_cast<std::uint64_t>(p.rows()), cols = static_cast<std::uint64_t>(p.cols());
    std::vector<std::byte> out(rows * static_cast<std::uint64_t>(p.element_size()));
    const std::byte* x = w.inputs.at(0).data();
    const bool max = p.op() == ReduceOp::kMax;
    parallel_for(rows, cols, [&](std::uint64_t begin, std::uint64_t end) {
      for (std::uint64_t r = begin; r < end; ++r) {
        double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
        for (std::uint64_t c = 0; c < cols; ++c) {
          const double v = load_element(p.dtype(), x, r * cols + c);
          acc = !max ? acc + v : (std::isnan(v) || v > acc) ? v : acc;
        }
        store_element(p.dtype(), out.data(), r, acc);
      }
    });
    return {std::move(out)};
  }

  // Max picks an element: exact. Sum: float accumulation in another order than the reference's double sum
  // errs by about 2^-24 * |partial sums| per step; bound it by cols * 2^-20 (inputs < 4 in magnitude), which
  // still catches one element of the smallest magnitude (0.25) missing or counted twice in rows up to 2^17
  // elements. Half / bfloat16 outputs add one rounding of the result (an ulp: 2^-10 / 2^-7 relative).
  OutputCheck output_check(const Problem& problem, std::size_t) const override {
    const auto& p = static_cast<const ReduceRowsProblem&>(problem);
    if (p.op() == ReduceOp::kMax) return {p.dtype(), 0, 0};
    const double atol = std::max(1e-6, std::ldexp(static_cast<double>(p.cols()), -20));
    switch (p.dtype()) {
      case DType::kFloat16:
        return {DType::kFloat16, 1e-3, atol};
      case DType::kBFloat16:
        return {DType::kBFloat16, 8e-3, atol};
      default:
        return {DType::kFloat32, 1e-5, atol};
    }
  }

  std::vector<std::pair<std::string, std::string>> default_suite() const override {
    static const char* const kCases[][5] = {
        // op, dtype, rows, cols, x's offset in elements (a view one element into its allocation: "_x+1")
        {"sum", "float32", "4096", "4096", "0"},   {"max", "float32", "4096", "4096", "0"},
        {"sum", "float16", "4096", "4096", "0"},   {"sum", "float32", "65536", "1024", "0"},
        {"max", "bfloat16", "65536", "1024", "0"}, {"sum", "float32", "1048576", "64", "0"},
        {"max", "float16", "1048576", "32", "0"},  {"sum", "float32", "8", "65536", "0"},
        {"max", "float16", "8", "65536", "0"},     {"sum", "float32", "1024", "65536", "0"},
        {"sum", "bfloat16", "1024", "65536", "0"}, {"max", "float32", "1024", "65536", "0"},
        // Rows of an odd length (issue 19): every row starts at another offset within a 16-byte pack, as
        // GPT-2's 50257-word logits do.
        {"sum", "float16", "4096", "50257", "0"},  {"max", "float32", "65536", "1001", "0"},
        // x one element into its allocation (issue 19): every row starts off the pack by the same amount, a class
        // tuned apart (align = the element size).
        {"sum", "float32", "4096", "4096", "1"},   {"sum", "float16", "4096", "4096", "1"},
    };
    std::vector<std::pair<std::string, std::string>> cases;
    for (const auto& c : kCases) {
      const bool view = std::string_view(c[4]) != "0";
      const std::string align = view ? std::to_string(dtype_size(parse_dtype(c[1]))) : "";
      cases.emplace_back(std::string("reduce_rows_") + c[0] + "_" + c[1] + "_" + c[2] + "x" + c[3] +
                             (view ? std::string("_x+") + c[4] : ""),
                         (view ? "align=" + align + ";" : std::string()) + "cols=" + c[3] + ";dtype=" + c[1] +
                             ";op=" + c[0] + ";rows=" + c[2]);
    }
    return cases;
  }

 private:
  Space space_;
};

}  // namespace

bool rows_share_alignment(DType dtype, std::int64_t rows, std::int64_t cols) noexcept {
  return rows <= 1 || (cols * static_cast<std::int64_t>(dtype_size(dtype))) % 16 == 0;
}

ReduceRowsProblem::ReduceRowsProblem(DType dtype, ReduceOp op, std::int64_t rows, std::int64_t cols,
                                     std::uint8_t align)
    : dtype_(dtype), op_(op), rows_(rows), cols_(cols), align_(align) {
  if (!supported(dtype))
    throw InvalidArgument("reduce_rows: dtype " + std::string(dtype_name(dtype)) +
                          " is not supported; use float32, float16 or bfloat16");
  if (rows < 0) throw InvalidArgument("reduce_rows: rows is negative (" + n(rows) + ")");
  if (cols < 0) throw InvalidArgument("reduce_rows: cols is negative (" + n(cols) + ")");
  if (rows > kMaxRows) throw InvalidArgument("reduce_rows: rows " + n(rows) + " exceeds 2^31 - 1");
  if (cols > kMaxCols)
    throw InvalidArgument("reduce_rows: cols " + n(cols) +
                          " exceeds 2^30; reduce a reshaped view in two steps");
  if (op == ReduceOp::kMax && cols == 0)
    throw InvalidArgument(
        "reduce_rows: max over rows of 0 elements has no value (torch.amax refuses it too)");
  if (align != 16) {
    const auto es = static_cast<int>(dtype_size(dtype));
    if (!valid_alignment_class(align, dtype_size(dtype)))
      throw InvalidArgument("reduce_rows: align " + n(align) + " is not an alignment class of " +
                            std::string(dtype_name(dtype)) + " (" + n(es) + ", ... 8 bytes; 16 when aligned)");
    if (!rows_share_alignment(dtype, rows, cols))
      throw InvalidArgument("reduce_rows: align " + n(align) + " for rows of " + n(cols) + " " +
                            std::string(dtype_name(dtype)) + " elements: a pitch that is not a multiple of 16 "
                            "bytes starts the rows at every offset whatever x's alignment; drop align");
  }
}

int ReduceRowsProblem::max_pack() const noexcept {
  return 16 / element_size();
}

std::string_view reduce_op_name(ReduceOp op) noexcept {
  return op == ReduceOp::kMax ? "max" : "sum";
}

std::string ReduceRowsProblem::signature() const {
  return (align_ < 16 ? "align=" + n(align_) + ";" : std::string()) + "cols=" + n(cols_) +
         ";dtype=" + std::string(dtype_name(dtype_)) + ";op=" + std::string(reduce_op_name(op_)) + ";rows=" + n(rows_);
}

std::string ReduceRowsProblem::group() const {
  return std::string(dtype_name(dtype_)) + "|op=" + std::string(reduce_op_name(op_));
}

std::vector<double> ReduceRowsProblem::features() const {
  return {std::log2(static_cast<double>(rows_) + 1.0), std::log2(static_cast<double>(cols_) + 1.0)};
}

double ReduceRowsProblem::bytes_moved() const {
  return (static_cast<double>(rows_) * static_cast<double>(cols_) + static_cast<double>(rows_)) *
         element_size();
}

const Family& reduce_rows_family() {
  static const ReduceRowsFamily family;
  return family;
}

}  // namespace jitune::templates::reduce_rows
