// Elementwise family: space, constraints, heuristic default, instantiation, launch geometry, workload and
// CPU reference (the host expression evaluator).
#include "templates/elementwise/elementwise.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <thread>

#include "templates/host_float.hpp"
#include "templates/host_parallel.hpp"

namespace jitune::templates::elementwise {
namespace {

bool supported(DType d) { return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16; }

class ElementwiseFamily final : public Family {
 public:
  ElementwiseFamily()
      : space_({
            {"pack", {1, 2, 4, 8}, "elements per vector access; pack * element size <= 16 bytes"},
            {"block", {128, 256, 512, 1024}, "threads per block"},
            {"unroll", {1, 2, 4, 8}, "packs each thread loads before computing"},
            {"waves", {1, 2, 4, 8, 32, 256},
             "grid cap: at most waves x (blocks resident on the GPU at once); 256: in effect one tile per block"},
        }) {}

  std::string_view name() const override { return "elementwise"; }
  std::string_view template_name() const override { return "elementwise/elementwise.cuh"; }
  const Space& space() const override { return space_; }

  std::vector<ProblemOption> problem_options() const override {
    return {{"expr", "expression, e.g. 'z = x * y' (inputs: names read, in order of first appearance)"},
            {"dtype", "float32, float16 or bfloat16"},
            {"n", "element count"},
            {"align", "optional: alignment class in bytes of each pointer, inputs then output, e.g. '2,16,16' for "
                      "an input view one float16 element off (tunes that misaligned class)"}};
  }

  std::unique_ptr<Problem> make_problem(const std::map<std::string, std::string>& options) const override {
    for (const auto& [key, value] : options)
      if (key != "expr" && key != "dtype" && key != "n" && key != "align")
        throw InvalidArgument("elementwise problem: unknown option '" + key + "'; options are expr, dtype, n, align");
    auto get = [&](const char* key) -> const std::string& {
      auto it = options.find(key);
      if (it == options.end())
        throw InvalidArgument(std::string("elementwise problem: missing '") + key + "' (options: expr, dtype, n)");
      return it->second;
    };
    const std::string& n_text = get("n");
    std::int64_t n = -1;
    auto [end, ec] = std::from_chars(n_text.data(), n_text.data() + n_text.size(), n);
    if (ec != std::errc() || end != n_text.data() + n_text.size() || n < 0)
      throw InvalidArgument("elementwise problem: n='" + n_text + "' is not a non-negative integer");
    auto align = options.find("align");
    return std::make_unique<ElementwiseProblem>(*parse_expression_cached(get("expr")), parse_dtype(get("dtype")),
                                                n, align == options.end() ? std::vector<std::uint8_t>{}
                                                                          : parse_align(align->second));
  }

  Config heuristic(const Problem& problem, const DeviceInfo&) const override {
    const auto& p = static_cast<const ElementwiseProblem&>(problem);
    // OneFlow's defaults: 16-byte packs, 256 threads, grid capped at 32 waves.
    return Config{{"pack", static_cast<std::int64_t>(16 / dtype_size(p.dtype()))},
                  {"block", 256},
                  {"unroll", 1},
                  {"waves", 32}};
  }

  std::string check(const Problem& problem, const Config& config, const DeviceInfo& device) const override {
    const auto& p = static_cast<const ElementwiseProblem&>(problem);
    const std::int64_t bytes = config.at("pack") * static_cast<std::int64_t>(dtype_size(p.dtype()));
    if (bytes > 16) return "pack " + std::to_string(config.at("pack")) + " moves " + std::to_string(bytes) +
                           " bytes per access; the widest vector access is 16 bytes";
    if (config.at("block") > device.max_threads_per_block)
      return "block " + std::to_string(config.at("block")) + " exceeds the device's " +
             std::to_string(device.max_threads_per_block) + " threads per block";
    return {};
  }

  KernelSource source(const Problem& problem, const Config& config) const override {
    const auto& p = static_cast<const ElementwiseProblem&>(problem);
    std::string program = "#include \"elementwise/elementwise.cuh\"\n" + op_functor_source(p.expression());
    std::string name = "jitune::ew::elementwise<jitune_ew_op, " + std::string(dtype_cuda_type(p.dtype())) + ", " +
                       std::to_string(p.arity()) + ", " + std::to_string(config.at("pack")) + ", " +
                       std::to_string(config.at("block")) + ", " + std::to_string(config.at("unroll")) + ", " +
                       (needs_index64(p.n()) ? "long long" : "int") + ">";
    return {std::move(program), std::move(name)};
  }

  LaunchShape launch_shape(const Problem& problem, const Config& config, const DeviceInfo& device) const override {
    const auto& p = static_cast<const ElementwiseProblem&>(problem);
    const std::int64_t block = config.at("block"), pack = config.at("pack"), unroll = config.at("unroll");
    LaunchShape s = grid_stride_shape(p.n() / pack, block, block * unroll, config.at("waves"), device);
    s.programmatic = device.cc() >= 90;  // the kernel waits (griddepcontrol.wait) before touching memory
    return s;
  }

  std::unique_ptr<Problem> problem_from_call(const CallArgs& args) const override {
    CallReader in(args);
    const DType dtype = in.next_dtype();
    const std::int64_t n = in.next();
    return std::make_unique<ElementwiseProblem>(parse_expression(in.text()), dtype, n);
  }

  // The inputs in the expression's order, then the output.
  std::vector<BufferSpec> buffers(const Problem& problem) const override {
    const auto& p = static_cast<const ElementwiseProblem&>(problem);
    std::vector<BufferSpec> out;
    for (const std::string& name : p.expression().inputs)
      out.push_back({name, BufferRole::kIn, p.dtype(), {p.n()}, {}});
    BufferSpec output{p.expression().output, BufferRole::kOut, p.dtype(), {p.n()}, {}};
    output.in_place = true;  // each element is read and written by the same thread
    out.push_back(std::move(output));
    for (std::size_t i = 0; i < p.align().size(); ++i) out[i].placement = p.align()[i];
    return out;
  }

  // Each misaligned class is a problem of its own: the realigning kernel runs every class correctly with the
  // aligned record's config, but the fastest pack, unroll and block differ once inputs need two loads a pack.
  std::unique_ptr<Problem> with_alignment(const Problem& problem,
                                          std::span<const std::uint8_t> classes) const override {
    const auto& p = static_cast<const ElementwiseProblem&>(problem);
    if (classes.size() != static_cast<std::size_t>(p.arity()) + 1) return nullptr;
    bool full = true;
    for (std::uint8_t c : classes) full = full && c >= 16;
    if (full) return nullptr;
    std::vector<std::uint8_t> align(classes.begin(), classes.end());
    for (auto& c : align) c = std::min<std::uint8_t>(c, 16);
    return std::make_unique<ElementwiseProblem>(p.expression(), p.dtype(), p.n(), std::move(align));
  }

  Shortcut shortcut(const Problem& problem) const override {
    if (static_cast<const ElementwiseProblem&>(problem).n() == 0) return {Shortcut::Kind::kNothing};
    return {};
  }

  // Every pointer alignment runs the tuned pack: a shared misalignment is peeled by a scalar head, a mixed one
  // realigned in registers (plan_vectors), so no call needs a narrower variant.
  void kernel_args(const Problem& problem, const Config& config, const Bindings& b, KernelArgs& args) const override {
    const auto& p = static_cast<const ElementwiseProblem&>(problem);
    const std::size_t arity = static_cast<std::size_t>(p.arity());
    const VectorPlan plan = plan_vectors(b.pointers.first(arity), b.pointers[arity], dtype_size(p.dtype()),
                                         static_cast<int>(config.at("pack")), p.n());
    // ew::Params<T, arity>: out, in[arity], n, head, packs, shifts as 8-byte fields, no padding, one argument.
    std::uint64_t words[5 + kMaxInputs];
    std::size_t k = 0;
    words[k++] = reinterpret_cast<std::uintptr_t>(b.pointers[arity]);
    for (std::size_t i = 0; i < arity; ++i) words[k++] = reinterpret_cast<std::uintptr_t>(b.pointers[i]);
    words[k++] = static_cast<std::uint64_t>(p.n());
    words[k++] = static_cast<std::uint64_t>(plan.head);
    words[k++] = static_cast<std::uint64_t>(plan.packs);
    words[k++] = plan.shifts;
    args.push_raw(words, k * sizeof(std::uint64_t), 8);
  }

  Workload workload(const Problem& problem, std::uint64_t seed) const override {
    const auto& p = static_cast<const ElementwiseProblem&>(problem);
    const std::size_t es = dtype_size(p.dtype());
    Workload w;
    w.inputs.resize(p.arity());
    for (int a = 0; a < p.arity(); ++a) {
      auto& buf = w.inputs[a];
      buf.resize(static_cast<std::size_t>(p.n()) * es);
      // Never zero, so comparisons take both branches; one stream of the seed per input.
      fill_random_nonzero(p.dtype(), buf.data(), static_cast<std::uint64_t>(p.n()),
                          seed * 1000003u + static_cast<std::uint64_t>(a));
    }
    w.output_bytes = {static_cast<std::size_t>(p.n()) * es};
    return w;
  }

  std::vector<std::vector<std::byte>> reference(const Problem& problem, const Workload& w) const override {
    const auto& p = static_cast<const ElementwiseProblem&>(problem);
    const Evaluator eval(p.expression());
    std::vector<std::byte> out(static_cast<std::size_t>(p.n()) * dtype_size(p.dtype()));
    parallel_for(static_cast<std::uint64_t>(p.n()), [&](std::uint64_t b, std::uint64_t e) {
      double v[kMaxInputs];
      for (std::uint64_t i = b; i < e; ++i) {
        for (int a = 0; a < p.arity(); ++a) v[a] = load_element(p.dtype(), w.inputs[a].data(), i);
        // The device computes in float: round the inputs' float math result once to the element type.
        store_element(p.dtype(), out.data(), i, static_cast<float>(eval(v)));
      }
    });
    return {std::move(out)};
  }

  OutputCheck output_check(const Problem& problem, std::size_t) const override {
    return expression_output_check(static_cast<const ElementwiseProblem&>(problem).dtype());
  }

  std::vector<std::pair<std::string, std::string>> default_suite() const override {
    std::vector<std::pair<std::string, std::string>> cases;
    for (const char* dtype : {"float32", "float16"})
      for (const char* n : {"134217728", "1048576"})
        cases.emplace_back(std::string("mul_") + dtype + "_" + n,
                           std::string("dtype=") + dtype + ";expr=z = x * y;n=" + n);
    for (const char* dtype : {"float32", "float16"})
      cases.emplace_back(std::string("fma_") + dtype + "_134217728",
                         std::string("dtype=") + dtype + ";expr=out = a * b + c;n=134217728");
    // Misaligned views (issue 19), one alignment class each: the name says which pointers sit how many elements
    // past a 256-byte boundary (jitune_bench places them so), the signature the classes that follows.
    const std::pair<const char*, const char*> views[] = {
        {"mul_float16_134217728_x+1", "align=2,16,16;dtype=float16;expr=z = x * y;n=134217728"},
        {"mul_float16_134217728_x+2", "align=4,16,16;dtype=float16;expr=z = x * y;n=134217728"},
        {"mul_float16_134217728_all+1", "align=2,2,2;dtype=float16;expr=z = x * y;n=134217728"},
        {"mul_float16_134217728_x+1_y+3", "align=2,2,16;dtype=float16;expr=z = x * y;n=134217728"},
        {"mul_float32_134217728_x+1", "align=4,16,16;dtype=float32;expr=z = x * y;n=134217728"},
        {"mul_float16_1048576_x+1", "align=2,16,16;dtype=float16;expr=z = x * y;n=1048576"},
        {"fma_float16_134217728_a+1", "align=2,16,16,16;dtype=float16;expr=out = a * b + c;n=134217728"},
    };
    for (const auto& [name, signature] : views) cases.emplace_back(name, signature);
    return cases;
  }

 private:
  Space space_;
};

}  // namespace

ElementwiseProblem::ElementwiseProblem(Expression expression, DType dtype, std::int64_t n,
                                       std::vector<std::uint8_t> align)
    : expression_(std::move(expression)), dtype_(dtype), n_(n), align_(std::move(align)) {
  if (!supported(dtype))
    throw InvalidArgument("elementwise: dtype " + std::string(dtype_name(dtype)) +
                          " is not supported; use float32, float16 or bfloat16");
  if (n < 0) throw InvalidArgument("elementwise: element count " + std::to_string(n) + " is negative");
  if (align_.empty()) return;
  const std::size_t buffers = expression_.inputs.size() + 1;
  if (align_.size() != buffers)
    throw InvalidArgument("elementwise: align gives " + std::to_string(align_.size()) + " alignment classes for " +
                          std::to_string(buffers) + " buffers; give one per input (in order) and one for the output");
  bool full = true;
  for (std::uint8_t c : align_) {
    if (!valid_alignment_class(c, dtype_size(dtype)))
      throw InvalidArgument("elementwise: alignment class " + std::to_string(c) + " must be a power of two from " +
                            std::to_string(dtype_size(dtype)) + " (one " + std::string(dtype_name(dtype)) +
                            " element) to 16 bytes");
    full = full && c == 16;
  }
  if (full) align_.clear();  // every pointer aligned: the plain problem
}

std::string ElementwiseProblem::signature() const {
  std::string align;
  for (std::uint8_t c : align_) align += (align.empty() ? "align=" : ",") + std::to_string(c);
  return (align.empty() ? "" : align + ";") + "dtype=" + std::string(dtype_name(dtype_)) +
         ";expr=" + expression_.canonical + ";n=" + std::to_string(n_);
}

std::vector<std::uint8_t> parse_align(const std::string& text) {
  std::vector<std::uint8_t> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t end = std::min(text.find(',', pos), text.size());
    int value = -1;
    auto [ptr, ec] = std::from_chars(text.data() + pos, text.data() + end, value);
    if (ec != std::errc() || ptr != text.data() + end || value < 1 || value > 16)
      throw InvalidArgument("elementwise problem: align='" + text + "' is not a comma-separated list of alignment "
                            "classes in bytes (1, 2, 4, 8 or 16), one per input and one for the output");
    out.push_back(static_cast<std::uint8_t>(value));
    pos = end + 1;
  }
  return out;
}

std::string ElementwiseProblem::group() const {
  return std::string(dtype_name(dtype_)) + "|arity=" + std::to_string(arity());
}

std::vector<double> ElementwiseProblem::features() const {
  std::uint8_t smallest = 16;
  for (std::uint8_t c : align_) smallest = std::min(smallest, c);
  return {std::log2(static_cast<double>(n_) + 1.0), std::log2(static_cast<double>(smallest))};
}

double ElementwiseProblem::bytes_moved() const {
  return static_cast<double>(n_) * static_cast<double>(dtype_size(dtype_)) * (arity() + 1);
}

VectorPlan plan_vectors(std::span<const void* const> inputs, const void* out, std::size_t element_size, int pack,
                        std::int64_t n) noexcept {
  VectorPlan plan;
  plan.head = n;  // everything scalar unless the pointers allow packs
  if (pack <= 1) return {0, n, 0};
  const auto bytes = static_cast<std::uintptr_t>(pack) * element_size;
  const std::uintptr_t out_mis = reinterpret_cast<std::uintptr_t>(out) % bytes;
  if (out_mis % element_size != 0) return plan;
  const auto head = static_cast<std::int64_t>(((bytes - out_mis) % bytes) / element_size);
  std::uint64_t shifts = 0;
  for (std::size_t a = 0; a < inputs.size(); ++a) {
    const std::uintptr_t mis = (reinterpret_cast<std::uintptr_t>(inputs[a]) +
                                static_cast<std::uintptr_t>(head) * element_size) % bytes;
    if (mis % element_size != 0) return plan;
    shifts |= static_cast<std::uint64_t>(mis / element_size) << (4 * a);
  }
  // A shifted input's first pair of packs starts before its pointer: start one pack later.
  plan.head = std::min(n, shifts != 0 ? head + pack : head);
  std::int64_t packs = (n - plan.head) / pack;
  for (std::size_t a = 0; a < inputs.size(); ++a) {
    const int s = static_cast<int>((shifts >> (4 * a)) & 15u);
    // The pair of pack i ends at head - s + (i + 2) * pack <= n.
    if (s != 0) packs = std::min(packs, (n - plan.head + s) / pack - 1);
  }
  plan.packs = std::max<std::int64_t>(packs, 0);
  plan.shifts = plan.packs > 0 ? shifts : 0;
  return plan;
}

OutputCheck expression_output_check(DType dtype) noexcept {
  switch (dtype) {
    case DType::kFloat16: return {DType::kFloat16, 1e-3, 1e-4};    // one half ulp is 2^-10 relative
    case DType::kBFloat16: return {DType::kBFloat16, 8e-3, 1e-3};  // one bf16 ulp is 2^-7 relative
    default: return {DType::kFloat32, 1e-5, 1e-6};
  }
}

std::string op_functor_source(const Expression& e) {
  std::string out = "struct jitune_ew_op {\n"
                    "  __device__ __forceinline__ float operator()(const float* jitune_v) const {\n";
  for (std::size_t i = 0; i < e.inputs.size(); ++i)
    out += "    float " + e.inputs[i] + " = jitune_v[" + std::to_string(i) + "];\n";
  if (std::find(e.inputs.begin(), e.inputs.end(), e.output) == e.inputs.end()) out += "    float " + e.output + ";\n";
  out += "#line 1 \"expression\"\n    " + e.canonical + ";\n    return " + e.output + ";\n  }\n};\n";
  return out;
}

bool needs_index64(std::int64_t n) noexcept {
  // Loop indices reach about 2n + one tile past the end; keep them below 2^31.
  return n > (std::int64_t{1} << 30) - (std::int64_t{1} << 16);
}

const Family& elementwise_family() {
  static const ElementwiseFamily family;
  return family;
}

}  // namespace jitune::templates::elementwise
