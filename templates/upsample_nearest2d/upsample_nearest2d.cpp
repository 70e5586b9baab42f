// upsample_nearest2d family: problem validation and signature, the 2x rule, space and constraints, heuristic
// default, instantiation, launch geometry and kernel parameters.
#include "templates/upsample_nearest2d/upsample_nearest2d.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>

namespace jitune {

std::string_view nearest_mode_name(NearestMode mode) noexcept {
  return mode == NearestMode::kNearestExact ? "nearest-exact" : "nearest";
}

namespace templates::upsample_nearest2d {
namespace {

constexpr std::int64_t kMaxDim = (std::int64_t{1} << 31) - 1;  // the kernels' per-dimension indices are int

std::string scale_text(const std::optional<double>& s) {
  if (!s) return "none";
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, *s);
  return ec == std::errc() ? std::string(buf, end) : "none";
}

std::int64_t parse_int(const std::string& key, const std::string& text) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size())
    throw InvalidArgument("upsample_nearest2d problem: " + key + "='" + text + "' is not an integer");
  return v;
}

std::optional<double> parse_scale(const std::string& key, const std::string& text) {
  if (text == "none" || text.empty()) return std::nullopt;
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size())
    throw InvalidArgument("upsample_nearest2d problem: " + key + "='" + text +
                          "' is not a number (a scale factor such as 2 or 1.5, or 'none')");
  return v;
}

// Shortest and longest window [start(i), start(i + 1)) over i in [0, in).
struct WindowLengths {
  std::int64_t shortest, longest;
};
WindowLengths window_lengths(std::int64_t in, std::int64_t out, float step, NearestMode mode) {
  WindowLengths w{out, 0};
  std::int64_t prev = window_start(0, step, out, mode);
  for (std::int64_t i = 1; i <= in; ++i) {
    const std::int64_t next = window_start(i, step, out, mode);
    w.shortest = std::min(w.shortest, next - prev);
    w.longest = std::max(w.longest, next - prev);
    prev = next;
  }
  return w;
}

// f when every backward window along this dimension is [f i, f i + f) for f in [kMinUniformWindow,
// kMaxUniformWindow], else 0: out = f in and every window f long (the first starts at 0 in both modes).
std::int64_t uniform_of(const WindowLengths& w, std::int64_t in, std::int64_t out) {
  const std::int64_t f = w.longest;
  const bool uniform = w.shortest == f && out == f * in;
  return uniform && f >= kMinUniformWindow && f <= kMaxUniformWindow ? f : 0;
}

bool supported(DType d) { return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16; }

}  // namespace

UpsampleProblem::UpsampleProblem(Direction direction, const UpsampleNearest2d& shape, std::uint8_t src_align)
    : direction_(direction), shape_(shape), src_align_(src_align) {
  const char* op = direction == Direction::kForward ? "upsample_nearest2d" : "upsample_nearest2d_backward";
  auto fail = [&](const std::string& what) { throw InvalidArgument(std::string(op) + ": " + what); };
  if (!supported(shape.dtype))
    fail("dtype " + std::string(dtype_name(shape.dtype)) + " is not supported; use float32, float16 or bfloat16");
  if (shape.layout != ImageLayout::kNCHW && shape.layout != ImageLayout::kNHWC) fail("unknown layout");
  if (shape.mode != NearestMode::kNearest && shape.mode != NearestMode::kNearestExact) fail("unknown mode");
  if (shape.n < 0 || shape.c < 0)
    fail("batch n=" + std::to_string(shape.n) + " and channels c=" + std::to_string(shape.c) +
         " must be >= 0");
  if (shape.in_h < 1 || shape.in_w < 1 || shape.in_h > kMaxDim || shape.in_w > kMaxDim)
    fail("input size " + std::to_string(shape.in_h) + "x" + std::to_string(shape.in_w) +
         " must be at least 1x1 and below 2^31 in each dimension");
  const std::pair<const char*, const std::optional<double>*> scales[] = {{"scale_h", &shape.scale_h},
                                                                        {"scale_w", &shape.scale_w}};
  for (const auto& [name, s] : scales)
    if (*s && !(std::isfinite(**s) && **s > 0))
      fail(std::string(name) + "=" + scale_text(*s) +
           " must be a positive finite scale factor (output size / input size), or absent");
  auto resolve = [&](std::int64_t& out, std::int64_t in, const std::optional<double>& s, const char* out_name,
                     const char* s_name) {
    if (out < 0) fail(std::string(out_name) + "=" + std::to_string(out) + " is negative; give a size >= 1, or 0 " +
                      "to derive it from " + s_name);
    if (out == 0) {
      if (!s)
        fail(std::string(out_name) + " and " + s_name + " are both missing; give the output size or the scale factor");
      const double size = static_cast<double>(in) * *s;
      if (size > static_cast<double>(kMaxDim))  // derived_size says -1 past int64: name the real product
        fail("input size " + std::to_string(in) + " x " + s_name + " " + scale_text(s) + " gives an output size of " +
             (std::isfinite(size) ? scale_text(size) : std::string("over 1e308")) + "; it must be below 2^31: use a smaller scale factor or give " + out_name);
      out = derived_size(in, *s);
      if (out < 1)
        fail("input size " + std::to_string(in) + " x " + s_name + " " + scale_text(s) +
             " gives an output size of " + std::to_string(out) + "; PyTorch requires at least 1");
    }
    if (out > kMaxDim) fail(std::string(out_name) + "=" + std::to_string(out) + " must be below 2^31");
  };
  resolve(shape_.out_h, shape.in_h, shape.scale_h, "out_h", "scale_h");
  resolve(shape_.out_w, shape.in_w, shape.scale_w, "out_w", "scale_w");
  // Each tensor below 2^62 elements (64-bit indices never overflow).
  const double big = std::max(static_cast<double>(shape_.n) * static_cast<double>(shape_.c) *
                                  static_cast<double>(shape_.in_h) * static_cast<double>(shape_.in_w),
                              static_cast<double>(shape_.n) * static_cast<double>(shape_.c) *
                                  static_cast<double>(shape_.out_h) * static_cast<double>(shape_.out_w));
  if (big >= 4.6e18) fail("the tensors have too many elements (2^62 at most)");

  if (direction == Direction::kForward) {
    step_h_ = forward_step(shape_.in_h, shape_.out_h, shape_.scale_h);
    step_w_ = forward_step(shape_.in_w, shape_.out_w, shape_.scale_w);
    packed_2x_ = shape_.out_h == 2 * shape_.in_h && shape_.out_w == 2 * shape_.in_w && step_h_ == 0.5f &&
                 step_w_ == 0.5f;
  } else {
    step_h_ = backward_step(shape_.in_h, shape_.out_h, shape_.scale_h);
    step_w_ = backward_step(shape_.in_w, shape_.out_w, shape_.scale_w);
    packed_2x_ = shape_.out_h == 2 * shape_.in_h && shape_.out_w == 2 * shape_.in_w && step_h_ == 2.0f &&
                 step_w_ == 2.0f;
    if (copy()) {
      max_window_h_ = max_window_w_ = 1;
    } else {
      const WindowLengths h = window_lengths(shape_.in_h, shape_.out_h, step_h_, shape_.mode);
      const WindowLengths w = window_lengths(shape_.in_w, shape_.out_w, step_w_, shape_.mode);
      max_window_h_ = h.longest;
      max_window_w_ = w.longest;
      const std::int64_t fh = uniform_of(h, shape_.in_h, shape_.out_h);
      if (fh == uniform_of(w, shape_.in_w, shape_.out_w)) uniform_window_ = fh;
    }
  }
  if (src_align_ != 16) {
    const auto es = static_cast<int>(dtype_size(shape_.dtype));
    if (!valid_alignment_class(src_align_, dtype_size(shape_.dtype)))
      fail("align " + std::to_string(src_align_) + " is not an alignment class of a " +
           std::string(dtype_name(shape_.dtype)) + " input (" + std::to_string(es) + ", ... 8 bytes; 16 when aligned)");
    if (backward() || !packed_2x_)
      fail("align " + std::to_string(src_align_) + " names an input's class only for an exact 2x forward (its "
           "kernel realigns the input in registers); this problem reads any input at the aligned problem's config: "
           "drop align");
  }
}

bool UpsampleProblem::index64() const noexcept {
  // Loop indices reach the element count plus one grid stride; keep them below 2^31.
  return std::max(in_numel(), out_numel()) > (std::int64_t{1} << 30);
}

std::string UpsampleProblem::signature() const {
  return (src_align_ < 16 ? "align=" + std::to_string(src_align_) + ";" : std::string()) +
         "c=" + std::to_string(shape_.c) + ";direction=" + (backward() ? "backward" : "forward") +
         ";dtype=" + std::string(dtype_name(shape_.dtype)) + ";in_h=" + std::to_string(shape_.in_h) +
         ";in_w=" + std::to_string(shape_.in_w) + ";layout=" + std::string(image_layout_name(shape_.layout)) +
         ";mode=" + std::string(nearest_mode_name(shape_.mode)) + ";n=" + std::to_string(shape_.n) +
         ";out_h=" + std::to_string(shape_.out_h) + ";out_w=" + std::to_string(shape_.out_w) +
         ";scale_h=" + scale_text(shape_.scale_h) + ";scale_w=" + scale_text(shape_.scale_w);
}

std::string UpsampleProblem::group() const {
  return std::string(dtype_name(shape_.dtype)) + "|" + std::string(image_layout_name(shape_.layout)) + "|" +
         (backward() ? "backward" : "forward") + "|" + (packed_2x_ ? "2x" : "general");
}

std::vector<double> UpsampleProblem::features() const {
  return {std::log2(static_cast<double>(shape_.n * shape_.c) + 1.0),
          std::log2(static_cast<double>(shape_.in_h * shape_.in_w)),
          std::log2(static_cast<double>(shape_.out_h * shape_.out_w))};
}

double UpsampleProblem::bytes_moved() const {
  return static_cast<double>(in_numel() + out_numel()) * static_cast<double>(dtype_size(shape_.dtype));
}

std::int64_t pack_extent(const UpsampleProblem& p, KernelKind kernel, Strategy strategy) noexcept {
  if (p.layout() == ImageLayout::kNHWC) return p.shape().c;
  // NCHW: the row the vector accesses walk.
  const bool walks_output = p.backward() ? kernel == KernelKind::kGeneral && strategy == Strategy::kScatter
                                         : kernel == KernelKind::kGeneral;
  return walks_output ? p.shape().out_w : p.shape().in_w;
}

namespace {

// Units the kernel walks: packs of the source (2x forward, scatter) or of the destination (the others).
std::int64_t unit_count(const UpsampleProblem& p, KernelKind kernel, Strategy strategy, int pack) {
  const bool walks_src = p.backward() ? kernel == KernelKind::kGeneral && strategy == Strategy::kScatter
                                      : kernel == KernelKind::kPacked2x;
  return (walks_src ? p.src_numel() : p.dst_numel()) / pack;
}

// The backward gather's unrolled window (the kernel's kWin, kUniform): the uniform window, else the longest window up
// to kMaxUnrolledWindow; {0, false} (the window loops) otherwise and forward.
struct GatherWindow {
  std::int64_t window = 0;
  bool uniform = false;
};
GatherWindow unrolled_window(const UpsampleProblem& p) {
  if (!p.backward()) return {};
  if (p.uniform_window() > 0) return {p.uniform_window(), true};
  const std::int64_t longest = std::max(p.max_window_h(), p.max_window_w());
  if (longest >= 1 && longest <= kMaxUnrolledWindow) return {longest, false};
  return {};
}

// The window `config` runs: the problem's unrolled window where `window` asks for it in the general gather, else none.
GatherWindow gather_window(const UpsampleProblem& p, const Config& config) {
  const bool gather = static_cast<KernelKind>(config.at("kernel")) == KernelKind::kGeneral &&
                      static_cast<Strategy>(config.at("strategy")) == Strategy::kGather;
  return gather && config.at("window") != 0 ? unrolled_window(p) : GatherWindow{};
}

// The kernel's "kWin, kUniform, " template arguments.
std::string window_args(const GatherWindow& w) {
  return std::to_string(w.window) + ", " + (w.uniform ? "1" : "0") + ", ";
}

bool aligned(const void* ptr, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(ptr) % bytes == 0;
}

}  // namespace

int usable_pack(const UpsampleProblem& p, KernelKind kernel, Strategy strategy, int max_pack, const void* src,
                const void* dst) noexcept {
  const std::size_t es = dtype_size(p.dtype());
  const std::int64_t extent = pack_extent(p, kernel, strategy);
  const bool nchw = p.layout() == ImageLayout::kNCHW;
  for (int pack = max_pack; pack >= 1; pack /= 2) {
    if (pack * es > 16 || extent % pack != 0) continue;
    const std::size_t bytes = pack * es;
    // The 2x NCHW kernels move 2 * pack elements per output row, in chunks of at most 16 bytes.
    const std::size_t pair_bytes = std::min<std::size_t>(2 * bytes, 16);
    bool ok = true;
    if (kernel == KernelKind::kPacked2x) {
      // The 2x forward realigns a misaligned src in registers (Params::src_shift): only dst limits its pack.
      if (nchw && !p.backward()) ok = aligned(dst, pair_bytes);
      else if (nchw) ok = aligned(src, pair_bytes) && aligned(dst, bytes);
      else if (!p.backward()) ok = aligned(dst, bytes);
      else ok = aligned(src, bytes) && aligned(dst, bytes);
    } else if (p.backward() && strategy == Strategy::kScatter) {
      ok = aligned(src, bytes);  // scalar atomics into dst
    } else {
      ok = aligned(dst, bytes) && (nchw || aligned(src, bytes));  // NCHW gathers load scalars
    }
    if (ok) return pack;
  }
  return 0;
}

Params make_params(const UpsampleProblem& p, KernelKind kernel, Strategy strategy, int pack, const void* src,
                   void* dst) noexcept {
  const UpsampleNearest2d& s = p.shape();
  Params params{};
  params.src = src;
  params.dst = dst;
  params.n = s.n;
  params.c = s.c;
  params.in_h = s.in_h;
  params.in_w = s.in_w;
  params.out_h = s.out_h;
  params.out_w = s.out_w;
  params.units = unit_count(p, kernel, strategy, pack);
  params.dst_numel = p.dst_numel();
  params.scale_h = p.step_h();
  params.scale_w = p.step_w();
  if (p.backward()) {
    params.identity_h = params.identity_w = p.copy() ? 1 : 0;
  } else {
    params.identity_h = s.in_h == s.out_h ? 1 : 0;
    params.identity_w = s.in_w == s.out_w ? 1 : 0;
    if (kernel == KernelKind::kPacked2x) {
      const std::size_t es = dtype_size(p.dtype()), bytes = static_cast<std::size_t>(pack) * es;
      params.src_shift = static_cast<int>(reinterpret_cast<std::uintptr_t>(src) % bytes / es);
    }
  }
  return params;
}

namespace {

class UpsampleFamily final : public Family {
 public:
  UpsampleFamily()
      : space_({
            {"kernel", {0, 1}, "0 general (any scale), 1 packed 2x; chosen by rule (1 exactly when the rule is x2)"},
            {"strategy", {0, 1}, "general backward: 0 gather (window sums, no atomics), 1 scatter (fast atomic add)"},
            {"pack", {1, 2, 4, 8}, "elements per vector access (pack * element size <= 16 bytes); must divide the "
                                   "row it walks (NCHW) or the channels (NHWC)"},
            {"block", {128, 256, 512, 1024}, "threads per block"},
            {"items", {1, 2, 4}, "work units each thread loads before it stores"},
            {"waves", {1, 2, 8, 32}, "grid cap: at most waves x (blocks resident on the GPU at once)"},
            {"cache", {0, 1, 2}, "forward: L2 eviction priority of the input's loads, 0 normal, 1 evict_last (the "
                                 "input stays in L2 while the larger output streams), 2 evict_first; backward: 0"},
            {"window", {0, 1}, "backward gather: 1 unrolls the window loops (fixed f x f windows at a uniform 3x or "
                               "4x scale, else bounded by the longest window, at most 4), every load issued "
                               "first; 0 the window loops"},
        }) {}

  std::string_view name() const override { return "upsample_nearest2d"; }
  std::string_view template_name() const override { return "upsample_nearest2d/upsample_nearest2d.cuh"; }
  const Space& space() const override { return space_; }

  std::vector<ProblemOption> problem_options() const override {
    return {{"align", "an exact 2x forward's input alignment class in bytes where the input is a view off 16 bytes "
                      "(2, 4 or 8; default 16): tuned apart from the aligned problem"},
            {"direction", "forward (default) or backward"},
            {"dtype", "float32, float16 or bfloat16"},
            {"layout", "nchw (default) or nhwc (channels last)"},
            {"mode", "nearest (default) or nearest-exact"},
            {"n", "batch"},
            {"c", "channels"},
            {"in_h", "input height"},
            {"in_w", "input width"},
            {"out_h", "output height (or give scale_h)"},
            {"out_w", "output width (or give scale_w)"},
            {"scale_h", "height scale factor, output / input (or give out_h)"},
            {"scale_w", "width scale factor, output / input (or give out_w)"}};
  }

  std::unique_ptr<Problem> make_problem(const std::map<std::string, std::string>& options) const override {
    static const char* const kKnown[] = {"align", "direction", "dtype", "layout",  "mode",   "n",      "c",
                                         "in_h",  "in_w",      "out_h", "out_w",   "scale_h", "scale_w"};
    for (const auto& option : options)  // no structured binding: clang 14 cannot capture one in the lambda
      if (const std::string& key = option.first;
          std::find_if(std::begin(kKnown), std::end(kKnown), [&](const char* k) { return key == k; }) ==
          std::end(kKnown))
        throw InvalidArgument("upsample_nearest2d problem: unknown option '" + key +
                              "'; options are align, direction, dtype, layout, mode, n, c, in_h, in_w, out_h, "
                              "out_w, scale_h, scale_w");
    auto get = [&](const char* key, const char* fallback) -> std::string {
      auto it = options.find(key);
      if (it != options.end()) return it->second;
      if (fallback) return fallback;
      throw InvalidArgument(std::string("upsample_nearest2d problem: missing '") + key +
                            "' (needed: dtype, n, c, in_h, in_w and out_h/out_w or scale_h/scale_w)");
    };
    UpsampleNearest2d s;
    s.dtype = parse_dtype(get("dtype", nullptr));
    const std::string layout = get("layout", "nchw"), mode = get("mode", "nearest"), dir = get("direction", "forward");
    if (layout == "nchw") s.layout = ImageLayout::kNCHW;
    else if (layout == "nhwc") s.layout = ImageLayout::kNHWC;
    else throw InvalidArgument("upsample_nearest2d problem: layout '" + layout + "' is not nchw or nhwc");
    if (mode == "nearest") s.mode = NearestMode::kNearest;
    else if (mode == "nearest-exact") s.mode = NearestMode::kNearestExact;
    else throw InvalidArgument("upsample_nearest2d problem: mode '" + mode + "' is not nearest or nearest-exact");
    if (dir != "forward" && dir != "backward")
      throw InvalidArgument("upsample_nearest2d problem: direction '" + dir + "' is not forward or backward");
    s.n = parse_int("n", get("n", nullptr));
    s.c = parse_int("c", get("c", nullptr));
    s.in_h = parse_int("in_h", get("in_h", nullptr));
    s.in_w = parse_int("in_w", get("in_w", nullptr));
    s.out_h = parse_int("out_h", get("out_h", "0"));
    s.out_w = parse_int("out_w", get("out_w", "0"));
    s.scale_h = parse_scale("scale_h", get("scale_h", "none"));
    s.scale_w = parse_scale("scale_w", get("scale_w", "none"));
    const std::int64_t align = parse_int("align", get("align", "16"));
    if (align < 1 || align > 16)
      throw InvalidArgument("upsample_nearest2d problem: align=" + std::to_string(align) +
                            " is not an alignment class (2, 4 or 8 bytes; 16 when aligned)");
    return std::make_unique<UpsampleProblem>(dir == "forward" ? Direction::kForward : Direction::kBackward, s,
                                             static_cast<std::uint8_t>(align));
  }

  Config heuristic(const Problem& problem, const DeviceInfo&) const override {
    const auto& p = static_cast<const UpsampleProblem&>(problem);
    const KernelKind kernel = p.packed_2x() ? KernelKind::kPacked2x : KernelKind::kGeneral;
    // The widest vector the shape allows (16 bytes at most), except in the NCHW 2x kernels, whose other side moves
    // two elements per pack element: there 8-byte packs keep every access 16 bytes wide and a warp's accesses
    // contiguous (measured on the H100: 1.4-1.9x faster than 16-byte packs forward, none slower). 256 threads; the
    // forward keeps two units in flight per thread, the backward already has two or four loads per unit.
    const std::int64_t extent = pack_extent(p, kernel, Strategy::kGather);
    const bool pairs = kernel == KernelKind::kPacked2x && p.layout() == ImageLayout::kNCHW;
    std::int64_t pack = static_cast<std::int64_t>((pairs ? 8 : 16) / dtype_size(p.dtype()));
    while (pack > 1 && extent % pack != 0) pack /= 2;
    return Config{{"kernel", static_cast<std::int64_t>(kernel)},
                  {"strategy", static_cast<std::int64_t>(Strategy::kGather)},
                  {"pack", pack},
                  {"block", 256},
                  {"items", p.backward() ? 1 : 2},
                  {"waves", 32},
                  {"cache", 0},
                  // Unrolled windows wherever the general kernel runs them: 2-6% faster than the loops on the H100
                  // at 1.5x, 2.5x, 3x and 4x, level with them when downsampling.
                  {"window", kernel == KernelKind::kGeneral && unrolled_window(p).window > 0 ? 1 : 0}};
  }

  std::string check(const Problem& problem, const Config& config, const DeviceInfo& device) const override {
    const auto& p = static_cast<const UpsampleProblem&>(problem);
    const auto kernel = static_cast<KernelKind>(config.at("kernel"));
    const auto strategy = static_cast<Strategy>(config.at("strategy"));
    if (p.packed_2x() && kernel != KernelKind::kPacked2x)
      return "the index rule is exactly x2 here: the packed 2x kernel (kernel=1) is used by rule";
    if (!p.packed_2x() && kernel == KernelKind::kPacked2x)
      return "the packed 2x kernel (kernel=1) needs an exact x2 rule in both dimensions";
    if (strategy == Strategy::kScatter && !(p.backward() && kernel == KernelKind::kGeneral))
      return "strategy=1 (scatter) applies to the general backward only";
    if (config.at("window") != 0 && gather_window(p, config).window == 0)
      return "window=1 (unrolled windows) applies to the backward gather (kernel=0, strategy=0) where no window is "
             "longer than " + std::to_string(kMaxUnrolledWindow) + "; this problem takes window=0";
    if (p.backward() && config.at("cache") != 0)
      return "cache (the input loads' L2 eviction priority) applies to the forward kernels; the backward takes "
             "cache=0";
    const std::int64_t pack = config.at("pack");
    const std::int64_t bytes = pack * static_cast<std::int64_t>(dtype_size(p.dtype()));
    if (bytes > 16)
      return "pack " + std::to_string(pack) + " moves " + std::to_string(bytes) +
             " bytes per access; the widest vector access is 16 bytes";
    const std::int64_t extent = pack_extent(p, kernel, strategy);
    if (extent % pack != 0)
      return "pack " + std::to_string(pack) + " does not divide the " +
             (p.layout() == ImageLayout::kNHWC ? "channel count " : "row length ") + std::to_string(extent);
    if (config.at("block") > device.max_threads_per_block)
      return "block " + std::to_string(config.at("block")) + " exceeds the device's " +
             std::to_string(device.max_threads_per_block) + " threads per block";
    if (const std::int64_t window = gather_window(p, config).window; window > 0) {
      // A unit's window is loaded whole before it is summed: those registers must leave room for the rest.
      const std::int64_t held = window * window * bytes / 4;
      const std::int64_t room = std::min<std::int64_t>(255, device.registers_per_sm / config.at("block")) / 2;
      if (held > room)
        return "the unrolled " + std::to_string(window) + "x" + std::to_string(window) + " windows of pack " +
               std::to_string(pack) + " hold " + std::to_string(held) +
               " registers of grad_output a thread; a block of " + std::to_string(config.at("block")) +
               " threads leaves " + std::to_string(room) +
               " (half a thread's share): a narrower pack or a smaller block";
    }
    return {};
  }

  KernelSource source(const Problem& problem, const Config& config) const override {
    const auto& p = static_cast<const UpsampleProblem&>(problem);
    const auto kernel = static_cast<KernelKind>(config.at("kernel"));
    const std::string t(dtype_cuda_type(p.dtype()));
    const std::string layout = p.layout() == ImageLayout::kNHWC ? "1" : "0";
    const std::string mode = p.mode() == NearestMode::kNearestExact ? "1" : "0";
    const std::string tail = std::to_string(config.at("pack")) + ", " + std::to_string(config.at("block")) + ", " +
                             std::to_string(config.at("items")) + ", " + (p.index64() ? "long long" : "int") + ">";
    std::string name;
    const std::string cache = std::to_string(config.at("cache"));
    if (!p.backward())
      name = kernel == KernelKind::kPacked2x
                 ? "jitune::upn::forward_2x<" + t + ", " + layout + ", " + cache + ", " + tail
                 : "jitune::upn::forward<" + t + ", " + layout + ", " + mode + ", " + cache + ", " + tail;
    else
      name = kernel == KernelKind::kPacked2x
                 ? "jitune::upn::backward_2x<" + t + ", " + layout + ", " + tail
                 : "jitune::upn::backward<" + t + ", " + layout + ", " + mode + ", " +
                       std::to_string(config.at("strategy")) + ", " + window_args(gather_window(p, config)) + tail;
    return {"#include \"upsample_nearest2d/upsample_nearest2d.cuh\"\n", std::move(name)};
  }

  LaunchShape launch_shape(const Problem& problem, const Config& config, const DeviceInfo& device) const override {
    const auto& p = static_cast<const UpsampleProblem&>(problem);
    const std::int64_t block = config.at("block"), items = config.at("items");
    const std::int64_t units = unit_count(p, static_cast<KernelKind>(config.at("kernel")),
                                          static_cast<Strategy>(config.at("strategy")),
                                          static_cast<int>(config.at("pack")));
    return grid_stride_shape(units, block, block * items, config.at("waves"), device);
  }

  // Values in the order of the public wrapper: direction, dtype, layout, mode, n, c, in_h, in_w, out_h, out_w,
  // then (has_scale, scale bits) for h and w.
  std::unique_ptr<Problem> problem_from_call(const CallArgs& args) const override {
    CallReader in(args);
    const auto direction = static_cast<Direction>(in.next());
    UpsampleNearest2d s;
    s.dtype = in.next_dtype();
    s.layout = static_cast<ImageLayout>(in.next());
    s.mode = static_cast<NearestMode>(in.next());
    for (std::int64_t* v : {&s.n, &s.c, &s.in_h, &s.in_w, &s.out_h, &s.out_w}) *v = in.next();
    for (std::optional<double>* scale : {&s.scale_h, &s.scale_w}) {
      const bool given = in.next_bool();
      const double value = in.next_double();
      if (given) *scale = value;
    }
    return std::make_unique<UpsampleProblem>(direction, s);
  }

  std::string_view op_name(const Problem& problem) const override {
    return static_cast<const UpsampleProblem&>(problem).backward() ? "upsample_nearest2d_backward"
                                                                     : "upsample_nearest2d";
  }

  std::vector<BufferSpec> buffers(const Problem& problem) const override {
    const auto& p = static_cast<const UpsampleProblem&>(problem);
    const bool fwd = !p.backward();
    std::vector<BufferSpec> out{{fwd ? "input" : "grad_output", BufferRole::kIn, p.dtype(), {p.src_numel()}, {}},
                                {fwd ? "output" : "grad_input", BufferRole::kOut, p.dtype(), {p.dst_numel()}, {}}};
    out[0].placement = p.src_align();
    return out;
  }

  // An exact 2x forward whose input is off the 16-byte alignment is a problem of its own (the input's class in the
  // signature): its kernel realigns the input in registers at any pack, so every config of the aligned problem runs
  // it (the aligned record serves an untuned class), but the pack and block that realign fastest need not be the
  // aligned ones. Other problems read a misaligned input at the aligned problem's config (variant below).
  std::unique_ptr<Problem> with_alignment(const Problem& problem,
                                          std::span<const std::uint8_t> classes) const override {
    const auto& p = static_cast<const UpsampleProblem&>(problem);
    if (classes.size() < 2 || classes[0] >= 16 || classes[1] < 16 || p.backward() || !p.packed_2x() || p.empty() ||
        classes[0] < dtype_size(p.dtype()))
      return nullptr;
    return std::make_unique<UpsampleProblem>(p.direction(), p.shape(), classes[0]);
  }

  // PyTorch copies when the sizes are equal (both directions).
  Shortcut shortcut(const Problem& problem) const override {
    const auto& p = static_cast<const UpsampleProblem&>(problem);
    if (p.src_numel() == 0 || p.dst_numel() == 0) return {Shortcut::Kind::kNothing};
    if (p.copy()) return {Shortcut::Kind::kCopy, 0, 1};
    return {};
  }

  // Slots 4..7: the packed 2x kernel at pack 1..8; slots 0..3: the tuned general kernel (or the gather, when the
  // 2x kernel's pair accesses do not fit these pointers).
  int variant(const Problem& problem, const Config& tuned, const Bindings& b) const override {
    const auto& p = static_cast<const UpsampleProblem&>(problem);
    auto kernel = static_cast<KernelKind>(tuned.at("kernel"));
    auto strategy = static_cast<Strategy>(tuned.at("strategy"));
    const int max_pack = static_cast<int>(tuned.at("pack"));
    int pack = usable_pack(p, kernel, strategy, max_pack, b.pointers[0], b.pointers[1]);
    if (pack == 0) {
      kernel = KernelKind::kGeneral;
      pack = usable_pack(p, kernel, Strategy::kGather, max_pack, b.pointers[0], b.pointers[1]);
    }
    return (kernel == KernelKind::kPacked2x ? 4 : 0) + std::countr_zero(static_cast<unsigned>(pack));
  }

  Config variant_config(const Problem&, const Config& tuned, int slot, const DeviceInfo&) const override {
    Config c = tuned;
    if (slot < 4 && static_cast<KernelKind>(tuned.at("kernel")) == KernelKind::kPacked2x) {
      c.set("kernel", static_cast<std::int64_t>(KernelKind::kGeneral));
      c.set("strategy", static_cast<std::int64_t>(Strategy::kGather));
    }
    c.set("pack", std::int64_t{1} << (slot & 3));
    return c;
  }

  // The scatter accumulates into the destination, which starts at zero.
  LaunchPrep prep(const Problem&, const Config& config) const override {
    LaunchPrep prep;
    if (static_cast<Strategy>(config.at("strategy")) == Strategy::kScatter) prep.zero_buffers = 1u << 1;
    return prep;
  }

  void kernel_args(const Problem& problem, const Config& config, const Bindings& b, KernelArgs& args) const override {
    const auto& p = static_cast<const UpsampleProblem&>(problem);
    args.push(make_params(p, static_cast<KernelKind>(config.at("kernel")),
                          static_cast<Strategy>(config.at("strategy")), static_cast<int>(config.at("pack")),
                          b.pointers[0], b.at(1)));
  }

  Workload workload(const Problem& problem, std::uint64_t seed) const override {
    const auto& p = static_cast<const UpsampleProblem&>(problem);
    Workload w;
    w.inputs.push_back(random_source(p, seed));
    const std::size_t bytes = static_cast<std::size_t>(p.dst_numel()) * dtype_size(p.dtype());
    w.output_bytes = {bytes};
    // The scatter accumulates into grad_input, which the op zeroes first; zeros stand in for that here (every
    // gather candidate of the same problem then writes over them, and the inputs are never zero).
    if (p.backward() && !p.packed_2x()) w.initial_outputs.push_back(std::vector<std::byte>(bytes));
    return w;
  }

  std::vector<std::vector<std::byte>> reference(const Problem& problem, const Workload& w) const override {
    const auto& p = static_cast<const UpsampleProblem&>(problem);
    return {reference_output(p, w.inputs.at(0))};
  }

  OutputCheck output_check(const Problem& problem, std::size_t) const override {
    const auto& p = static_cast<const UpsampleProblem&>(problem);
    // The forward copies elements and the gathers sum in the reference's order: exact. The scatter adds a
    // window's K parts in any order, 16-bit types in their own precision: fewer than 2K roundings (each run a
    // thread pre-sums, then each atomic), each of at most a unit roundoff of a partial sum below 4K (|values| < 4).
    const std::int64_t k = p.max_window_h() * p.max_window_w();
    if (!p.backward() || p.packed_2x() || k <= 1) return {p.dtype(), 0.0, 0.0};
    const double unit = p.dtype() == DType::kFloat32 ? std::ldexp(1.0, -24)
                        : p.dtype() == DType::kFloat16 ? std::ldexp(1.0, -11)
                                                       : std::ldexp(1.0, -8);
    return {p.dtype(), 2 * unit, static_cast<double>(2 * k * k) * 4.0 * unit};
  }

  std::vector<std::pair<std::string, std::string>> default_suite() const override {
    std::vector<std::pair<std::string, std::string>> cases;
    struct Shape {
      int n, c, h, w;
    };
    for (const char* layout : {"nchw", "nhwc"})
      for (const char* dtype : {"float32", "float16"})
        for (Shape s : {Shape{16, 32, 80, 80}, Shape{2, 640, 64, 64}, Shape{8, 256, 128, 128}})
          for (const char* dir : {"fwd", "bwd"}) {
            const std::string dims = std::to_string(s.n) + "x" + std::to_string(s.c) + "x" + std::to_string(s.h) +
                                     "x" + std::to_string(s.w);
            UpsampleNearest2d shape;
            shape.n = s.n;
            shape.c = s.c;
            shape.in_h = s.h;
            shape.in_w = s.w;
            shape.scale_h = shape.scale_w = 2.0;
            shape.layout = std::string(layout) == "nhwc" ? ImageLayout::kNHWC : ImageLayout::kNCHW;
            shape.dtype = parse_dtype(dtype);
            const UpsampleProblem problem(std::string(dir) == "bwd" ? Direction::kBackward : Direction::kForward,
                                          shape);
            cases.emplace_back("upsample2x_" + std::string(dir) + "_" + dtype + "_" + dims +
                                   (std::string(layout) == "nhwc" ? "_nhwc" : ""),
                               problem.signature());
          }
    // Beyond the public rows: the general kernels (x3 NCHW float32, x1.5 NHWC float16), forward and backward.
    for (const char* dir : {"forward", "backward"}) {
      const std::string d = std::string(dir) == "forward" ? "fwd" : "bwd";
      cases.emplace_back("upsample3x_" + d + "_float32_8x128x64x64",
                         "c=128;direction=" + std::string(dir) + ";dtype=float32;in_h=64;in_w=64;layout=nchw;"
                         "mode=nearest;n=8;out_h=192;out_w=192;scale_h=3;scale_w=3");
      cases.emplace_back("upsample1p5x_" + d + "_float16_8x128x96x96_nhwc",
                         "c=128;direction=" + std::string(dir) + ";dtype=float16;in_h=96;in_w=96;layout=nhwc;"
                         "mode=nearest;n=8;out_h=144;out_w=144;scale_h=1.5;scale_w=1.5");
    }
    // Inputs a few elements into their allocation (issue 19: "_src+N"): an exact 2x forward's input class is a
    // problem of its own (align = the offset's largest power-of-two byte divisor), tuned with the input placed there.
    const std::pair<std::string, int> views[] = {{"upsample2x_fwd_float16_8x256x128x128", 1},
                                                 {"upsample2x_fwd_float16_8x256x128x128_nhwc", 1},
                                                 {"upsample2x_fwd_float32_8x256x128x128", 1},
                                                 {"upsample2x_fwd_float16_2x640x64x64", 3}};
    for (const auto& view : views) {
      const std::string& base = view.first;
      const int offset = view.second;
      const auto at = std::find_if(cases.begin(), cases.end(), [&](const auto& c) { return c.first == base; });
      const auto aligned = parse_problem(at->second);
      const auto& u = static_cast<const UpsampleProblem&>(*aligned);
      const std::int64_t bytes = offset * static_cast<std::int64_t>(dtype_size(u.dtype()));
      const auto align = static_cast<std::uint8_t>(std::min<std::int64_t>(bytes & -bytes, 16));
      cases.emplace_back(base + "_src+" + std::to_string(offset),
                         UpsampleProblem(u.direction(), u.shape(), align).signature());
    }
    return cases;
  }

 private:
  Space space_;
};

}  // namespace

const Family& upsample_nearest2d_family() {
  static const UpsampleFamily family;
  return family;
}

}  // namespace templates::upsample_nearest2d
}  // namespace jitune
