// The conv2d problem: option and call parsing, validation, output size, signature and features.
#include <jitune/ops/conv2d.hpp>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>

#include "templates/conv2d/conv2d_detail.hpp"
#include "templates/elementwise/expression.hpp"

namespace jitune::templates::conv2d {
namespace {

bool supported(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16;
}

std::int64_t parse_int(const std::map<std::string, std::string>& options, const std::string& key,
                       std::int64_t fallback, bool required) {
  auto it = options.find(key);
  if (it == options.end()) {
    if (required)
      throw InvalidArgument("conv2d problem: missing '" + key +
                            "' (options: dtype, n, c, h, w, k, r, s, stride, padding, dilation, bias, layout, "
                            "epilogue, precision)");
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
    throw InvalidArgument("conv2d: x has " + std::to_string(p.input[1]) +
                          " channels (input {N, C, H, W} = " + dims_text(p.input) + ") but w expects " +
                          std::to_string(p.weight[1]) + " (weight {K, C, R, S} = " + dims_text(p.weight) +
                          "); the second dimension of input and weight must match");
  ConvProblem::Shape s;
  s.n = p.input[0], s.c = p.input[1], s.h = p.input[2], s.w = p.input[3];
  s.k = p.weight[0], s.r = p.weight[2], s.s = p.weight[3];
  s.stride_h = p.stride[0], s.stride_w = p.stride[1];
  s.pad_h = p.padding[0], s.pad_w = p.padding[1];
  s.dilation_h = p.dilation[0], s.dilation_w = p.dilation[1];
  s.bias = has_bias;
  s.layout = p.layout;
  s.epilogue = p.epilogue;
  s.precision = p.precision;
  return ConvProblem(dtype, s);
}

}  // namespace

namespace detail {

std::unique_ptr<Problem> make_problem(const std::map<std::string, std::string>& options) {
  static const char* const known[] = {"dtype", "n",     "c",        "h",          "w",          "k",
                                      "r",     "s",     "stride",   "stride_h",   "stride_w",   "padding",
                                      "pad_h", "pad_w", "dilation", "dilation_h", "dilation_w", "bias",
                                      "layout", "epilogue", "precision"};
  for (const auto& option : options)  // no structured binding: clang 14 cannot capture one in the lambda
    if (const std::string& key = option.first;
        std::find_if(std::begin(known), std::end(known), [&](const char* k) { return key == k; }) ==
        std::end(known))
      throw InvalidArgument(
          "conv2d problem: unknown option '" + key +
          "'; options are dtype, n, c, h, w, k, r, s, stride[_h|_w], padding / pad_h / pad_w, "
          "dilation[_h|_w], bias, layout, epilogue, precision");
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
  if (auto layout = options.find("layout"); layout != options.end()) {
    if (layout->second == "nhwc") s.layout = ImageLayout::kNHWC;
    else if (layout->second != "nchw")
      throw InvalidArgument("conv2d problem: layout '" + layout->second + "' is not nchw or nhwc (channels last)");
  }
  if (auto epilogue = options.find("epilogue"); epilogue != options.end()) s.epilogue = epilogue->second;
  if (auto precision = options.find("precision"); precision != options.end()) {
    if (precision->second == "tf32") s.precision = Fp32Precision::kTF32;
    else if (precision->second != "ieee")
      throw InvalidArgument("conv2d problem: precision '" + precision->second +
                            "' is not ieee (exact float32 products) or tf32 (TF32 tensor cores allowed)");
  }
  return std::make_unique<ConvProblem>(parse_dtype(dt->second), s);
}

std::unique_ptr<Problem> problem_from_call(const CallArgs& args) {
  CallReader in(args);
  const DType dtype = in.next_dtype();
  Conv2dParams params;
  for (auto* part : {&params.input, &params.weight})
    for (std::int64_t& v : *part) v = in.next();
  for (auto* part : {&params.stride, &params.padding, &params.dilation})
    for (std::int64_t& v : *part) v = in.next();
  const bool bias = in.next_bool();
  const std::int64_t layout = in.next();
  if (layout != 0 && layout != 1)
    throw InvalidArgument("conv2d: layout " + std::to_string(layout) + " is neither NCHW (0) nor NHWC (1)");
  params.layout = static_cast<ImageLayout>(layout);
  const std::int64_t precision = in.next();
  if (precision != 0 && precision != 1)
    throw InvalidArgument("conv2d: precision " + std::to_string(precision) +
                          " is neither ieee (0, exact float32 products) nor tf32 (1, TF32 tensor cores allowed)");
  params.precision = static_cast<Fp32Precision>(precision);
  params.epilogue = in.text();
  return std::make_unique<ConvProblem>(problem_of(params, dtype, bias));
}

}  // namespace detail

ConvProblem::ConvProblem(DType dtype, const Shape& s) : dtype_(dtype), shape_(s) {
  if (!supported(dtype))
    throw InvalidArgument("conv2d: dtype " + std::string(dtype_name(dtype)) +
                          " is not supported; use float32, float16 or bfloat16");
  if (s.layout != ImageLayout::kNCHW && s.layout != ImageLayout::kNHWC)
    throw InvalidArgument("conv2d: unknown layout " + std::to_string(static_cast<int>(s.layout)));
  if (s.precision != Fp32Precision::kIeee && s.precision != Fp32Precision::kTF32)
    throw InvalidArgument("conv2d: unknown precision " + std::to_string(static_cast<int>(s.precision)) +
                          "; it is ieee or tf32");
  // Only float32 inputs lose bits to TF32: a 16-bit problem is the same with either, so it keeps one signature.
  if (dtype != DType::kFloat32) shape_.precision = Fp32Precision::kIeee;
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
  if (!s.epilogue.empty()) {
    try {
      epilogue_ = elementwise::parse_expression_cached(s.epilogue);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(std::string("conv2d epilogue: ") + e.what());
    }
    bool reads_acc = false;
    for (const std::string& name : epilogue_->inputs) {
      if (name == "acc") reads_acc = true;
      else if (name == "r") residual_ = true;
      else
        throw InvalidArgument("conv2d epilogue '" + s.epilogue + "' reads '" + name +
                              "'; an epilogue reads acc (the convolution plus bias) and r (the element of a residual "
                              "tensor shaped like y) only: pass a bias with the bias argument, and write constants "
                              "as numbers");
    }
    if (!reads_acc)
      throw InvalidArgument("conv2d epilogue '" + s.epilogue +
                            "' does not read acc, the convolution's value; write it over acc, e.g. 'y = max(acc, "
                            "0.0f)'");
    shape_.epilogue = epilogue_->canonical;
  }
}

std::string ConvProblem::signature() const {
  const Shape& s = shape_;
  return "bias=" + std::to_string(s.bias ? 1 : 0) + ";c=" + std::to_string(s.c) +
         ";dilation_h=" + std::to_string(s.dilation_h) + ";dilation_w=" + std::to_string(s.dilation_w) +
         ";dtype=" + std::string(dtype_name(dtype_)) + (s.epilogue.empty() ? "" : ";epilogue=" + s.epilogue) +
         ";h=" + std::to_string(s.h) +
         ";k=" + std::to_string(s.k) + ";layout=" + std::string(image_layout_name(s.layout)) +
         ";n=" + std::to_string(s.n) + ";pad_h=" + std::to_string(s.pad_h) +
         ";pad_w=" + std::to_string(s.pad_w) + (tf32() ? ";precision=tf32" : "") + ";r=" + std::to_string(s.r) +
         ";s=" + std::to_string(s.s) +
         ";stride_h=" + std::to_string(s.stride_h) + ";stride_w=" + std::to_string(s.stride_w) +
         ";w=" + std::to_string(s.w);
}

std::string ConvProblem::group() const {
  const Shape& s = shape_;
  return std::string(dtype_name(dtype_)) + (tf32() ? "+tf32|" : "|") + std::string(image_layout_name(s.layout)) +
         "|f=" +
         std::to_string(s.r) + "x" + std::to_string(s.s) +
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
                       static_cast<double>(s.n * s.k) * static_cast<double>(p_ * q_) * (residual_ ? 2.0 : 1.0) +
                       (s.bias ? double(s.k) : 0.0);
  return elems * static_cast<double>(dtype_size(dtype_));
}

double ConvProblem::flops() const {
  return 2.0 * static_cast<double>(shape_.n * shape_.k) * static_cast<double>(p_ * q_) *
         static_cast<double>(terms());
}

}  // namespace jitune::templates::conv2d

namespace jitune {

std::array<std::int64_t, 4> conv2d_output_shape(const Conv2dParams& params) {
  const templates::conv2d::ConvProblem p = templates::conv2d::problem_of(params, DType::kFloat32, false);
  return {p.shape().n, p.shape().k, p.p(), p.q()};
}

}  // namespace jitune
