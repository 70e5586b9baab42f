// Conv2d family: problem validation, space and constraints (shared memory, register estimate, unrolled code
// size), heuristic default, instantiation, launch geometry, random workload and the CPU reference (double
// sums).
#include "templates/conv2d/conv2d.hpp"

#include <jitune/ops/conv2d.hpp>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>

#include "templates/host_float.hpp"
#include "templates/host_parallel.hpp"

namespace jitune::templates::conv2d {
namespace {

constexpr std::int64_t kMaxUnrolledFmas = 4096;  // per input channel and thread: instruction-cache budget
constexpr std::int64_t kMaxRegisters = 255;
constexpr std::int64_t kMaxPrefetch = 24;  // double buffering: loads held in registers per thread

bool supported(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16;
}

std::int64_t round_up(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b * b;
}
std::int64_t vector_of(std::int64_t n) {
  return n % 4 == 0 ? 4 : n % 2 == 0 ? 2 : 1;
}

// Random values with magnitude in [0.25, 4) and random sign (never zero), `count` elements of `dtype`.
std::vector<std::byte> random_tensor(DType dtype, std::uint64_t count, std::uint64_t seed) {
  std::vector<std::byte> buf(count * dtype_size(dtype));
  parallel_for(count, 1, [&](std::uint64_t b, std::uint64_t e) {
    std::uint64_t state = seed ^ (b * 0x2545f4914f6cdd1dull);
    for (std::uint64_t i = b; i < e; ++i) {
      store_element(dtype, buf.data(), i, random_nonzero(splitmix(state)));
    }
  });
  return buf;
}

std::int64_t parse_int(const std::map<std::string, std::string>& options, const std::string& key,
                       std::int64_t fallback, bool required) {
  auto it = options.find(key);
  if (it == options.end()) {
    if (required)
      throw InvalidArgument("conv2d problem: missing '" + key +
                            "' (options: dtype, n, c, h, w, k, r, s, stride, padding, dilation, bias)");
    return fallback;
  }
  std::int64_t v = 0;
  const std::string& t = it->second;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size())
    throw InvalidArgument("conv2d problem: " + key + "='" + t + "' is not an integer");
  return v;
}

// A per-axis value: "<name>_h"/"<name>_w" override the square shorthand "<name>".
std::int64_t axis_value(const std::map<std::string, std::string>& options, const std::string& square,
                        const std::string& axis, std::int64_t fallback) {
  const std::int64_t both = parse_int(options, square, fallback, false);
  return parse_int(options, axis, both, false);
}

std::string dims_text(const std::array<std::int64_t, 4>& d) {
  return "{" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) + ", " +
         std::to_string(d[3]) + "}";
}

// The problem of a public call; the channel check names both tensors' shapes.
ConvProblem problem_of(const Conv2dParams& p, DType dtype, bool has_bias) {
  if (p.input[1] != p.weight[1])
    throw InvalidArgument("conv2d: x has " + std::to_string(p.input[1]) + " channels (input {N, C, H, W} = " +
                          dims_text(p.input) + ") but w expects " + std::to_string(p.weight[1]) +
                          " (weight {K, C, R, S} = " + dims_text(p.weight) +
                          "); the second dimension of input and weight must match");
  ConvProblem::Shape s;
  s.n = p.input[0], s.c = p.input[1], s.h = p.input[2], s.w = p.input[3];
  s.k = p.weight[0], s.r = p.weight[2], s.s = p.weight[3];
  s.stride_h = p.stride[0], s.stride_w = p.stride[1];
  s.pad_h = p.padding[0], s.pad_w = p.padding[1];
  s.dilation_h = p.dilation[0], s.dilation_w = p.dilation[1];
  s.bias = has_bias;
  return ConvProblem(dtype, s);
}

class ConvFamily final : public Family {
 public:
  ConvFamily()
      : space_({
            {"out_h", {1, 2, 4}, "output rows per thread"},
            {"out_w", {1, 2, 4}, "contiguous output columns per thread"},
            {"block_h", {1, 2, 4, 8, 16}, "thread rows per block (tile height = block_h * out_h)"},
            {"block_w", {8, 16, 32}, "thread columns per block (tile width = block_w * out_w)"},
            {"k_block",
             {1, 2, 3, 4, 6, 8, 12, 16},
             "output channels per block, all accumulated by each thread; "
             "divides K"},
            {"c_stage", {1, 2, 3, 4, 8}, "input channels per shared-memory stage; divides C"},
            {"load",
             {1, 2, 4, 8},
             "elements per global vector load of the input tile; load * element size <= 16"},
            {"double_buffer", {0, 1}, "1: load the next stage into registers while computing this one"},
            {"max_regs",
             {128, 168, 255},
             "register cap per thread (blocks per SM); 255: none; cap * threads <= 65536"},
        }) {}

  std::string_view name() const override { return "conv2d"; }
  std::string_view template_name() const override { return "conv2d/conv2d.cuh"; }
  const Space& space() const override { return space_; }
  // About 0.6 s of NVRTC per candidate on an H100 host, mostly the NVVM optimizer on the unrolled body.
  bool slow_compiles() const override { return true; }

  std::vector<ProblemOption> problem_options() const override {
    return {{"dtype", "float32, float16 or bfloat16"},
            {"n", "batch (default 1)"},
            {"c", "input channels"},
            {"h", "input height"},
            {"w", "input width"},
            {"k", "output channels"},
            {"r", "filter height"},
            {"s", "filter width (default r)"},
            {"stride", "stride, both axes (default 1)"},
            {"stride_h", "vertical stride"},
            {"stride_w", "horizontal stride"},
            {"padding", "zero padding, both axes (default 0)"},
            {"pad_h", "vertical zero padding"},
            {"pad_w", "horizontal zero padding"},
            {"dilation", "dilation, both axes (default 1)"},
            {"dilation_h", "vertical dilation"},
            {"dilation_w", "horizontal dilation"},
            {"bias", "1: add a bias per output channel (default 0)"}};
  }

  std::unique_ptr<Problem> make_problem(const std::map<std::string, std::string>& options) const override {
    static const char* const known[] = {"dtype", "n",     "c",        "h",          "w",          "k",
                                        "r",     "s",     "stride",   "stride_h",   "stride_w",   "padding",
                                        "pad_h", "pad_w", "dilation", "dilation_h", "dilation_w", "bias"};
    for (const auto& option : options)  // no structured binding: clang 14 cannot capture one in the lambda
      if (const std::string& key = option.first;
          std::find_if(std::begin(known), std::end(known), [&](const char* k) { return key == k; }) ==
          std::end(known))
        throw InvalidArgument(
            "conv2d problem: unknown option '" + key +
            "'; options are dtype, n, c, h, w, k, r, s, stride[_h|_w], padding / pad_h / pad_w, "
            "dilation[_h|_w], bias");
    auto dt = options.find("dtype");
    if (dt == options.end())
      throw InvalidArgument("conv2d problem: missing 'dtype' (float32, float16 or bfloat16)");
    ConvProblem::Shape s;
    s.n = parse_int(options, "n", 1, false);
    s.c = parse_int(options, "c", 0, true);
    s.h = parse_int(options, "h", 0, true);
    s.w = parse_int(options, "w", 0, true);
    s.k = parse_int(options, "k", 0, true);
    s.r = parse_int(options, "r", 0, true);
    s.s = parse_int(options, "s", s.r, false);
    s.stride_h = axis_value(options, "stride", "stride_h", 1);
    s.stride_w = axis_value(options, "stride", "stride_w", 1);
    s.pad_h = axis_value(options, "padding", "pad_h", 0);
    s.pad_w = axis_value(options, "padding", "pad_w", 0);
    s.dilation_h = axis_value(options, "dilation", "dilation_h", 1);
    s.dilation_w = axis_value(options, "dilation", "dilation_w", 1);
    const std::int64_t bias = parse_int(options, "bias", 0, false);
    if (bias != 0 && bias != 1)
      throw InvalidArgument("conv2d problem: bias must be 0 or 1, got " + std::to_string(bias));
    s.bias = bias == 1;
    return std::make_unique<ConvProblem>(parse_dtype(dt->second), s);
  }

  Config heuristic(const Problem& problem, const DeviceInfo& device) const override {
    const auto& p = static_cast<const ConvProblem&>(problem);
    const auto& s = p.shape();
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

  std::string check(const Problem& problem, const Config& config, const DeviceInfo& device) const override {
    const auto& p = static_cast<const ConvProblem&>(problem);
    std::string why = hard_check(p, config, device);
    if (!why.empty()) return why;
    // The tuned neighbourhood of the default: only where the default itself is legal (ordinary problems).
    const Config base = base_config(p, device);
    if (!hard_check(p, base, device).empty()) return {};
    return neighbourhood_check(config, base, device);
  }

  KernelSource source(const Problem& problem, const Config& config) const override {
    const auto& p = static_cast<const ConvProblem&>(problem);
    const auto& s = p.shape();
    std::string name = "jitune::conv::conv2d<" + std::string(dtype_cuda_type(p.dtype()));
    for (std::int64_t v : {s.c, s.k, s.r, s.s, s.stride_h, s.stride_w, s.dilation_h, s.dilation_w,
                           config.at("out_h"), config.at("out_w"), config.at("block_h"), config.at("block_w"),
                           config.at("k_block"), config.at("c_stage"), config.at("load"),
                           config.at("double_buffer"), config.at("max_regs"), std::int64_t{s.bias ? 1 : 0}})
      name += ", " + std::to_string(v);
    name += ">";
    return {"#include \"conv2d/conv2d.cuh\"\n", std::move(name)};
  }

  LaunchShape launch_shape(const Problem& problem, const Config& config, const DeviceInfo&) const override {
    const auto& p = static_cast<const ConvProblem&>(problem);
    const TileGeometry g = tile_geometry(p, config);
    const std::int64_t tiles = ((p.p() + g.tile_h - 1) / g.tile_h) * ((p.q() + g.tile_w - 1) / g.tile_w);
    LaunchShape shape;
    shape.grid.x = static_cast<unsigned>(tiles);
    shape.grid.y = static_cast<unsigned>(p.shape().k / config.at("k_block"));
    shape.grid.z = static_cast<unsigned>(std::clamp<std::int64_t>(p.shape().n, 1, 65535));
    shape.block.x = static_cast<unsigned>(g.threads);
    shape.shared_bytes = static_cast<unsigned>(g.shared_bytes);
    return shape;
  }

  std::unique_ptr<Problem> problem_from_call(const CallArgs& args) const override {
    CallReader in(args);
    const DType dtype = in.next_dtype();
    Conv2dParams params;
    for (auto* part : {&params.input, &params.weight})
      for (std::int64_t& v : *part) v = in.next();
    for (auto* part : {&params.stride, &params.padding, &params.dilation})
      for (std::int64_t& v : *part) v = in.next();
    const bool bias = in.next_bool();
    return std::make_unique<ConvProblem>(problem_of(params, dtype, bias));
  }

  // x, w, bias (optional: an empty spec when the call has none), y.
  std::vector<BufferSpec> buffers(const Problem& problem) const override {
    const auto& p = static_cast<const ConvProblem&>(problem);
    const auto& s = p.shape();
    return {{"x", BufferRole::kIn, p.dtype(), {s.n, s.c, s.h, s.w}, {}},
            {"w", BufferRole::kIn, p.dtype(), {s.k, s.c, s.r, s.s}, {}},
            {"bias", BufferRole::kIn, p.dtype(), {s.bias ? s.k : 0}, {}, true},
            {"y", BufferRole::kOut, p.dtype(), {s.n, s.k, p.p(), p.q()}, {}}};
  }

  Shortcut shortcut(const Problem& problem) const override {
    if (static_cast<const ConvProblem&>(problem).shape().n == 0) return {Shortcut::Kind::kNothing};
    return {};
  }

  void kernel_args(const Problem& problem, const Config& config, const Bindings& b, KernelArgs& args) const override {
    const auto& p = static_cast<const ConvProblem&>(problem);
    push_args(p, config, b.pointers[0], b.pointers[1], p.shape().bias ? b.pointers[2] : nullptr, b.at(3), args);
  }

  Workload workload(const Problem& problem, std::uint64_t seed) const override {
    const auto& p = static_cast<const ConvProblem&>(problem);
    const auto& s = p.shape();
    Workload w;
    w.inputs.push_back(
        random_tensor(p.dtype(), static_cast<std::uint64_t>(s.n * s.c * s.h * s.w), seed * 3 + 1));
    w.inputs.push_back(
        random_tensor(p.dtype(), static_cast<std::uint64_t>(s.k * s.c * s.r * s.s), seed * 3 + 2));
    if (s.bias) w.inputs.push_back(random_tensor(p.dtype(), static_cast<std::uint64_t>(s.k), seed * 3 + 3));
    w.output_bytes = {static_cast<std::size_t>(s.n * s.k * p.p() * p.q()) * dtype_size(p.dtype())};
    return w;
  }

  std::vector<std::vector<std::byte>> reference(const Problem& problem, const Workload& work) const override {
    const auto& p = static_cast<const ConvProblem&>(problem);
    const auto& s = p.shape();
    const DType dt = p.dtype();
    auto to_floats = [dt](const std::vector<std::byte>& bytes) {
      std::vector<float> v(bytes.size() / dtype_size(dt));
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(load_element(dt, bytes.data(), i));
      return v;
    };
    const std::vector<float> x = to_floats(work.inputs[0]), wt = to_floats(work.inputs[1]);
    const std::vector<float> bias = s.bias ? to_floats(work.inputs[2]) : std::vector<float>();
    const std::int64_t P = p.p(), Q = p.q();
    std::vector<std::byte> out(static_cast<std::size_t>(s.n * s.k * P * Q) * dtype_size(dt));
    parallel_for(
        static_cast<std::uint64_t>(s.n * s.k), static_cast<std::uint64_t>(P * Q * p.terms()),
        [&](std::uint64_t begin, std::uint64_t end) {
          std::vector<double> acc(static_cast<std::size_t>(P * Q));
          for (std::uint64_t nk = begin; nk < end; ++nk) {
            const std::int64_t n = static_cast<std::int64_t>(nk) / s.k,
                               k = static_cast<std::int64_t>(nk) % s.k;
            std::fill(acc.begin(), acc.end(), s.bias ? double(bias[k]) : 0.0);
            for (std::int64_t c = 0; c < s.c; ++c)
              for (std::int64_t r = 0; r < s.r; ++r)
                for (std::int64_t t = 0; t < s.s; ++t) {
                  const double wv = wt[((k * s.c + c) * s.r + r) * s.s + t];
                  const std::int64_t col = t * s.dilation_w - s.pad_w;  // input column of output column 0
                  // Output columns whose input column lies inside [0, W).
                  std::int64_t q_lo = col >= 0 ? 0 : (-col + s.stride_w - 1) / s.stride_w;
                  std::int64_t q_hi = s.w - 1 - col < 0 ? 0 : std::min(Q, (s.w - 1 - col) / s.stride_w + 1);
                  for (std::int64_t oy = 0; oy < P; ++oy) {
                    const std::int64_t iy = oy * s.stride_h - s.pad_h + r * s.dilation_h;
                    if (iy < 0 || iy >= s.h) continue;
                    const float* xrow = x.data() + ((n * s.c + c) * s.h + iy) * s.w + col;
                    double* arow = acc.data() + oy * Q;
                    for (std::int64_t ox = q_lo; ox < q_hi; ++ox) arow[ox] += wv * xrow[ox * s.stride_w];
                  }
                }
            const std::uint64_t base = nk * static_cast<std::uint64_t>(P * Q);
            for (std::int64_t i = 0; i < P * Q; ++i)
              store_element(dt, out.data(), base + static_cast<std::uint64_t>(i), acc[i]);
          }
        });
    return {std::move(out)};
  }

  OutputCheck output_check(const Problem& problem, std::size_t) const override {
    const auto& p = static_cast<const ConvProblem&>(problem);
    // Float accumulation of C*R*S products of magnitude < 16: the absolute error grows with the term count,
    // so near-zero sums (cancellation) need an absolute tolerance; any indexing error is orders of magnitude
    // larger.
    const double atol = 4e-6 * static_cast<double>(p.terms() + (p.shape().bias ? 1 : 0));
    switch (p.dtype()) {
      case DType::kFloat16:
        return {DType::kFloat16, 1e-3, atol + 1e-4};  // one half ulp is 2^-10 relative
      case DType::kBFloat16:
        return {DType::kBFloat16, 8e-3, atol + 1e-3};  // one bf16 ulp is 2^-7 relative
      default:
        return {DType::kFloat32, 1e-5, atol};
    }
  }

  std::vector<std::pair<std::string, std::string>> default_suite() const override {
    struct Row {
      int n, c, h, w, k, r;
    };
    static constexpr Row rows[] = {{1, 6, 768, 512, 6, 6},
                                   {8, 3, 224, 224, 16, 3},
                                   {1, 16, 512, 512, 16, 3},
                                   {32, 4, 128, 128, 8, 5},
                                   {1, 64, 56, 56, 64, 3}};
    std::vector<std::pair<std::string, std::string>> cases;
    for (const char* dtype : {"float32", "float16"})
      for (const Row& r : rows) {
        ConvProblem::Shape s;
        s.n = r.n, s.c = r.c, s.h = r.h, s.w = r.w, s.k = r.k, s.r = r.r, s.s = r.r;
        const std::string name = std::string("conv_") + dtype + "_N" + std::to_string(r.n) + "C" +
                                 std::to_string(r.c) + "H" + std::to_string(r.h) + "W" + std::to_string(r.w) +
                                 "K" + std::to_string(r.k) + "R" + std::to_string(r.r);
        cases.emplace_back(name, ConvProblem(parse_dtype(dtype), s).signature());
      }
    return cases;
  }

 private:
  static std::int64_t largest_divisor(std::int64_t n, std::initializer_list<std::int64_t> options) {
    for (std::int64_t v : options)
      if (n % v == 0) return v;
    return 1;
  }

  // No register cap (the compiler's choice) unless the block is too large for 255 registers a thread.
  static std::int64_t default_cap(const ConvProblem& p, const Config& c, const DeviceInfo& device) {
    return tile_geometry(p, c).threads * kMaxRegisters <= device.registers_per_block ? kMaxRegisters : 128;
  }

  // The default before any fallback: 128 threads (8 x 16) of 1 x 4 pixels x up to 8 output channels, stages
  // of up to 4 input channels, double buffered, the widest aligned loads; the tile shrinks towards small
  // outputs.
  static Config base_config(const ConvProblem& p, const DeviceInfo& device) {
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
    Config c{{"out_h", 1},
             {"out_w", out_w},
             {"block_h", block_h},
             {"block_w", block_w},
             {"k_block", largest_divisor(s.k, {8, 6, 4, 3, 2})},
             {"c_stage", c_stage},
             {"load", load},
             {"double_buffer", s.c / c_stage >= 2 ? 1 : 0}};
    c.set("max_regs", default_cap(p, c, device));
    return c;
  }

  // What the kernel cannot run, or cannot run well enough to be worth timing anywhere.
 public:
  static std::string hard_check(const ConvProblem& p, const Config& config, const DeviceInfo& device) {
    const auto& s = p.shape();
    const std::int64_t es = static_cast<std::int64_t>(dtype_size(p.dtype()));
    const std::int64_t load = config.at("load"), k_block = config.at("k_block"),
                       c_stage = config.at("c_stage");
    auto cfg = [&] { return " (" + config.text() + ")"; };
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
      return "double buffering needs at least two stages (C / c_stage = " + std::to_string(s.c / c_stage) +
             ")";
    const TileGeometry g = tile_geometry(p, config);
    if (g.threads < 32 || g.threads > std::min(512, device.max_threads_per_block))
      return "block of " + std::to_string(g.threads) + " threads; allowed 32 to " +
             std::to_string(std::min(512, device.max_threads_per_block)) + cfg();
    // A tile twice the output or more leaves half the block idle (32-thread blocks always pass).
    if (g.threads > 32 && config.at("block_h") > 1 && g.tile_h >= 2 * p.p())
      return "tile height " + std::to_string(g.tile_h) + " is at least twice the output height " +
             std::to_string(p.p()) + ": more than half of the block would idle" + cfg();
    if (g.threads > 32 && (config.at("block_w") > 8 || config.at("out_w") > 1) && g.tile_w >= 2 * p.q())
      return "tile width " + std::to_string(g.tile_w) + " is at least twice the output width " +
             std::to_string(p.q()) + ": more than half of the block would idle" + cfg();
    const std::int64_t fmas = config.at("out_h") * config.at("out_w") * k_block * s.r * s.s;
    if (fmas > kMaxUnrolledFmas)
      return "unrolled body of " + std::to_string(fmas) + " FMAs per input channel exceeds " +
             std::to_string(kMaxUnrolledFmas) + " (instruction cache)" + cfg();
    if (g.shared_bytes > device.max_shared_per_block_optin)
      return "needs " + std::to_string(g.shared_bytes) + " bytes of shared memory; the device allows " +
             std::to_string(device.max_shared_per_block_optin) + " per block" + cfg();
    if (config.at("double_buffer") != 0 && g.in_per_thread + g.w_per_thread > kMaxPrefetch)
      return "double buffering would hold " + std::to_string(g.in_per_thread + g.w_per_thread) +
             " prefetched loads per thread (at most " + std::to_string(kMaxPrefetch) + ")" + cfg();
    const std::int64_t max_regs = config.at("max_regs");
    if (g.register_estimate > max_regs)
      return "needs about " + std::to_string(g.register_estimate) +
             " registers per thread (accumulators, operands" +
             (config.at("double_buffer") ? ", prefetch" : "") + "); the cap is " + std::to_string(max_regs) +
             cfg();
    if (max_regs * g.threads > device.registers_per_block)
      return "a block of " + std::to_string(g.threads) + " threads cannot hold " + std::to_string(max_regs) +
             " registers each; the device has " + std::to_string(device.registers_per_block) + " per block" +
             cfg();
    return {};
  }

 private:
  // Keeps tuning tractable (the kernel is recompiled per candidate, about a second of NVRTC each): candidates
  // vary each knob around the default `base` by one step. Per-thread work: k_block the default's or twice it,
  // accumulators (out_h * out_w * k_block) half, equal or twice the default's, rows no taller than wide;
  // block: the default's shape, half as tall and twice as wide, or twice as tall; stages: one channel double
  // buffered or the default's stage with and without double buffering; register caps that change the blocks
  // per SM; the widest load the rows allow.
  static std::string neighbourhood_check(const Config& c, const Config& base, const DeviceInfo& device) {
    auto tail = [&] { return " (tuned neighbourhood of the default " + base.text() + ")"; };
    if (c.at("load") != base.at("load"))
      return "load " + std::to_string(c.at("load")) + ": the rows allow load " +
             std::to_string(base.at("load")) + ", and narrower loads only add instructions";
    const std::int64_t kb = c.at("k_block"), kb0 = base.at("k_block");
    if (kb != kb0 && kb != 2 * kb0)
      return "k_block " + std::to_string(kb) + " is neither " + std::to_string(kb0) + " nor twice it" +
             tail();
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

  Space space_;
};

}  // namespace

ConvProblem::ConvProblem(DType dtype, const Shape& s) : dtype_(dtype), shape_(s) {
  if (!supported(dtype))
    throw InvalidArgument("conv2d: dtype " + std::string(dtype_name(dtype)) +
                          " is not supported; use float32, float16 or bfloat16");
  auto positive = [](const char* what, std::int64_t v) {
    if (v < 1)
      throw InvalidArgument(std::string("conv2d: ") + what + " = " + std::to_string(v) + " must be >= 1");
  };
  if (s.n < 0) throw InvalidArgument("conv2d: batch N = " + std::to_string(s.n) + " is negative");
  positive("input channels C", s.c);
  positive("input height H", s.h);
  positive("input width W", s.w);
  positive("output channels K", s.k);
  positive("filter height R", s.r);
  positive("filter width S", s.s);
  positive("stride_h", s.stride_h);
  positive("stride_w", s.stride_w);
  positive("dilation_h", s.dilation_h);
  positive("dilation_w", s.dilation_w);
  if (s.pad_h < 0 || s.pad_w < 0)
    throw InvalidArgument("conv2d: padding (" + std::to_string(s.pad_h) + ", " + std::to_string(s.pad_w) +
                          ") must not be negative");
  constexpr std::int64_t kIntMax = INT_MAX;
  for (auto [what, v] : {std::pair{"H", s.h},
                         {"W", s.w},
                         {"stride_h", s.stride_h},
                         {"stride_w", s.stride_w},
                         {"pad_h", s.pad_h},
                         {"pad_w", s.pad_w},
                         {"dilation_h", s.dilation_h},
                         {"dilation_w", s.dilation_w},
                         {"R", s.r},
                         {"S", s.s}})
    if (v > kIntMax / 4)
      throw InvalidArgument(std::string("conv2d: ") + what + " = " + std::to_string(v) + " is too large");
  if (s.n > kIntMax) throw InvalidArgument("conv2d: batch N = " + std::to_string(s.n) + " exceeds 2^31 - 1");
  if (s.k > 65535 || s.c > 65535)
    throw InvalidArgument("conv2d: C = " + std::to_string(s.c) + ", K = " + std::to_string(s.k) +
                          ": channel counts above 65535 are not supported");
  const std::int64_t span_h = (s.r - 1) * s.dilation_h + 1, span_w = (s.s - 1) * s.dilation_w + 1;
  const std::int64_t padded_h = s.h + 2 * s.pad_h, padded_w = s.w + 2 * s.pad_w;
  if (span_h > padded_h || span_w > padded_w)
    throw InvalidArgument(
        "conv2d: the filter spans " + std::to_string(span_h) + " x " + std::to_string(span_w) +
        " input pixels ((R-1)*dilation_h+1 x (S-1)*dilation_w+1) but the padded input is only " +
        std::to_string(padded_h) + " x " + std::to_string(padded_w) +
        "; use a smaller filter or dilation, or more padding");
  p_ = (padded_h - span_h) / s.stride_h + 1;
  q_ = (padded_w - span_w) / s.stride_w + 1;
  if (s.h * s.w > kIntMax || p_ * q_ > kIntMax)
    throw InvalidArgument("conv2d: an input plane of " + std::to_string(s.h) + " x " + std::to_string(s.w) +
                          " or output plane of " + std::to_string(p_) + " x " + std::to_string(q_) +
                          " exceeds 2^31 - 1 elements");
  const double largest =
      std::max({static_cast<double>(s.n) * static_cast<double>(s.c) * static_cast<double>(s.h * s.w),
                static_cast<double>(s.n) * static_cast<double>(s.k) * static_cast<double>(p_ * q_),
                static_cast<double>(s.k) * static_cast<double>(s.c) * static_cast<double>(s.r) *
                    static_cast<double>(s.s)});
  if (largest > std::ldexp(1.0, 48))
    throw InvalidArgument("conv2d: a tensor of " + std::to_string(largest) + " elements exceeds 2^48");
}

std::string ConvProblem::signature() const {
  const Shape& s = shape_;
  return "bias=" + std::to_string(s.bias ? 1 : 0) + ";c=" + std::to_string(s.c) +
         ";dilation_h=" + std::to_string(s.dilation_h) + ";dilation_w=" + std::to_string(s.dilation_w) +
         ";dtype=" + std::string(dtype_name(dtype_)) + ";h=" + std::to_string(s.h) +
         ";k=" + std::to_string(s.k) + ";n=" + std::to_string(s.n) + ";pad_h=" + std::to_string(s.pad_h) +
         ";pad_w=" + std::to_string(s.pad_w) + ";r=" + std::to_string(s.r) + ";s=" + std::to_string(s.s) +
         ";stride_h=" + std::to_string(s.stride_h) + ";stride_w=" + std::to_string(s.stride_w) +
         ";w=" + std::to_string(s.w);
}

std::string ConvProblem::group() const {
  const Shape& s = shape_;
  return std::string(dtype_name(dtype_)) + "|f=" + std::to_string(s.r) + "x" + std::to_string(s.s) +
         "|st=" + std::to_string(s.stride_h) + "x" + std::to_string(s.stride_w) +
         "|d=" + std::to_string(s.dilation_h) + "x" + std::to_string(s.dilation_w);
}

std::vector<double> ConvProblem::features() const {
  const Shape& s = shape_;
  std::vector<double> f;
  for (std::int64_t v : {s.n, s.c, s.h, s.w, s.k}) f.push_back(std::log2(static_cast<double>(v) + 1.0));
  return f;
}

double ConvProblem::bytes_moved() const {
  const Shape& s = shape_;
  const double elems = static_cast<double>(s.n * s.c) * static_cast<double>(s.h * s.w) +
                       static_cast<double>(s.k * s.c) * static_cast<double>(s.r * s.s) +
                       static_cast<double>(s.n * s.k) * static_cast<double>(p_ * q_) +
                       (s.bias ? double(s.k) : 0.0);
  return elems * static_cast<double>(dtype_size(dtype_));
}

double ConvProblem::flops() const {
  return 2.0 * static_cast<double>(shape_.n * shape_.k) * static_cast<double>(p_ * q_) *
         static_cast<double>(terms());
}

TileGeometry tile_geometry(const ConvProblem& problem, const Config& config) {
  const auto& s = problem.shape();
  const std::int64_t oh = config.at("out_h"), ow = config.at("out_w"), bh = config.at("block_h"),
                     bw = config.at("block_w"), kb = config.at("k_block"), cs = config.at("c_stage"),
                     load = config.at("load"), db = config.at("double_buffer");
  const std::int64_t es = static_cast<std::int64_t>(dtype_size(problem.dtype()));
  // Clamped so absurd dilations give a large (rejected) shared-memory size instead of overflowing.
  auto clamp = [](std::int64_t v) { return static_cast<int>(std::min<std::int64_t>(v, 1 << 28)); };
  TileGeometry g;
  g.threads = clamp(bh * bw);
  g.tile_h = clamp(bh * oh);
  g.tile_w = clamp(bw * ow);
  const std::int64_t in_h = (bh * oh - 1) * s.stride_h + (s.r - 1) * s.dilation_h + 1;
  const std::int64_t in_w = (bw * ow - 1) * s.stride_w + (s.s - 1) * s.dilation_w + 1;
  const std::int64_t span = (ow - 1) * s.stride_w + (s.s - 1) * s.dilation_w + 1;
  const std::int64_t span_read = round_up(span, vector_of(ow * s.stride_w));
  const std::int64_t pitch = round_up((bw - 1) * ow * s.stride_w + span_read, 4);
  const std::int64_t in_stage = cs * in_h * pitch, w_stage = cs * s.r * s.s * kb;
  const std::int64_t units = (in_w + 2 * (load - 1)) / load;
  g.in_h = clamp(in_h);
  g.in_w = clamp(in_w);
  g.span_read = clamp(span_read);
  g.pitch = clamp(pitch);
  g.in_stage = clamp(in_stage);
  g.w_stage = clamp(w_stage);
  g.in_per_thread = clamp((cs * in_h * units + bh * bw - 1) / (bh * bw));
  g.w_per_thread = clamp((w_stage + bh * bw - 1) / (bh * bw));
  g.buffers = db ? 2 : 1;
  g.shared_bytes = 4 * g.buffers * (in_stage + w_stage);
  std::int64_t regs = oh * ow * kb + span_read + s.s * kb + 40;
  if (db) regs += g.in_per_thread * ((load * es + 3) / 4) + g.w_per_thread;
  g.register_estimate = clamp(regs);
  return g;
}

void push_args(const ConvProblem& p, const Config& config, const void* x, const void* w, const void* bias,
               void* y, KernelArgs& args) {
  struct ArgsLayout {  // templates::conv2d::Args<T> in conv2d.cuh
    const void* x;
    const void* w;
    const void* bias;
    void* y;
    std::int32_t n, h, w_, p, q, pad_h, pad_w, tiles_x;
  };
  static_assert(sizeof(ArgsLayout) == 64);
  const auto& s = p.shape();
  const std::int64_t tile_w = config.at("block_w") * config.at("out_w");
  const ArgsLayout a{x,
                     w,
                     bias,
                     y,
                     static_cast<std::int32_t>(s.n),
                     static_cast<std::int32_t>(s.h),
                     static_cast<std::int32_t>(s.w),
                     static_cast<std::int32_t>(p.p()),
                     static_cast<std::int32_t>(p.q()),
                     static_cast<std::int32_t>(s.pad_h),
                     static_cast<std::int32_t>(s.pad_w),
                     static_cast<std::int32_t>((p.q() + tile_w - 1) / tile_w)};
  args.push_raw(&a, sizeof a, alignof(ArgsLayout));
}

const Family& conv2d_family() {
  static const ConvFamily family;
  return family;
}

std::string kernel_limits(const ConvProblem& problem, const Config& config, const DeviceInfo& device) {
  return ConvFamily::hard_check(problem, config, device);
}

}  // namespace jitune::templates::conv2d

namespace jitune {

std::array<std::int64_t, 4> conv2d_output_shape(const Conv2dParams& params) {
  const templates::conv2d::ConvProblem p = templates::conv2d::problem_of(params, DType::kFloat32, false);
  return {p.shape().n, p.shape().k, p.p(), p.q()};
}

}  // namespace jitune
