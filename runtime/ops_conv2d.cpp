// jitune::conv2d: warm path = hash lookup of the raw call arguments, cuLaunchKernel. The kernel handles any
// element-aligned pointers itself, so one kernel serves every call of a problem.
#include <cstring>

#include <jitune/ops.hpp>

#include "runtime/op_caches.hpp"
#include "templates/conv2d/conv2d.hpp"

namespace jitune {
namespace {

std::string dims(const std::array<std::int64_t, 4>& d) {
  return "{" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) + ", " +
         std::to_string(d[3]) + "}";
}

conv::ConvProblem make_problem(const Conv2dParams& p, DType dtype, bool has_bias) {
  if (p.input[1] != p.weight[1])
    throw InvalidArgument("conv2d: x has " + std::to_string(p.input[1]) +
                          " channels (input {N, C, H, W} = " + dims(p.input) + ") but w expects " +
                          std::to_string(p.weight[1]) + " (weight {K, C, R, S} = " + dims(p.weight) +
                          "); the second dimension of input and weight must match");
  conv::ConvProblem::Shape s;
  s.n = p.input[0], s.c = p.input[1], s.h = p.input[2], s.w = p.input[3];
  s.k = p.weight[0], s.r = p.weight[2], s.s = p.weight[3];
  s.stride_h = p.stride[0], s.stride_w = p.stride[1];
  s.pad_h = p.padding[0], s.pad_w = p.padding[1];
  s.dilation_h = p.dilation[0], s.dilation_w = p.dilation[1];
  s.bias = has_bias;
  return conv::ConvProblem(dtype, s);
}

void check_pointer(const void* ptr, const char* what, DType dtype) {
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  const std::size_t es = dtype_size(dtype);
  if (addr == 0 || addr % es != 0)
    throw InvalidArgument(
        std::string("conv2d: ") + what + " pointer " +
        (addr == 0 ? "is null" : "is not aligned to its " + std::to_string(es) + "-byte element type") +
        "; pass a device pointer to " + std::string(dtype_name(dtype)) + " elements");
}

}  // namespace

std::array<std::int64_t, 4> conv2d_output_shape(const Conv2dParams& params) {
  const conv::ConvProblem p = make_problem(params, DType::kFloat32, false);
  return {p.shape().n, p.shape().k, p.p(), p.q()};
}

std::string conv2d_signature(const Conv2dParams& params, DType dtype, bool has_bias) {
  return make_problem(params, dtype, has_bias).signature();
}

void conv2d(Runtime& runtime, const void* x, const void* w, const void* bias, void* y,
            const Conv2dParams& params, DType dtype, Stream stream) {
  Runtime::Impl& impl = runtime.impl();
  const Family& family = conv::conv2d_family();
  if (params.input[0] == 0) {
    make_problem(params, dtype, bias != nullptr);  // validates: a wrong call fails the same way at N = 0
    return;
  }
  // Key: family name, then the raw argument values (a mismatched call never gets an entry: make throws).
  constexpr std::size_t kPrefix = 7;  // "conv2d\n"
  char key[kPrefix + 14 * sizeof(std::int64_t) + 2];
  std::memcpy(key, "conv2d\n", kPrefix);
  std::size_t at = kPrefix;
  for (const auto* part : {params.input.data(), params.weight.data()}) {
    std::memcpy(key + at, part, 4 * sizeof(std::int64_t));
    at += 4 * sizeof(std::int64_t);
  }
  for (const auto* part : {params.stride.data(), params.padding.data(), params.dilation.data()}) {
    std::memcpy(key + at, part, 2 * sizeof(std::int64_t));
    at += 2 * sizeof(std::int64_t);
  }
  key[at++] = static_cast<char>(dtype);
  key[at++] = bias ? 1 : 0;
  OpEntry& e = op_entry(impl, family, std::string_view(key, at), [&] {
    return std::make_unique<conv::ConvProblem>(make_problem(params, dtype, bias != nullptr));
  });
  check_pointer(x, "x", dtype);
  check_pointer(w, "w", dtype);
  check_pointer(y, "y", dtype);
  if (bias) check_pointer(bias, "bias", dtype);
  const auto& problem = static_cast<const conv::ConvProblem&>(*e.problem);
  const Config& config = e.decision->config;
  const Kernel* k = e.kernels[0].load(std::memory_order_acquire);
  if (!k) {
    const std::string why = family.validate(problem, config, impl.device);
    if (!why.empty())
      throw InvalidArgument("conv2d " + problem.signature() +
                            ": no kernel configuration fits this problem on " + impl.device.name + ": " +
                            why);
    k = &op_kernel(impl, family, e, 0, config);
  }
  KernelArgs args;
  conv::push_args(problem, config, x, w, bias, y, args);
  impl.launch(*k, args, stream);
}

}  // namespace jitune
