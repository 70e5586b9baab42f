// Scatter-add family: problems, space and constraints, heuristic default, instantiation, launch geometry,
// kernel arguments, random workloads (indices: a random permutation folded onto the rows, so every row
// receives the same number of sources to within one) and the CPU reference in double.
#include "templates/scatter_add/scatter_add.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <thread>

#include "templates/host_float.hpp"
#include "templates/host_parallel.hpp"

namespace jitune::templates::scatter_add {
namespace {

constexpr std::int64_t kPlain = 0, kFast = 1, kPacked = 2;

bool float_type(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16;
}
bool index_type(DType d) {
  return d == DType::kInt32 || d == DType::kInt64;
}

// Random values with magnitude in [0.25, 4) and random sign (never zero), stream `stream` of `seed`.
void fill_random(DType dtype, std::vector<std::byte>& buf, std::uint64_t n, std::uint64_t seed) {
  buf.resize(n * dtype_size(dtype));
  fill_random_nonzero(dtype, buf.data(), n, seed);
}

// A bijection of [0, n): a 4-round Feistel network on the next even power of two, cycle-walking back into
// range.
class Permutation {
 public:
  Permutation(std::uint64_t n, std::uint64_t seed) : n_(n) {
    int bits = 2;
    while ((std::uint64_t{1} << bits) < n) ++bits;
    half_ = (bits + 1) / 2;
    for (int r = 0; r < 4; ++r) keys_[r] = mix64(seed + 0x51ed2701u * static_cast<std::uint64_t>(r + 1));
  }
  std::uint64_t operator()(std::uint64_t x) const {
    do x = round_trip(x);
    while (x >= n_);
    return x;
  }

 private:
  std::uint64_t round_trip(std::uint64_t x) const {
    const std::uint64_t mask = (std::uint64_t{1} << half_) - 1;
    std::uint64_t left = x >> half_, right = x & mask;
    for (std::uint64_t key : keys_) {
      const std::uint64_t f = mix64(right ^ key) & mask;
      const std::uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    return (left << half_) | right;
  }
  std::uint64_t n_;
  int half_ = 1;
  std::uint64_t keys_[4] = {};
};

std::int64_t parse_count(const std::map<std::string, std::string>& options, const char* key) {
  auto it = options.find(key);
  if (it == options.end()) throw InvalidArgument(std::string("scatter_add problem: missing '") + key + "'");
  const std::string& text = it->second;
  std::int64_t v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0)
    throw InvalidArgument(std::string("scatter_add problem: ") + key + "='" + text +
                          "' is not a non-negative integer");
  return v;
}

double unit_roundoff(DType d) {
  switch (d) {
    case DType::kFloat16:
      return std::ldexp(1.0, -11);
    case DType::kBFloat16:
      return std::ldexp(1.0, -8);
    default:
      return std::ldexp(1.0, -24);
  }
}

class ScatterAddFamily final : public Family {
 public:
  ScatterAddFamily()
      : space_({
            {"atomic",
             {kPlain, kFast, kPacked},
             "index_add: 0 plain atomicAdd, 1 fast (a 16-bit add as a pair atomic with -0.0 beside it), 2 "
             "packed "
             "(two adjacent row elements per half2/bfloat162/float2 atomic); dot: 0"},
            {"workspace",
             {0, 1},
             "1: accumulate in a zeroed float workspace that the last block adds into the destination "
             "(16-bit "
             "dtypes, at most 2^20 destination elements); dot: always 1"},
            {"prereduce",
             {0, 1, 2},
             "index_add: 1 combines the lanes of a warp that add to one element first; 2 accumulates in "
             "float bins "
             "in shared memory (one slice of the destination per block row, at most 4 slices) and adds the "
             "touched "
             "bins once per block; dot: 0"},
            {"block", {128, 256, 512, 1024}, "threads per block"},
            {"items",
             {1, 2, 4, 8},
             "index_add: units each thread loads before issuing its atomics; dot: vectors per operand per "
             "step"},
            {"vec", {1, 2, 4, 8}, "dot: elements per vector load (<= 16 bytes); index_add: 1"},
        }) {}

  std::string_view name() const override { return "scatter_add"; }
  std::string_view template_name() const override { return "scatter_add/scatter_add.cuh"; }
  const Space& space() const override { return space_; }

  std::vector<ProblemOption> problem_options() const override {
    return {{"op", "index_add (the 1-D scatter_add is row_length 1) or dot"},
            {"dtype", "float32, float16 or bfloat16"},
            {"index", "index_add: index dtype, int32 or int64"},
            {"rows", "index_add: destination rows"},
            {"count", "index_add: index entries (= source rows)"},
            {"row_length", "index_add: elements per row (default 1)"},
            {"n", "dot: vector length"}};
  }

  std::unique_ptr<Problem> make_problem(const std::map<std::string, std::string>& options) const override {
    auto op_it = options.find("op");
    const std::string op = op_it == options.end() ? "index_add" : op_it->second;
    auto dtype_it = options.find("dtype");
    if (dtype_it == options.end()) throw InvalidArgument("scatter_add problem: missing 'dtype'");
    const DType dtype = parse_dtype(dtype_it->second);
    if (op == "dot") {
      for (const auto& [key, value] : options)
        if (key != "op" && key != "dtype" && key != "n")
          throw InvalidArgument("scatter_add dot problem: unknown option '" + key +
                                "'; options are op, dtype, n");
      return std::make_unique<ScatterAddProblem>(ScatterAddProblem::dot(dtype, parse_count(options, "n")));
    }
    if (op != "index_add")
      throw InvalidArgument("scatter_add problem: op='" + op + "' is unknown; use index_add or dot");
    for (const auto& [key, value] : options)
      if (key != "op" && key != "dtype" && key != "index" && key != "rows" && key != "count" &&
          key != "row_length")
        throw InvalidArgument("scatter_add index_add problem: unknown option '" + key +
                              "'; options are op, dtype, index, rows, count, row_length");
    auto index_it = options.find("index");
    const DType index = index_it == options.end() ? DType::kInt64 : parse_dtype(index_it->second);
    const std::int64_t row_length = options.count("row_length") ? parse_count(options, "row_length") : 1;
    return std::make_unique<ScatterAddProblem>(ScatterAddProblem::index_add(
        dtype, index, parse_count(options, "rows"), parse_count(options, "count"), row_length));
  }

  Config heuristic(const Problem& problem, const DeviceInfo& device) const override {
    const auto& p = static_cast<const ScatterAddProblem&>(problem);
    if (p.op() == Op::kDot)
      return Config{{"atomic", kPlain}, {"workspace", 1},
                    {"prereduce", 0},   {"block", 256},
                    {"items", 2},       {"vec", static_cast<std::int64_t>(16 / dtype_size(p.dtype()))}};
    Config c{{"atomic", kPlain}, {"workspace", 0}, {"prereduce", 0},
             {"block", 256},     {"items", 4},     {"vec", 1}};
    // Few destination elements: lanes of one warp often share a target.
    if (p.dst_elements() <= 1024) c.set("prereduce", 1);
    // A destination that fits in one or two shared-memory slices and several sources per element: accumulate
    // per block in shared memory, then add each touched element once per block (adjacent bins as pairs).
    if (p.dst_elements() > 1024 && block_slices(p) <= 2 &&
        p.count() * p.row_length() >= 8 * p.dst_elements() &&
        block_slice_elements(p) * 4 <= device.max_shared_per_block_optin) {
      c.set("prereduce", 2);
      c.set("block", 1024);
      c.set("items", 8);
      // Pairs of bins: half2 anywhere, bfloat162 and float2 natively from sm_90.
      if (p.dtype() == DType::kFloat16 || device.cc() >= 90)
        c.set("atomic", kPacked);
      else if (p.dtype() == DType::kBFloat16)
        c.set("atomic", kFast);
      return c;
    }
    if (p.dtype() != DType::kFloat32) {
      // bfloat16 pair atomics are compare-and-swap loops before sm_90: accumulate in float there.
      if (p.dtype() == DType::kBFloat16 && device.cc() < 90)
        c.set(p.workspace_possible() ? "workspace" : "atomic", 1);
      else
        c.set("atomic", p.row_length() >= 2 ? kPacked : kFast);
    }
    return c;
  }

  std::string check(const Problem& problem, const Config& config, const DeviceInfo& device) const override {
    const auto& p = static_cast<const ScatterAddProblem&>(problem);
    const std::int64_t atomic = config.at("atomic"), workspace = config.at("workspace"),
                       prereduce = config.at("prereduce"), block = config.at("block"), vec = config.at("vec");
    if (block > device.max_threads_per_block)
      return "block " + std::to_string(block) + " exceeds the device's " +
             std::to_string(device.max_threads_per_block) + " threads per block";
    if (p.dtype() == DType::kBFloat16 && device.cc() < 80) return "bfloat16 atomics need sm_80 or newer";
    if (p.op() == Op::kDot) {
      if (atomic != kPlain || workspace != 1 || prereduce != 0)
        return "dot sums in a float workspace without atomics on data: it takes atomic=0, workspace=1, "
               "prereduce=0";
      const std::int64_t bytes = vec * static_cast<std::int64_t>(dtype_size(p.dtype()));
      if (bytes > 16)
        return "vec " + std::to_string(vec) + " loads " + std::to_string(bytes) +
               " bytes; the widest vector load is 16 bytes";
      // Both operands' loads in flight take items * bytes / 2 registers; leave half of a thread's share.
      const std::int64_t budget = device.registers_per_block / block;
      if (config.at("items") * bytes / 2 > budget / 2)
        return "items " + std::to_string(config.at("items")) + " x " + std::to_string(bytes) +
               " bytes per operand need more than half of the " + std::to_string(budget) +
               " registers a thread of a " + std::to_string(block) + "-thread block has";
      return {};
    }
    if (vec != 1) return "vec is a dot parameter; index_add takes vec=1";
    const bool float_acc = p.dtype() == DType::kFloat32 || workspace == 1;
    if (workspace == 1 && p.dtype() == DType::kFloat32)
      return "a float32 destination accumulates in float already: workspace=1 is for float16 and bfloat16";
    if (workspace == 1 && !p.workspace_possible())
      return "the float workspace takes at most " + std::to_string(kMaxWorkspaceElements) +
             " destination elements (the last block adds it into the destination alone); this one has " +
             std::to_string(p.dst_elements());
    if (atomic == kFast && float_acc) return "for float accumulation the fast atomic is the plain atomic";
    if (prereduce == 2) {
      if (workspace == 1)
        return "the shared-memory pre-reduction accumulates in float already: it takes workspace=0";
      const std::int64_t slices = block_slices(p);
      if (slices > kMaxBlockSlices)
        return "the shared-memory pre-reduction would need " + std::to_string(slices) + " slices of " +
               std::to_string(kSliceElements) + " elements for " + std::to_string(p.dst_elements()) +
               " destination elements; at most " + std::to_string(kMaxBlockSlices) +
               " (each slice re-reads the index)";
      const std::int64_t bytes = block_slice_elements(p) * 4;
      if (bytes > device.max_shared_per_block_optin)
        return "the shared-memory pre-reduction needs " + std::to_string(bytes) +
               " bytes of shared memory; the device "
               "allows " +
               std::to_string(device.max_shared_per_block_optin);
    }
    if (atomic == kPacked && p.row_length() == 1 && prereduce != 2)
      return "packed atomics add two elements of one row; with row_length 1 they are the fast atomic (except "
             "for the "
             "bins of prereduce=2, which are adjacent elements)";
    if (atomic == kPacked && float_acc && device.cc() < 90) return "float2 atomics need sm_90 or newer";
    return {};
  }

  KernelSource source(const Problem& problem, const Config& config) const override {
    const auto& p = static_cast<const ScatterAddProblem&>(problem);
    const std::string type(dtype_cuda_type(p.dtype()));
    const std::string block = std::to_string(config.at("block")), items = std::to_string(config.at("items"));
    // Loop indices reach the element (unit) count plus one grid step; keep them below 2^31.
    const std::int64_t limit = (std::int64_t{1} << 30);
    if (p.op() == Op::kDot) {
      const std::string index = p.count() > limit ? "long long" : "int";
      return {"#include \"scatter_add/scatter_add.cuh\"\n",
              "jitune::sa::dot<" + type + ", " + block + ", " + items + ", " +
                  std::to_string(config.at("vec")) + ", " + index + ">"};
    }
    const std::int64_t units = units_per_row(p, config, 1);
    const std::string index = p.count() > limit / std::max<std::int64_t>(units, 1) ? "long long" : "int";
    return {
        "#include \"scatter_add/scatter_add.cuh\"\n",
        "jitune::sa::index_add<" + type + ", " + (p.index_dtype() == DType::kInt32 ? "int" : "long long") +
            ", " + std::to_string(config.at("atomic")) + ", " + (config.at("workspace") ? "true" : "false") +
            ", " + std::to_string(config.at("prereduce")) + ", " + block + ", " + items + ", " + index + ">"};
  }

  LaunchShape launch_shape(const Problem& problem, const Config& config,
                           const DeviceInfo& device) const override {
    const auto& p = static_cast<const ScatterAddProblem&>(problem);
    const std::int64_t block = config.at("block"), items = config.at("items");
    const std::int64_t resident = resident_blocks(device, block);
    LaunchShape s;
    s.block.x = static_cast<unsigned>(block);
    if (p.op() == Op::kDot) {
      const std::int64_t per_block = block * items * config.at("vec");
      const std::int64_t needed = std::max<std::int64_t>(1, (p.count() + per_block - 1) / per_block);
      s.grid.x = static_cast<unsigned>(std::min({needed, resident, std::int64_t{kMaxDotBlocks}}));
      return s;
    }
    // The most units a row can have (odd offsets add one); blocks past the end exit at once.
    const std::int64_t total = p.count() * units_per_row(p, config, 1);
    const std::int64_t needed = std::max<std::int64_t>(1, (total + block * items - 1) / (block * items));
    if (config.at("prereduce") == 2) {
      // Few, full blocks: each block's bins should see as many sources as possible before they are flushed.
      const std::int64_t slices = block_slices(p), bytes = block_slice_elements(p) * 4;
      const std::int64_t by_smem = std::max<std::int64_t>(1, device.max_shared_per_sm / (bytes + 1024));
      const std::int64_t per_sm =
          std::min(by_smem, std::max<std::int64_t>(1, device.max_threads_per_sm / block));
      s.grid.x = static_cast<unsigned>(
          std::min(needed, std::max<std::int64_t>(1, device.sm_count * per_sm / slices)));
      s.grid.y = static_cast<unsigned>(slices);
      s.shared_bytes = static_cast<unsigned>(bytes);
      return s;
    }
    // With the workspace every block ends with a fence (its atomics must drain before it reports done): one
    // wave of blocks, so that wait happens once per SM rather than once per wave.
    s.grid.x = static_cast<unsigned>(std::min(needed, config.at("workspace") ? resident : resident * 8));
    return s;
  }

  // Values in the order of the public wrappers: api (kIndexAddCall, kScatterAddCall, kDotCall), dtype, then
  // index_add: index dtype, dst_rows, index_count, src_rows, row_length; scatter_add: index dtype, dst_count,
  // index_count, src_count; dot: n.
  std::unique_ptr<Problem> problem_from_call(const CallArgs& args) const override {
    CallReader in(args);
    const auto api = static_cast<Api>(in.next());
    const DType dtype = in.next_dtype();
    if (api == Api::kDot) return std::make_unique<ScatterAddProblem>(ScatterAddProblem::dot(dtype, in.next()));
    const DType index_dtype = in.next_dtype();
    const std::int64_t rows = in.next(), count = in.next(), src_rows = in.next();
    const std::int64_t row_length = api == Api::kIndexAdd ? in.next() : 1;
    return std::make_unique<ScatterAddProblem>(
        ScatterAddProblem::call(api, dtype, index_dtype, rows, count, src_rows, row_length));
  }

  std::string_view op_name(const Problem& problem) const override {
    return api_name(static_cast<const ScatterAddProblem&>(problem).api());
  }

  // index_add / scatter_add: dst, index, src; dot: x, y, out.
  std::vector<BufferSpec> buffers(const Problem& problem) const override {
    const auto& p = static_cast<const ScatterAddProblem&>(problem);
    if (p.op() == Op::kDot)
      return {{"x", BufferRole::kIn, p.dtype(), {p.count()}, {}},
              {"y", BufferRole::kIn, p.dtype(), {p.count()}, {}},
              {"out", BufferRole::kOut, p.dtype(), {1}, {}}};
    BufferSpec index{"index", BufferRole::kIn, p.index_dtype(), {p.count()}, {}};
    index.index_bound = p.rows();
    return {{"dst", BufferRole::kInOut, p.dtype(), {p.rows(), p.row_length()}, {}},
            std::move(index),
            {"src", BufferRole::kIn, p.dtype(), {p.count(), p.row_length()}, {}}};
  }

  // Nothing to add is nothing to launch; the dot of empty vectors is 0.
  Shortcut shortcut(const Problem& problem) const override {
    const auto& p = static_cast<const ScatterAddProblem&>(problem);
    if (p.op() == Op::kDot) return p.count() == 0 ? Shortcut{Shortcut::Kind::kZero, 0, 2} : Shortcut{};
    if (p.count() == 0 || p.rows() == 0 || p.row_length() == 0) return {Shortcut::Kind::kNothing};
    return {};
  }

  // dot: slot log2(vec) of the widest vector x and y share; index_add kernels take any alignment.
  int variant(const Problem& problem, const Config& tuned, const Bindings& b) const override {
    const auto& p = static_cast<const ScatterAddProblem&>(problem);
    if (p.op() != Op::kDot) return 0;
    const DotAlignment a = dot_alignment(b.pointers[0], b.pointers[1], dtype_size(p.dtype()),
                                         static_cast<int>(tuned.at("vec")), p.count());
    return std::countr_zero(static_cast<unsigned>(a.vec));
  }

  Config variant_config(const Problem& problem, const Config& tuned, int slot, const DeviceInfo&) const override {
    Config c = tuned;
    if (static_cast<const ScatterAddProblem&>(problem).op() == Op::kDot) c.set("vec", std::int64_t{1} << slot);
    return c;
  }

  // dot: only the block counter at the end of the workspace must start at zero (every partial is written before
  // it is read); the float workspace of index_add starts all zero.
  LaunchPrep prep(const Problem& problem, const Config& config) const override {
    const auto& p = static_cast<const ScatterAddProblem&>(problem);
    LaunchPrep prep;
    if (p.op() == Op::kDot) {
      prep.workspace_bytes = p.workspace_bytes();
      prep.zero_begin = prep.workspace_bytes - 4;
      prep.zero_end = prep.workspace_bytes;
    } else if (config.at("workspace")) {
      prep.workspace_bytes = prep.zero_end = p.workspace_bytes();
    }
    return prep;
  }

  void kernel_args(const Problem& problem, const Config& config, const Bindings& b, KernelArgs& args) const override {
    const auto& p = static_cast<const ScatterAddProblem&>(problem);
    if (p.op() == Op::kDot) {
      const DotAlignment a = dot_alignment(b.pointers[0], b.pointers[1], dtype_size(p.dtype()),
                                           static_cast<int>(config.at("vec")), p.count());
      if (a.vec != config.at("vec"))  // variant() picked the config from these pointers
        throw Error("jitune internal error: dot buffers do not allow vec=" + std::to_string(config.at("vec")));
      push_dot_args(p, a, b.pointers[0], b.pointers[1], b.at(2), b.workspace, args);
      return;
    }
    push_index_add_args(p, config, b.at(0), b.pointers[1], b.pointers[2], b.workspace,
                        static_cast<float>(b.scalar(0, 1.0)), args);
  }

  Workload workload(const Problem& problem, std::uint64_t seed) const override {
    const auto& p = static_cast<const ScatterAddProblem&>(problem);
    Workload w;
    if (p.op() == Op::kDot) {
      w.inputs.resize(2);
      fill_random(p.dtype(), w.inputs[0], static_cast<std::uint64_t>(p.count()), seed * 2 + 1);
      fill_random(p.dtype(), w.inputs[1], static_cast<std::uint64_t>(p.count()), seed * 2 + 2);
      w.output_bytes = {dtype_size(p.dtype())};
      return w;
    }
    const auto count = static_cast<std::uint64_t>(p.count());
    w.inputs.resize(2);
    auto& index = w.inputs[0];
    const std::size_t isz = dtype_size(p.index_dtype());
    index.resize(count * isz);
    const Permutation perm(count, seed);
    const auto rows = static_cast<std::uint64_t>(p.rows());
    parallel_for(count, [&](std::uint64_t b, std::uint64_t e) {
      for (std::uint64_t i = b; i < e; ++i) {
        const std::uint64_t r = perm(i) % rows;
        if (isz == 4) {
          const auto v = static_cast<std::int32_t>(r);
          std::memcpy(index.data() + i * 4, &v, 4);
        } else {
          const auto v = static_cast<std::int64_t>(r);
          std::memcpy(index.data() + i * 8, &v, 8);
        }
      }
    });
    fill_random(p.dtype(), w.inputs[1], count * static_cast<std::uint64_t>(p.row_length()), seed * 3 + 1);
    std::vector<std::byte> initial;
    fill_random(p.dtype(), initial, static_cast<std::uint64_t>(p.dst_elements()), seed * 3 + 2);
    w.output_bytes = {initial.size()};
    w.initial_outputs = {std::move(initial)};
    return w;
  }

  std::vector<std::vector<std::byte>> reference(const Problem& problem, const Workload& w) const override {
    const auto& p = static_cast<const ScatterAddProblem&>(problem);
    std::vector<std::vector<std::byte>> out;
    if (p.op() == Op::kDot) {
      double sum = 0;
      for (std::int64_t i = 0; i < p.count(); ++i)
        sum += load_element(p.dtype(), w.inputs[0].data(), static_cast<std::uint64_t>(i)) *
               load_element(p.dtype(), w.inputs[1].data(), static_cast<std::uint64_t>(i));
      out.emplace_back(dtype_size(p.dtype()));
      store_element(p.dtype(), out.back().data(), 0, sum);
      return out;
    }
    const std::int64_t d = p.row_length();
    std::vector<double> acc(static_cast<std::size_t>(p.dst_elements()));
    for (std::size_t e = 0; e < acc.size(); ++e)
      acc[e] = load_element(p.dtype(), w.initial_outputs[0].data(), e);
    const bool i32 = p.index_dtype() == DType::kInt32;
    for (std::int64_t i = 0; i < p.count(); ++i) {
      std::int64_t r;
      if (i32) {
        std::int32_t v;
        std::memcpy(&v, w.inputs[0].data() + i * 4, 4);
        r = v;
      } else {
        std::memcpy(&r, w.inputs[0].data() + i * 8, 8);
      }
      for (std::int64_t c = 0; c < d; ++c)
        acc[static_cast<std::size_t>(r * d + c)] +=
            load_element(p.dtype(), w.inputs[1].data(), static_cast<std::uint64_t>(i * d + c));
    }
    out.emplace_back(acc.size() * dtype_size(p.dtype()));
    for (std::size_t e = 0; e < acc.size(); ++e) store_element(p.dtype(), out.back().data(), e, acc[e]);
    return out;
  }

  OutputCheck output_check(const Problem& problem, std::size_t) const override {
    const auto& p = static_cast<const ScatterAddProblem&>(problem);
    // Values of magnitude [0.25, 4): rms about 2.39 (a product of two: 5.69).
    if (p.op() == Op::kDot) return accumulation_check(p.dtype(), DType::kFloat32, p.count(), 5.69);
    // The workload gives every row ceil(count / rows) sources at most, plus the initial value.
    const std::int64_t per_row = (p.count() + p.rows() - 1) / p.rows() + 1;
    return accumulation_check(p.dtype(), p.dtype(), per_row, 2.39);
  }

  std::vector<std::pair<std::string, std::string>> default_suite() const override {
    std::vector<std::pair<std::string, std::string>> cases;
    auto index_add = [&](const std::string& dtype, std::int64_t count, std::int64_t rows, std::int64_t d) {
      const std::string name = "index_add_" + dtype + "_" + std::to_string(count) +
                               (d > 1 ? "x" + std::to_string(d) : "") + "_into_" + std::to_string(rows);
      cases.emplace_back(name, "count=" + std::to_string(count) + ";dtype=" + dtype +
                                   ";index=int64;op=index_add;row_length=" + std::to_string(d) +
                                   ";rows=" + std::to_string(rows));
    };
    const std::int64_t n = std::int64_t{1} << 24;
    for (const char* dtype : {"float32", "float16", "bfloat16"}) index_add(dtype, n, 65536, 1);
    // Contention sweep: 1, 2, 4, 16 and 64 sources per destination element.
    for (const char* dtype : {"float16", "float32"})
      for (std::int64_t per : {1, 2, 4, 16, 64}) index_add(dtype, n, n / per, 1);
    index_add("float16", n / 64, 16384, 64);
    for (const char* dtype : {"float16", "bfloat16"})
      cases.emplace_back(std::string("dot_") + dtype + "_" + std::to_string(n),
                         std::string("dtype=") + dtype + ";n=" + std::to_string(n) + ";op=dot");
    return cases;
  }

 private:
  Space space_;
};

}  // namespace

ScatterAddProblem ScatterAddProblem::index_add(DType dtype, DType index_dtype, std::int64_t rows,
                                               std::int64_t count, std::int64_t row_length) {
  if (!float_type(dtype))
    throw InvalidArgument("index_add: dtype " + std::string(dtype_name(dtype)) +
                          " is not supported; use float32, float16 or bfloat16");
  if (!index_type(index_dtype))
    throw InvalidArgument("index_add: index dtype " + std::string(dtype_name(index_dtype)) +
                          " is not supported; use int32 or int64");
  if (rows < 1)
    throw InvalidArgument("index_add: the destination needs at least one row, got " + std::to_string(rows));
  if (row_length < 1)
    throw InvalidArgument("index_add: row_length must be at least 1, got " + std::to_string(row_length));
  if (count < 0) throw InvalidArgument("index_add: index count " + std::to_string(count) + " is negative");
  constexpr std::int64_t kMaxElements = std::int64_t{1}
                                        << 48;  // far beyond any device, and no overflow below it
  if (rows > kMaxElements / row_length || count > kMaxElements / row_length)
    throw InvalidArgument("index_add: " + std::to_string(rows) + " or " + std::to_string(count) +
                          " rows of " + std::to_string(row_length) + " elements exceed 2^48 elements");
  ScatterAddProblem p;
  p.op_ = Op::kIndexAdd;
  p.dtype_ = dtype;
  p.index_dtype_ = index_dtype;
  p.rows_ = rows;
  p.count_ = count;
  p.row_length_ = row_length;
  return p;
}

std::string_view api_name(Api api) noexcept {
  switch (api) {
    case Api::kIndexAdd: return "index_add";
    case Api::kScatterAdd: return "scatter_add";
    case Api::kDot: return "dot";
  }
  return "scatter_add";
}

ScatterAddProblem ScatterAddProblem::call(Api api, DType dtype, DType index_dtype, std::int64_t rows,
                                          std::int64_t count, std::int64_t src_rows, std::int64_t row_length) {
  const std::string op(api_name(api));
  if (!float_type(dtype))
    throw InvalidArgument(op + ": dtype " + std::string(dtype_name(dtype)) +
                          " is not supported; use float32, float16 or bfloat16");
  if (!index_type(index_dtype))
    throw InvalidArgument(op + ": index dtype " + std::string(dtype_name(index_dtype)) +
                          " is not supported; use int32 or int64");
  const char* names[] = {api == Api::kIndexAdd ? "dst_rows" : "dst_count", "index_count",
                         api == Api::kIndexAdd ? "src_rows" : "src_count", "row_length"};
  const std::int64_t values[] = {rows, count, src_rows, row_length};
  for (int i = 0; i < 4; ++i)
    if (values[i] < 0)
      throw InvalidArgument(op + ": " + names[i] + " is negative (" + std::to_string(values[i]) + ")");
  if (api == Api::kIndexAdd && src_rows != count)
    throw InvalidArgument("index_add: src has " + std::to_string(src_rows) + " rows but index has " +
                          std::to_string(count) +
                          " entries; source row i goes to destination row index[i], so they must match");
  if (api == Api::kScatterAdd && count > src_rows)
    throw InvalidArgument("scatter_add: index has " + std::to_string(count) + " entries but src only " +
                          std::to_string(src_rows) + " elements; index may not be longer than src");
  // An empty call is valid and does nothing: keep its sizes as given (its buffers may be empty).
  ScatterAddProblem p = rows > 0 && row_length > 0 && count > 0
                            ? index_add(dtype, index_dtype, rows, count, row_length)
                            : ScatterAddProblem();
  p.op_ = Op::kIndexAdd;
  p.api_ = api;
  p.dtype_ = dtype;
  p.index_dtype_ = index_dtype;
  p.rows_ = rows;
  p.count_ = count;
  p.row_length_ = row_length;
  return p;
}

ScatterAddProblem ScatterAddProblem::dot(DType dtype, std::int64_t n) {
  if (!float_type(dtype))
    throw InvalidArgument("dot: dtype " + std::string(dtype_name(dtype)) +
                          " is not supported; use float16, bfloat16 or float32");
  if (n < 0) throw InvalidArgument("dot: n is negative (" + std::to_string(n) + ")");
  if (n > (std::int64_t{1} << 48))
    throw InvalidArgument("dot: length " + std::to_string(n) + " exceeds 2^48");
  ScatterAddProblem p;
  p.op_ = Op::kDot;
  p.api_ = Api::kDot;
  p.dtype_ = dtype;
  p.count_ = n;
  return p;
}

bool ScatterAddProblem::workspace_possible() const noexcept {
  if (op_ == Op::kDot) return true;
  return dtype_ != DType::kFloat32 && dst_elements() <= kMaxWorkspaceElements;
}

std::size_t ScatterAddProblem::workspace_bytes() const noexcept {
  if (op_ == Op::kDot) return (static_cast<std::size_t>(kMaxDotBlocks) + 1) * sizeof(float);
  return workspace_possible() ? (static_cast<std::size_t>(dst_elements()) + 1) * sizeof(float) : 0;
}

std::string ScatterAddProblem::signature() const {
  if (op_ == Op::kDot)
    return "dtype=" + std::string(dtype_name(dtype_)) + ";n=" + std::to_string(count_) + ";op=dot";
  return "count=" + std::to_string(count_) + ";dtype=" + std::string(dtype_name(dtype_)) +
         ";index=" + std::string(dtype_name(index_dtype_)) +
         ";op=index_add;row_length=" + std::to_string(row_length_) + ";rows=" + std::to_string(rows_);
}

std::string ScatterAddProblem::group() const {
  if (op_ == Op::kDot) return "dot|" + std::string(dtype_name(dtype_));
  return "index_add|" + std::string(dtype_name(dtype_)) + "|" + std::string(dtype_name(index_dtype_));
}

std::vector<double> ScatterAddProblem::features() const {
  auto l = [](std::int64_t v) { return std::log2(static_cast<double>(v) + 1.0); };
  if (op_ == Op::kDot) return {l(count_)};
  return {l(count_), l(rows_), l(row_length_)};
}

double ScatterAddProblem::bytes_moved() const {
  const auto es = static_cast<double>(dtype_size(dtype_));
  if (op_ == Op::kDot) return 2.0 * static_cast<double>(count_) * es + es;
  return static_cast<double>(count_) *
             (static_cast<double>(row_length_) * es + static_cast<double>(dtype_size(index_dtype_))) +
         static_cast<double>(dst_elements()) * es;
}

double ScatterAddProblem::flops() const {
  return op_ == Op::kDot ? 2.0 * static_cast<double>(count_)
                         : static_cast<double>(count_) * static_cast<double>(row_length_);
}

std::int64_t block_slices(const ScatterAddProblem& p) {
  return std::max<std::int64_t>(1, (p.dst_elements() + kSliceElements - 1) / kSliceElements);
}

std::int64_t block_slice_elements(const ScatterAddProblem& p) {
  const std::int64_t slices = block_slices(p);
  const std::int64_t slice = (p.dst_elements() + slices - 1) / slices;
  return (slice + 1) & ~std::int64_t{1};  // mirrors block_slice() in scatter_add.cuh
}

std::int64_t units_per_row(const ScatterAddProblem& p, const Config& config, int parity) {
  if (config.at("atomic") != kPacked || config.at("prereduce") == 2) return p.row_length();
  const std::int64_t d = p.row_length();
  const int acc_parity = config.at("workspace") ? 0 : parity;
  return (d % 2 == 0 && acc_parity == 0) ? d / 2 : d / 2 + 1;
}

void push_index_add_args(const ScatterAddProblem& p, const Config& config, void* dst, const void* index,
                         const void* src, void* workspace, float alpha, KernelArgs& args) {
  const int parity = static_cast<int>((reinterpret_cast<std::uintptr_t>(dst) / dtype_size(p.dtype())) & 1u);
  args.push(dst);
  args.push(index);
  args.push(src);
  args.push(config.at("workspace") ? workspace : nullptr);
  args.push(static_cast<long long>(p.rows()));
  args.push(static_cast<long long>(p.count()));
  args.push(static_cast<long long>(p.row_length()));
  args.push(static_cast<long long>(units_per_row(p, config, parity)));
  args.push(parity);
  args.push(alpha);
}

DotAlignment dot_alignment(const void* x, const void* y, std::size_t element_size, int max_vec,
                           std::int64_t n) noexcept {
  const auto ax = reinterpret_cast<std::uintptr_t>(x), ay = reinterpret_cast<std::uintptr_t>(y);
  for (int vec = max_vec; vec > 1; vec /= 2) {
    const std::uintptr_t bytes = static_cast<std::uintptr_t>(vec) * element_size;
    if (ax % bytes != ay % bytes || ax % element_size != 0) continue;
    const auto head = static_cast<std::int64_t>(((bytes - ax % bytes) % bytes) / element_size);
    return {vec, std::min(head, n)};
  }
  return {1, 0};
}

void push_dot_args(const ScatterAddProblem& p, const DotAlignment& a, const void* x, const void* y, void* out,
                   void* workspace, KernelArgs& args) {
  args.push(x);
  args.push(y);
  args.push(static_cast<long long>(p.count()));
  args.push(static_cast<long long>(a.head));
  args.push(out);
  args.push(workspace);
}

OutputCheck accumulation_check(DType dtype, DType accumulation, std::int64_t contributions, double rms) {
  const double u_acc = unit_roundoff(accumulation), u_out = unit_roundoff(dtype);
  const double sigma =
      u_acc * rms * static_cast<double>(std::max<std::int64_t>(contributions, 1)) / std::sqrt(6.0);
  OutputCheck c;
  c.dtype = dtype;
  c.rtol = 2 * u_out;
  c.atol = 12 * sigma + u_out * rms;
  return c;
}

const Family& scatter_add_family() {
  static const ScatterAddFamily family;
  return family;
}

}  // namespace jitune::templates::scatter_add
