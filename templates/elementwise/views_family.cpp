// The elementwise_view family: an expression over operands with their own shapes and strides (views.hpp plans
// them, views.cuh runs them). The layout class is part of the problem: a bias row, a sliced view and a permuted
// input are different problems, tuned apart. Same-shaped contiguous calls stay with the elementwise family.
#include <bit>
#include <charconv>
#include <cstring>
#include <cmath>
#include <numeric>

#include "templates/elementwise/elementwise.hpp"
#include "templates/elementwise/views.hpp"
#include "templates/host_float.hpp"

namespace jitune::templates::elementwise {
namespace {

constexpr std::size_t kMaxViewDims = 8;

std::vector<std::int64_t> parse_list(std::string_view text, std::string_view what) {
  std::vector<std::int64_t> out;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || end != item.data() + item.size() || item.empty())
      throw InvalidArgument("elementwise_view problem: " + std::string(what) + " entry '" + std::string(item) +
                            "' is not an integer");
    out.push_back(v);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

// The value a scalar input takes where a call gives none (tuning, the CPU reference of a workload): nonzero, not a
// power of two, different per input.
double default_scalar(std::size_t input) { return 1.375 + 0.25 * static_cast<double>(input); }

class ViewProblem final : public Problem {
 public:
  ViewProblem(Expression expression, DType dtype, ViewPlan plan, unsigned scalars)
      : expression_(std::move(expression)), dtype_(dtype), plan_(std::move(plan)), scalars_(scalars) {
    if (dtype != DType::kFloat32 && dtype != DType::kFloat16 && dtype != DType::kBFloat16)
      throw InvalidArgument("elementwise_view: dtype " + std::string(dtype_name(dtype)) +
                            " is not supported; use float32, float16 or bfloat16");
    if (plan_.strides.size() != expression_.inputs.size() + 1)
      throw InvalidArgument("elementwise_view: '" + expression_.canonical + "' reads " +
                            std::to_string(expression_.inputs.size()) + " inputs but " +
                            std::to_string(plan_.strides.size() - 1) + " were given");
    if (plan_.shape.size() > kMaxViewDims)
      throw InvalidArgument("elementwise_view: " + std::to_string(plan_.shape.size()) +
                            " dims remain after merging; at most 8 are supported");
    if (scalars_ >> expression_.inputs.size())
      throw InvalidArgument("elementwise_view: scalars=" + std::to_string(scalars_) + " marks inputs the expression "
                            "does not have (bit i: input i)");
    if (std::popcount(scalars_) > static_cast<int>(CallArgs::kMaxScalars))
      throw InvalidArgument("elementwise_view: " + std::to_string(std::popcount(scalars_)) +
                            " scalar inputs; at most 4 (pass more as 0-d tensors)");
    for (std::size_t a = 0; a < expression_.inputs.size(); ++a)
      if (is_scalar(a))
        for (std::int64_t st : plan_.strides[a + 1])
          if (st != 0)
            throw InvalidArgument("elementwise_view: input " + std::to_string(a) + " is a scalar but its strides "
                                  "are not all 0");
  }
  bool is_scalar(std::size_t input) const noexcept { return (scalars_ >> input) & 1u; }
  unsigned scalars() const noexcept { return scalars_; }
  const Expression& expression() const noexcept { return expression_; }
  DType dtype() const noexcept { return dtype_; }
  const ViewPlan& plan() const noexcept { return plan_; }
  int arity() const noexcept { return static_cast<int>(expression_.inputs.size()); }

  std::string signature() const override {
    std::string key = plan_.key();
    if (scalars_ != 0) key.insert(key.find(";shape="), ";scalars=" + std::to_string(scalars_));
    return "dtype=" + std::string(dtype_name(dtype_)) + ";expr=" + expression_.canonical + ";" + key;
  }
  std::string group() const override {
    return std::string(dtype_name(dtype_)) + "|arity=" + std::to_string(arity()) +
           "|layout=" + std::string(layout_class_name(plan_.layout)) + "|dims=" + std::to_string(plan_.shape.size());
  }
  std::vector<double> features() const override {
    std::vector<double> out;
    for (std::int64_t s : plan_.shape) out.push_back(std::log2(static_cast<double>(s) + 1.0));
    return out;
  }
  // The output written once; each input's distinct elements read once (a broadcast input is read once, not once
  // per use).
  double bytes_moved() const override {
    double elements = static_cast<double>(plan_.elements);
    for (std::size_t i = 1; i < plan_.strides.size(); ++i) {
      if (is_scalar(i - 1)) continue;  // passed by value: no memory
      double distinct = plan_.elements == 0 ? 0 : 1;
      for (std::size_t d = 0; d < plan_.shape.size(); ++d)
        if (plan_.strides[i][d] != 0) distinct *= static_cast<double>(plan_.shape[d]);
      elements += distinct;
    }
    return elements * static_cast<double>(dtype_size(dtype_));
  }

 private:
  Expression expression_;
  DType dtype_;
  ViewPlan plan_;
  unsigned scalars_;
};

// Static shared memory a kernel may declare.
constexpr std::int64_t kStaticShared = 48 * 1024;

// The tiled kernel's shared memory for tile edge `tile`: one tile per transposed input.
std::int64_t tile_bytes(const ViewProblem& p, std::int64_t tile) {
  return std::popcount(view_transposed_inputs(p.plan())) * tile * tile *
         static_cast<std::int64_t>(dtype_size(p.dtype()));
}

// Why the tiled kernel cannot take `config` (pack, tile and block together), empty if it can.
std::string check_tiled(const ViewProblem& p, const Config& config) {
  const std::int64_t pack = config.at("pack"), tile = config.at("tile"), block = config.at("block");
  if (config.at("unroll") != 1) return "unroll is not used by the tiled kernel (inner_transpose): it takes unroll 1";
  const auto& shape = p.plan().shape;
  const std::int64_t rows = shape[static_cast<std::size_t>(view_transposed_dim(p.plan()))], cols = shape.back();
  if (rows % pack != 0 || cols % pack != 0)
    return "pack " + std::to_string(pack) + " needs the tile's rows (" + std::to_string(rows) + ") and columns (" +
           std::to_string(cols) + ") to be multiples of it";
  // Vectors along a dense dim stay aligned only where every other pitch of the operand is a multiple of pack.
  const auto& strides = p.plan().strides;
  const std::size_t t = static_cast<std::size_t>(view_transposed_dim(p.plan())), inner = shape.size() - 1;
  const unsigned transposed = view_transposed_inputs(p.plan());
  for (std::size_t o = 0; o < strides.size() && pack > 1; ++o) {
    const std::size_t dense = o > 0 && ((transposed >> (o - 1)) & 1u) ? t : inner;
    if (o > 0 && dense == inner && strides[o][inner] != 1) continue;  // read element by element
    for (std::size_t d = 0; d < shape.size(); ++d)
      if (d != dense && strides[o][d] % pack != 0)
        return "pack " + std::to_string(pack) + " needs the pitches of " +
               (o == 0 ? std::string("the output") : "input " + std::to_string(o - 1)) + " to be multiples of it (" +
               std::to_string(strides[o][d]) + " is not)";
  }
  const std::int64_t lanes = tile / pack;
  if (block % lanes != 0 || block / lanes > tile)
    return "block " + std::to_string(block) + " does not cover whole rows of a " + std::to_string(tile) +
           "-element tile with " + std::to_string(lanes) + " threads a row (at most " + std::to_string(tile * lanes) +
           " threads)";
  if (tile / (block / lanes) > 16)
    return "each thread would cover " + std::to_string(tile / (block / lanes)) + " tile rows (at most 16): use more "
           "threads, a wider pack or a smaller tile";
  if (tile_bytes(p, tile) > kStaticShared)
    return "tile " + std::to_string(tile) + " needs " + std::to_string(tile_bytes(p, tile)) +
           " bytes of shared memory for " + std::to_string(std::popcount(view_transposed_inputs(p.plan()))) +
           " transposed input(s), over the 48 KiB a block may declare";
  return {};
}

// Why the flat kernel cannot take `config`, empty if it can: it runs the rows kernel's plans, in packs that never
// cross a row, each staying aligned where its row start is.
std::string check_flat(const ViewProblem& p, const Config& config) {
  if (view_kernel(p.plan()) != ViewKernel::kRows)
    return "flat is for the rows kernel (rows and broadcast_column with rows of 128 elements or more); this problem (" +
           std::string(layout_class_name(p.plan().layout)) + ") takes flat 0";
  const std::int64_t pack = config.at("pack");
  const auto& shape = p.plan().shape;
  const auto& strides = p.plan().strides;
  if (shape.back() % pack != 0)
    return "flat with pack " + std::to_string(pack) + " needs rows that are whole packs (" +
           std::to_string(shape.back()) + " elements is not)";
  for (std::size_t o = 0; o < strides.size(); ++o) {
    if (strides[o].back() != 1) continue;  // constant along the row: one value a pack
    for (std::size_t d = 0; d + 1 < shape.size(); ++d)
      if (strides[o][d] % pack != 0)
        return "flat with pack " + std::to_string(pack) + " needs the row pitches of " +
               (o == 0 ? std::string("the output") : "input " + std::to_string(o - 1)) + " to be multiples of it (" +
               std::to_string(strides[o][d]) + " is not)";
  }
  return {};
}

class ElementwiseViewFamily final : public Family {
 public:
  ElementwiseViewFamily()
      : space_({
            {"block", {128, 256, 512, 1024}, "threads per block"},
            {"unroll", {1, 2, 4}, "elements (gather) or packs (rows) each thread loads before computing"},
            {"pack", {1, 2, 4, 8}, "rows and tiled kernels: elements per vector access, pack * element size <= 16 "
                                   "bytes"},
            {"tile", {32, 64, 128}, "tiled kernel (inner_transpose): tile edge in elements"},
            {"group", {1, 4, 16}, "tiled kernel: tile rows per band of the tile order (1: along the columns)"},
            {"waves", {1, 2, 4, 8, 32, 256},
             "grid cap: at most waves x (blocks resident on the GPU at once); 256: in effect one tile per block"},
            {"minblocks", {1, 4, 8}, "tiled kernel: blocks per SM the compiler must fit in registers (1: no bound)"},
            {"flat", {0, 1},
             "rows and broadcast_column: 1 runs the flat kernel (one run of packs over the output, each pack's row "
             "found by division), 0 the rows kernel (a block a row at a time)"},
        }) {}

  std::string_view name() const override { return "elementwise_view"; }
  std::string_view template_name() const override { return "elementwise/views.cuh"; }
  const Space& space() const override { return space_; }

  std::vector<ProblemOption> problem_options() const override {
    return {{"expr", "expression, e.g. 'y = x + b' (inputs: names read, in order of first appearance)"},
            {"dtype", "float32, float16 or bfloat16"},
            {"shape", "the output's sizes, outermost first, e.g. 8192,1024"},
            {"strides", "element strides over shape, the output's then each input's, '|' between operands, 0 "
                        "where an input is broadcast: e.g. 1024,1|1024,1|0,1"},
            {"layout", "optional: the layout class the shape and strides give (checked)"},
            {"scalars", "optional: bit i set when input i is a scalar passed with the call (its strides all 0)"}};
  }

  std::unique_ptr<Problem> make_problem(const std::map<std::string, std::string>& options) const override {
    for (const auto& [key, value] : options)
      if (key != "expr" && key != "dtype" && key != "shape" && key != "strides" && key != "layout" &&
          key != "scalars")
        throw InvalidArgument("elementwise_view problem: unknown option '" + key +
                              "'; options are expr, dtype, shape, strides, layout, scalars");
    auto get = [&](const char* key) -> const std::string& {
      auto it = options.find(key);
      if (it == options.end())
        throw InvalidArgument(std::string("elementwise_view problem: missing '") + key +
                              "' (options: expr, dtype, shape, strides)");
      return it->second;
    };
    const std::vector<std::int64_t> shape = parse_list(get("shape"), "shape");
    std::vector<View> views;
    std::string_view strides = get("strides");
    while (true) {
      const std::size_t bar = strides.find('|');
      views.push_back({shape, parse_list(strides.substr(0, bar), "strides")});
      if (bar == std::string_view::npos) break;
      strides.remove_prefix(bar + 1);
    }
    const View output = views.front();
    views.erase(views.begin());
    ViewPlan plan = plan_views(views, output);
    if (auto it = options.find("layout"); it != options.end() && it->second != layout_class_name(plan.layout))
      throw InvalidArgument("elementwise_view problem: layout=" + it->second + " but the shape and strides give " +
                            std::string(layout_class_name(plan.layout)));
    unsigned scalars = 0;
    if (auto it = options.find("scalars"); it != options.end()) {
      const std::vector<std::int64_t> mask = parse_list(it->second, "scalars");
      if (mask.size() != 1 || mask[0] <= 0 || mask[0] > 255)
        throw InvalidArgument("elementwise_view problem: scalars='" + it->second + "' is not a mask of 1 to 255");
      scalars = static_cast<unsigned>(mask[0]);
    }
    return std::make_unique<ViewProblem>(*parse_expression_cached(get("expr")), parse_dtype(get("dtype")),
                                         std::move(plan), scalars);
  }

  Config heuristic(const Problem& problem, const DeviceInfo&) const override {
    const auto& p = static_cast<const ViewProblem&>(problem);
    const ViewKernel kernel = view_kernel(p.plan());
    const auto widest = static_cast<std::int64_t>(16 / dtype_size(p.dtype()));
    if (kernel == ViewKernel::kTiled) {  // the widest vector the shape and pitches allow, 64 x 64 tiles, 256 threads
      for (std::int64_t pack = widest; pack >= 1; pack /= 2)
        for (std::int64_t tile : {64, 32})
          for (std::int64_t block : {256, 128, 512}) {
            Config c{{"block", block}, {"unroll", 1},    {"pack", pack},   {"tile", tile},
                     {"group", 1},     {"waves", 32},   {"minblocks", 1}, {"flat", 0}};
            if (check_tiled(p, c).empty()) return c;
          }
      return Config{{"block", 256}, {"unroll", 1},    {"pack", 1},      {"tile", 32},
                    {"group", 1},     {"waves", 32},   {"minblocks", 1}, {"flat", 0}};  // fits
    }
    return Config{{"block", 256},
                  {"unroll", kernel == ViewKernel::kGather ? 2 : 1},
                  {"pack", kernel == ViewKernel::kRows ? widest : 1},
                  {"tile", 32},
                  {"group", 1},
                  {"waves", 32},
                  {"minblocks", 1},
                  {"flat", 0}};
  }

  std::string check(const Problem& problem, const Config& config, const DeviceInfo& device) const override {
    const auto& p = static_cast<const ViewProblem&>(problem);
    const std::int64_t pack = config.at("pack");
    const ViewKernel kernel = view_kernel(p.plan());
    if (kernel == ViewKernel::kGather && pack != 1)
      return "pack " + std::to_string(pack) + " is for the rows and tiled kernels; this layout (" +
             std::string(layout_class_name(p.plan().layout)) + ") runs the gather kernel, which takes pack 1";
    if (kernel != ViewKernel::kTiled && (config.at("tile") != 32 || config.at("group") != 1 ||
                                         config.at("minblocks") != 1))
      return "tile, group and minblocks are for the tiled kernel (inner_transpose); this layout (" +
             std::string(layout_class_name(p.plan().layout)) + ") takes tile 32, group 1, minblocks 1";
    if (config.at("block") * config.at("minblocks") > device.max_threads_per_sm)
      return "minblocks " + std::to_string(config.at("minblocks")) + " blocks of " +
             std::to_string(config.at("block")) + " threads exceed the " + std::to_string(device.max_threads_per_sm) +
             " threads an SM holds";
    if (kernel == ViewKernel::kTiled)
      if (std::string why = check_tiled(p, config); !why.empty()) return why;
    if (config.at("flat") == 1)
      if (std::string why = check_flat(p, config); !why.empty()) return why;
    const std::int64_t bytes = pack * static_cast<std::int64_t>(dtype_size(p.dtype()));
    if (bytes > 16)
      return "pack " + std::to_string(pack) + " moves " + std::to_string(bytes) +
             " bytes per access; the widest vector access is 16 bytes";
    if (config.at("block") > device.max_threads_per_block)
      return "block " + std::to_string(config.at("block")) + " exceeds the device's " +
             std::to_string(device.max_threads_per_block) + " threads per block";
    return {};
  }

  KernelSource source(const Problem& problem, const Config& config) const override {
    const auto& p = static_cast<const ViewProblem&>(problem);
    return view_source(p.expression(), p.dtype(), p.plan(), config, p.scalars());
  }

  LaunchShape launch_shape(const Problem& problem, const Config& config, const DeviceInfo& device) const override {
    LaunchShape s = grid(static_cast<const ViewProblem&>(problem), config, device);
    s.programmatic = device.cc() >= 90;  // every view kernel waits (griddepcontrol.wait) before touching memory
    return s;
  }

  // Values: dtype, input count, scalar mask (bit i: input i is a scalar, its value among the call's scalars), then
  // each operand (the output first): its dims, sizes, strides (a scalar: 0 dims).
  std::unique_ptr<Problem> problem_from_call(const CallArgs& args) const override {
    CallReader in(args);
    const DType dtype = in.next_dtype();
    const std::int64_t inputs = in.next();
    if (inputs < 1 || inputs > kMaxInputs)
      throw InvalidArgument("elementwise_view: " + std::to_string(inputs) + " inputs; give 1 to 8");
    const std::int64_t mask = in.next();
    if (mask < 0 || mask >= (std::int64_t{1} << inputs))
      throw InvalidArgument("elementwise_view: scalar mask " + std::to_string(mask) + " marks inputs beyond the " +
                            std::to_string(inputs) + " given");
    if (std::popcount(static_cast<std::uint64_t>(mask)) != static_cast<int>(args.scalars().size()))
      throw InvalidArgument("elementwise_view: " + std::to_string(std::popcount(static_cast<std::uint64_t>(mask))) +
                            " inputs are scalars but the call passes " + std::to_string(args.scalars().size()) +
                            " scalar values");
    auto read_view = [&] {
      View v;
      v.shape = in.next_list();
      v.strides = in.next_list();
      return v;
    };
    const View output = read_view();
    std::vector<View> views;
    for (std::int64_t i = 0; i < inputs; ++i) views.push_back(read_view());
    return std::make_unique<ViewProblem>(parse_expression(in.text()), dtype, plan_views(views, output),
                                         static_cast<unsigned>(mask));
  }

  // The inputs in the expression's order, then the output, each with its merged strides.
  std::vector<BufferSpec> buffers(const Problem& problem) const override {
    const auto& p = static_cast<const ViewProblem&>(problem);
    const ViewPlan& plan = p.plan();
    std::vector<BufferSpec> out;
    for (std::size_t i = 0; i < p.expression().inputs.size(); ++i)
      if (!p.is_scalar(i))  // a scalar is a value of the call, not a buffer
        out.push_back({p.expression().inputs[i], BufferRole::kIn, p.dtype(), plan.shape, plan.strides[i + 1]});
    BufferSpec output{p.expression().output, BufferRole::kOut, p.dtype(), plan.shape, plan.strides[0]};
    // The output may be an input's very memory only where they step alike (each element read and written by one
    // thread); any other overlap is refused by the runtime.
    for (std::size_t i = 1; i < plan.strides.size(); ++i)
      output.in_place |= !p.is_scalar(i - 1) && plan.strides[i] == plan.strides[0];
    out.push_back(std::move(output));
    return out;
  }

  // The tiled kernel's vectors need every operand they move in vectors (the transposed inputs, the output, inputs
  // dense along the inner dim) aligned to the pack, pointer and pitches: a call whose buffers are not runs the tuned
  // config narrowed to the widest pack they allow (slot log2(pack)). The rows kernel checks alignment per row.
  int variant(const Problem& problem, const Config& tuned, const Bindings& b) const override {
    const auto& p = static_cast<const ViewProblem&>(problem);
    if (view_kernel(p.plan()) != ViewKernel::kTiled) return 0;
    const std::size_t es = dtype_size(p.dtype());
    std::int64_t pack = tuned.at("pack");
    const auto& strides = p.plan().strides;
    const std::size_t inner = p.plan().shape.size() - 1;
    const unsigned transposed = view_transposed_inputs(p.plan());
    auto narrow = [&](std::uint8_t alignment) {
      while (pack > 1 && static_cast<std::int64_t>(alignment) < pack * static_cast<std::int64_t>(es)) pack /= 2;
    };
    std::size_t buffer = 0;
    for (std::size_t a = 0; a < static_cast<std::size_t>(p.arity()); ++a) {
      if (p.is_scalar(a)) continue;
      if (((transposed >> a) & 1u) || strides[a + 1][inner] == 1) narrow(b.alignment[buffer]);
      ++buffer;
    }
    narrow(b.alignment[buffer]);  // the output
    return std::countr_zero(static_cast<std::uint64_t>(pack));
  }

  // Slot s: the tuned config with pack 2^s; the tile shrinks where the narrower vectors would leave a thread more
  // than 16 tile rows (or the block wider than a tile row).
  Config variant_config(const Problem& problem, const Config& tuned, int slot, const DeviceInfo&) const override {
    const auto& p = static_cast<const ViewProblem&>(problem);
    Config c = tuned;
    if (view_kernel(p.plan()) != ViewKernel::kTiled || slot == std::countr_zero(static_cast<std::uint64_t>(
                                                                     tuned.at("pack"))))
      return c;
    c.set("pack", std::int64_t{1} << slot);
    while (c.at("tile") > 32 && !check_tiled(p, c).empty()) c.set("tile", c.at("tile") / 2);
    return c;
  }

  Shortcut shortcut(const Problem& problem) const override {
    if (static_cast<const ViewProblem&>(problem).plan().elements == 0) return {Shortcut::Kind::kNothing};
    return {};
  }

  // ewv::ViewParams<T, arity, dims>: out, in[arity], n, shape[dims], stride[arity + 1][dims] as 8-byte fields,
  // then scalar[arity] as floats, padded to 8 bytes.
  void kernel_args(const Problem& problem, const Config&, const Bindings& b, KernelArgs& args) const override {
    const auto& p = static_cast<const ViewProblem&>(problem);
    const ViewPlan& plan = p.plan();
    const std::size_t arity = static_cast<std::size_t>(p.arity()), dims = plan.shape.size();
    std::uint64_t words[1 + kMaxInputs + 1 + kMaxViewDims * (kMaxInputs + 2) + kMaxInputs / 2];
    const std::size_t buffer_inputs = arity - static_cast<std::size_t>(std::popcount(p.scalars()));
    std::size_t k = 0;
    words[k++] = reinterpret_cast<std::uintptr_t>(b.pointers[buffer_inputs]);
    float scalar[kMaxInputs] = {};
    for (std::size_t i = 0, buffer = 0, value = 0; i < arity; ++i) {
      if (p.is_scalar(i)) {
        scalar[i] = static_cast<float>(b.scalar(value++, default_scalar(i)));
        words[k++] = 0;
      } else {
        words[k++] = reinterpret_cast<std::uintptr_t>(b.pointers[buffer++]);
      }
    }
    words[k++] = static_cast<std::uint64_t>(plan.elements);
    for (std::size_t d = 0; d < dims; ++d) words[k++] = static_cast<std::uint64_t>(plan.shape[d]);
    for (const auto& st : plan.strides)
      for (std::size_t d = 0; d < dims; ++d) words[k++] = static_cast<std::uint64_t>(st[d]);
    const std::size_t scalar_words = (arity + 1) / 2;
    std::memset(&words[k], 0, scalar_words * sizeof(std::uint64_t));
    std::memcpy(&words[k], scalar, arity * sizeof(float));
    k += scalar_words;
    args.push_raw(words, k * sizeof(std::uint64_t), 8);
  }

  Workload workload(const Problem& problem, std::uint64_t seed) const override {
    const auto& p = static_cast<const ViewProblem&>(problem);
    const std::vector<std::int64_t> extents = view_extents(p.plan());
    const std::size_t es = dtype_size(p.dtype());
    Workload w;
    for (int a = 0; a < p.arity(); ++a) {
      if (p.is_scalar(static_cast<std::size_t>(a))) continue;  // the default value, in kernel_args and reference
      std::vector<std::byte> buf(static_cast<std::size_t>(extents[a + 1]) * es);
      fill_random_nonzero(p.dtype(), buf.data(), static_cast<std::uint64_t>(extents[a + 1]),
                          seed * 1000003u + static_cast<std::uint64_t>(a));
      w.inputs.push_back(std::move(buf));
    }
    w.output_bytes = {static_cast<std::size_t>(extents[0]) * es};
    // An output with gaps (a strided or sliced view) starts from known values, so the check also proves the
    // kernel leaves every element outside the view as it was.
    if (extents[0] != p.plan().elements) {
      std::vector<std::byte> initial(w.output_bytes[0]);
      fill_random_nonzero(p.dtype(), initial.data(), static_cast<std::uint64_t>(extents[0]), seed * 1000003u + 999);
      w.initial_outputs.push_back(std::move(initial));
    }
    return w;
  }

  std::vector<std::vector<std::byte>> reference(const Problem& problem, const Workload& w) const override {
    const auto& p = static_cast<const ViewProblem&>(problem);
    std::vector<std::byte> out = w.initial_outputs.empty() ? std::vector<std::byte>(w.output_bytes[0])
                                                            : w.initial_outputs[0];
    // Every input at its index: scalars get an empty buffer (unread) and their default value.
    std::vector<const std::byte*> inputs;
    std::vector<double> values;
    for (std::size_t a = 0, buffer = 0; a < static_cast<std::size_t>(p.arity()); ++a) {
      inputs.push_back(p.is_scalar(a) ? nullptr : w.inputs[buffer++].data());
      values.push_back(default_scalar(a));
    }
    view_reference(p.expression(), p.dtype(), p.plan(), inputs, out, p.scalars(), values);
    return {std::move(out)};
  }

  OutputCheck output_check(const Problem& problem, std::size_t) const override {
    return expression_output_check(static_cast<const ViewProblem&>(problem).dtype());
  }

  // The fused chains of issue 21 (each operand as its merged view: the plan's shape and strides):
  //   view_permute_scale_bias: y = x.permute(0, 2, 1) * s + b, x (64, 1024, 1024) float16, s a 0-d tensor, b (1024,),
  //                            y laid out as PyTorch lays it out (x's memory order: b is one value per row)
  //   view_permute_scale_bias_contiguous: the same into a contiguous y (`.contiguous()`, or jitune.torch's out=): a
  //                            transpose in the same pass
  //   view_bias_add:           y = x + b, x (8192, 1024) float16, b (1024,)
  //   view_slice_mul:          y = a[:, 1:] * b, a (8192, 1025) float32 (its rows start at every alignment)
  //   view_broadcast3:         y = x * r + c, x (4096, 4096) float16, r (4096,) a row, c (4096, 1) a column
  std::vector<std::pair<std::string, std::string>> default_suite() const override {
    return {{"view_permute_scale_bias_float16_64x1024x1024",
             "dtype=float16;expr=y = x * s + b;layout=broadcast_column;shape=64,1024,1024;"
             "strides=1048576,1024,1|1048576,1024,1|0,0,0|0,1,0"},
            {"view_permute_scale_bias_contiguous_float16_64x1024x1024",
             "dtype=float16;expr=y = x * s + b;layout=inner_transpose;shape=64,1024,1024;"
             "strides=1048576,1024,1|1048576,1,1024|0,0,0|0,0,1"},
            {"view_bias_add_float16_8192x1024",
             "dtype=float16;expr=y = x + b;layout=rows;shape=8192,1024;strides=1024,1|1024,1|0,1"},
            {"view_slice_mul_float32_8192x1024",
             "dtype=float32;expr=y = a * b;layout=rows;shape=8192,1024;strides=1024,1|1025,1|1024,1"},
            {"view_broadcast3_float16_4096x4096",
             "dtype=float16;expr=y = x * r + c;layout=broadcast_column;shape=4096,4096;strides=4096,1|4096,1|0,1|1,0"}};
  }

 private:
  // The grid of the plan's kernel: block * unroll packs (flat) or elements (gather) per tile, whole rows per
  // block (rows), one tile per block and pass (tiled).
  static LaunchShape grid(const ViewProblem& p, const Config& config, const DeviceInfo& device) {
    const std::int64_t block = config.at("block"), unroll = config.at("unroll");
    if (view_kernel(p.plan()) == ViewKernel::kRows && config.at("flat") == 1)  // block * unroll packs per tile
      return grid_stride_shape(p.plan().elements / config.at("pack"), block, block * unroll, config.at("waves"),
                               device);
    if (view_kernel(p.plan()) == ViewKernel::kRows) {  // whole rows per block
      const std::int64_t rows = p.plan().elements / p.plan().shape.back();
      return grid_stride_shape(rows, block, 1, config.at("waves"), device);
    }
    if (view_kernel(p.plan()) == ViewKernel::kTiled) {  // one tile per block and pass
      const auto& shape = p.plan().shape;
      const std::int64_t t = view_transposed_dim(p.plan()), inner = static_cast<std::int64_t>(shape.size()) - 1;
      const std::int64_t edge = config.at("tile");
      std::int64_t tiles = ((shape[t] + edge - 1) / edge) * ((shape[inner] + edge - 1) / edge);
      for (std::int64_t d = 0; d < inner; ++d)
        if (d != t) tiles *= shape[d];
      return grid_stride_shape(tiles, block, 1, config.at("waves"), device);
    }
    return grid_stride_shape(p.plan().elements, block, block * unroll, config.at("waves"), device);
  }

  Space space_;
};

}  // namespace

const Family& elementwise_view_family() {
  static const ElementwiseViewFamily family;
  return family;
}

}  // namespace jitune::templates::elementwise
