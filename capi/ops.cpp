// The C ABI's ops: one C function per C++ op (arguments converted, the C++ op called, nothing allocated on
// the way in), each op's signature, and the generic jitune_call / jitune_call_signature.
#include <type_traits>

#include <jitune/ops.hpp>

#include "capi/boundary.hpp"

namespace jitune::capi {
namespace {

static_assert(JITUNE_FLOAT32 == static_cast<int>(DType::kFloat32) &&
              JITUNE_FLOAT16 == static_cast<int>(DType::kFloat16) &&
              JITUNE_BFLOAT16 == static_cast<int>(DType::kBFloat16) &&
              JITUNE_FLOAT64 == static_cast<int>(DType::kFloat64) &&
              JITUNE_INT8 == static_cast<int>(DType::kInt8) &&
              JITUNE_UINT8 == static_cast<int>(DType::kUInt8) &&
              JITUNE_INT16 == static_cast<int>(DType::kInt16) &&
              JITUNE_INT32 == static_cast<int>(DType::kInt32) &&
              JITUNE_INT64 == static_cast<int>(DType::kInt64));
static_assert(JITUNE_FP32_IEEE == static_cast<int>(Fp32Precision::kIeee) &&
              JITUNE_FP32_TF32 == static_cast<int>(Fp32Precision::kTF32));
static_assert(JITUNE_NCHW == static_cast<int>(ImageLayout::kNCHW) &&
              JITUNE_NHWC == static_cast<int>(ImageLayout::kNHWC));
static_assert(JITUNE_NEAREST == static_cast<int>(NearestMode::kNearest) &&
              JITUNE_NEAREST_EXACT == static_cast<int>(NearestMode::kNearestExact));
static_assert(JITUNE_REDUCE_SUM == static_cast<int>(ReduceOp::kSum) &&
              JITUNE_REDUCE_MAX == static_cast<int>(ReduceOp::kMax));
static_assert(std::is_same_v<std::int32_t, int>, "permute's perm is passed to the C++ op as int");

constexpr std::size_t kUpsampleV0 = JITUNE_V0_SIZE(jitune_upsample_nearest2d_shape, dtype);
constexpr std::size_t kConv2dV0 = JITUNE_V0_SIZE(jitune_conv2d_params, dilation);

Stream stream_arg(void* stream) {
  return static_cast<Stream>(stream);
}

std::string_view text_arg(const char* text, const char* function, const char* argument) {
  return require(text, function, argument);
}

UpsampleNearest2d upsample_arg(const jitune_upsample_nearest2d_shape* in, const char* fn) {
  const jitune_upsample_nearest2d_shape c = read_struct(in, kUpsampleV0, fn, "shape");
  UpsampleNearest2d s;
  s.n = c.n;
  s.c = c.c;
  s.in_h = c.in_h;
  s.in_w = c.in_w;
  s.out_h = c.out_h;
  s.out_w = c.out_w;
  if (c.scale_h != 0) s.scale_h = c.scale_h;
  if (c.scale_w != 0) s.scale_w = c.scale_w;
  s.layout = static_cast<ImageLayout>(enum_arg(c.layout, 2, "jitune_image_layout", fn, "shape->layout"));
  s.mode = static_cast<NearestMode>(enum_arg(c.mode, 2, "jitune_nearest_mode", fn, "shape->mode"));
  s.dtype = dtype_arg(c.dtype, fn, "shape->dtype");
  return s;
}

// A C call's shapes, and its epilogue as a view of the caller's text (alive for the call): a warm call copies no
// string (Conv2dParams' epilogue stays empty; the call's text is set from the view).
struct Conv2dCall {
  Conv2dParams params;
  std::string_view epilogue;

  CallArgs args(DType dtype, bool has_bias) const {
    CallArgs a;
    conv2d_call_args(a, params, dtype, has_bias);
    a.text(epilogue);
    return a;
  }
};

Conv2dCall conv2d_arg(const jitune_conv2d_params* in, const char* fn) {
  const jitune_conv2d_params c = read_struct(in, kConv2dV0, fn, "params");
  Conv2dCall call;
  Conv2dParams& p = call.params;
  std::copy_n(c.input, 4, p.input.begin());
  std::copy_n(c.weight, 4, p.weight.begin());
  std::copy_n(c.stride, 2, p.stride.begin());
  std::copy_n(c.padding, 2, p.padding.begin());
  std::copy_n(c.dilation, 2, p.dilation.begin());
  p.layout = static_cast<ImageLayout>(enum_arg(c.layout, 2, "jitune_image_layout", fn, "params->layout"));
  if (c.epilogue) call.epilogue = c.epilogue;
  p.precision =
      static_cast<Fp32Precision>(enum_arg(c.precision, 2, "jitune_fp32_precision", fn, "params->precision"));
  return call;
}

void conv2d_c(Runtime& rt, const Conv2dCall& c, const void* x, const void* w, const void* bias, const void* residual,
              void* y, DType dtype, Stream stream) {
  const CallArgs args = c.args(dtype, bias != nullptr);
  const void* buffers[] = {x, w, bias, y, residual};
  call(rt, "conv2d", args, buffers, stream);
}

ReduceOp reduce_op_arg(int op, const char* fn) {
  return static_cast<ReduceOp>(enum_arg(op, 2, "jitune_reduce_op", fn, "op"));
}

std::span<const int> perm_arg(const std::int32_t* perm, std::size_t n_dims, const char* fn) {
  return array_arg(perm, n_dims, fn, "perm");
}

// The key values of a call, as jitune_call takes them.
CallArgs call_args(const std::int64_t* values, std::size_t n_values, const char* text, const char* fn) {
  if (n_values > CallArgs::kMaxValues)
    throw InvalidArgument(std::string(fn) + ": n_values is " + std::to_string(n_values) +
                          "; a call has at most " + std::to_string(CallArgs::kMaxValues));
  CallArgs args;
  for (std::int64_t v : array_arg(values, n_values, fn, "values")) args.add(v);
  if (text) args.text(text);
  return args;
}

}  // namespace
}  // namespace jitune::capi

using namespace jitune;
using namespace jitune::capi;

extern "C" {

JITUNE_API jitune_status jitune_elementwise(jitune_runtime* runtime, const char* expression,
                                            const void* const* inputs, size_t n_inputs, void* output,
                                            int64_t n, jitune_dtype dtype, void* stream) {
  return guarded("jitune_elementwise", [&](const char* fn) {
    elementwise(runtime_arg(runtime, fn), text_arg(expression, fn, "expression"),
                array_arg(inputs, n_inputs, fn, "inputs"), output, n, dtype_arg(dtype, fn, "dtype"),
                stream_arg(stream));
  });
}

JITUNE_API jitune_status jitune_elementwise_signature(const char* expression, int64_t n, jitune_dtype dtype,
                                                      char* out, size_t out_size, size_t* required) {
  return guarded("jitune_elementwise_signature", [&](const char* fn) {
    write_text(
        elementwise_signature(text_arg(expression, fn, "expression"), n, dtype_arg(dtype, fn, "dtype")), out,
        out_size, required, fn);
  });
}

JITUNE_API jitune_status jitune_permute(jitune_runtime* runtime, const void* src, void* dst,
                                        const int64_t* shape, const int32_t* perm, size_t n_dims,
                                        jitune_dtype dtype, void* stream) {
  return guarded("jitune_permute", [&](const char* fn) {
    permute(runtime_arg(runtime, fn), src, dst, array_arg(shape, n_dims, fn, "shape"),
            perm_arg(perm, n_dims, fn), dtype_arg(dtype, fn, "dtype"), stream_arg(stream));
  });
}

JITUNE_API jitune_status jitune_permute_signature(const int64_t* shape, const int32_t* perm, size_t n_dims,
                                                  jitune_dtype dtype, char* out, size_t out_size,
                                                  size_t* required) {
  return guarded("jitune_permute_signature", [&](const char* fn) {
    write_text(permute_signature(array_arg(shape, n_dims, fn, "shape"), perm_arg(perm, n_dims, fn),
                                 dtype_arg(dtype, fn, "dtype")),
               out, out_size, required, fn);
  });
}

JITUNE_API jitune_status jitune_upsample_nearest2d(jitune_runtime* runtime,
                                                   const jitune_upsample_nearest2d_shape* shape,
                                                   const void* input, void* output, void* stream) {
  return guarded("jitune_upsample_nearest2d", [&](const char* fn) {
    Runtime& rt = runtime_arg(runtime, fn);
    upsample_nearest2d(rt, upsample_arg(shape, fn), input, output, stream_arg(stream));
  });
}

JITUNE_API jitune_status jitune_upsample_nearest2d_backward(jitune_runtime* runtime,
                                                            const jitune_upsample_nearest2d_shape* shape,
                                                            const void* grad_output, void* grad_input,
                                                            void* stream) {
  return guarded("jitune_upsample_nearest2d_backward", [&](const char* fn) {
    Runtime& rt = runtime_arg(runtime, fn);
    upsample_nearest2d_backward(rt, upsample_arg(shape, fn), grad_output, grad_input, stream_arg(stream));
  });
}

JITUNE_API jitune_status jitune_upsample_nearest2d_signature(const jitune_upsample_nearest2d_shape* shape,
                                                             int backward, char* out, size_t out_size,
                                                             size_t* required) {
  return guarded("jitune_upsample_nearest2d_signature", [&](const char* fn) {
    write_text(upsample_nearest2d_signature(upsample_arg(shape, fn), backward != 0), out, out_size, required,
               fn);
  });
}

JITUNE_API jitune_status jitune_index_add(jitune_runtime* runtime, void* dst, int64_t dst_rows,
                                          const void* index, int64_t index_count, jitune_dtype index_dtype,
                                          const void* src, int64_t src_rows, int64_t row_length,
                                          jitune_dtype dtype, float alpha, int check_indices, void* stream) {
  return guarded("jitune_index_add", [&](const char* fn) {
    Runtime& rt = runtime_arg(runtime, fn);
    index_add(rt, dst, dst_rows, index, index_count, dtype_arg(index_dtype, fn, "index_dtype"), src, src_rows,
              row_length, dtype_arg(dtype, fn, "dtype"), stream_arg(stream), {alpha, check_indices != 0});
  });
}

JITUNE_API jitune_status jitune_index_add_signature(int64_t dst_rows, int64_t index_count, int64_t row_length,
                                                    jitune_dtype dtype, jitune_dtype index_dtype, char* out,
                                                    size_t out_size, size_t* required) {
  return guarded("jitune_index_add_signature", [&](const char* fn) {
    write_text(index_add_signature(dst_rows, index_count, row_length, dtype_arg(dtype, fn, "dtype"),
                                   dtype_arg(index_dtype, fn, "index_dtype")),
               out, out_size, required, fn);
  });
}

JITUNE_API jitune_status jitune_scatter_add(jitune_runtime* runtime, void* dst, int64_t dst_count,
                                            const void* index, int64_t index_count, jitune_dtype index_dtype,
                                            const void* src, int64_t src_count, jitune_dtype dtype,
                                            float alpha, int check_indices, void* stream) {
  return guarded("jitune_scatter_add", [&](const char* fn) {
    Runtime& rt = runtime_arg(runtime, fn);
    scatter_add(rt, dst, dst_count, index, index_count, dtype_arg(index_dtype, fn, "index_dtype"), src,
                src_count, dtype_arg(dtype, fn, "dtype"), stream_arg(stream), {alpha, check_indices != 0});
  });
}

JITUNE_API jitune_status jitune_scatter_add_signature(int64_t dst_count, int64_t index_count,
                                                      int64_t src_count, jitune_dtype dtype,
                                                      jitune_dtype index_dtype, char* out, size_t out_size,
                                                      size_t* required) {
  return guarded("jitune_scatter_add_signature", [&](const char* fn) {
    // The values jitune::scatter_add packs (its header has no *_signature of its own).
    CallArgs args;
    args.add(1).add(static_cast<std::int64_t>(dtype_arg(dtype, fn, "dtype")));
    args.add(static_cast<std::int64_t>(dtype_arg(index_dtype, fn, "index_dtype")));
    args.add(dst_count).add(index_count).add(src_count);
    write_text(call_signature("scatter_add", args), out, out_size, required, fn);
  });
}

JITUNE_API jitune_status jitune_dot(jitune_runtime* runtime, const void* x, const void* y, int64_t n,
                                    void* out, jitune_dtype dtype, void* stream) {
  return guarded("jitune_dot", [&](const char* fn) {
    dot(runtime_arg(runtime, fn), x, y, n, out, dtype_arg(dtype, fn, "dtype"), stream_arg(stream));
  });
}

JITUNE_API jitune_status jitune_dot_signature(int64_t n, jitune_dtype dtype, char* out, size_t out_size,
                                              size_t* required) {
  return guarded("jitune_dot_signature", [&](const char* fn) {
    write_text(dot_signature(n, dtype_arg(dtype, fn, "dtype")), out, out_size, required, fn);
  });
}

JITUNE_API jitune_status jitune_conv2d(jitune_runtime* runtime, const void* x, const void* w,
                                       const void* bias, void* y, const jitune_conv2d_params* params,
                                       jitune_dtype dtype, void* stream) {
  return guarded("jitune_conv2d", [&](const char* fn) {
    conv2d_c(runtime_arg(runtime, fn), conv2d_arg(params, fn), x, w, bias, nullptr, y, dtype_arg(dtype, fn, "dtype"),
             stream_arg(stream));
  });
}

JITUNE_API jitune_status jitune_conv2d_fused(jitune_runtime* runtime, const void* x, const void* w,
                                             const void* bias, const void* residual, void* y,
                                             const jitune_conv2d_params* params, jitune_dtype dtype,
                                             void* stream) {
  return guarded("jitune_conv2d_fused", [&](const char* fn) {
    conv2d_c(runtime_arg(runtime, fn), conv2d_arg(params, fn), x, w, bias, residual, y,
             dtype_arg(dtype, fn, "dtype"), stream_arg(stream));
  });
}

JITUNE_API jitune_status jitune_conv2d_output_shape(const jitune_conv2d_params* params,
                                                    int64_t* output_shape) {
  return guarded("jitune_conv2d_output_shape", [&](const char* fn) {
    require(output_shape, fn, "output_shape");
    const std::array<std::int64_t, 4> shape = conv2d_output_shape(conv2d_arg(params, fn).params);
    std::copy(shape.begin(), shape.end(), output_shape);
  });
}

JITUNE_API jitune_status jitune_conv2d_signature(const jitune_conv2d_params* params, jitune_dtype dtype,
                                                 int has_bias, char* out, size_t out_size, size_t* required) {
  return guarded("jitune_conv2d_signature", [&](const char* fn) {
    write_text(call_signature("conv2d", conv2d_arg(params, fn).args(dtype_arg(dtype, fn, "dtype"), has_bias != 0)),
               out, out_size, required, fn);
  });
}

JITUNE_API jitune_status jitune_reduce_rows(jitune_runtime* runtime, const void* x, void* y, int64_t rows,
                                            int64_t cols, jitune_reduce_op op, jitune_dtype dtype,
                                            void* stream) {
  return guarded("jitune_reduce_rows", [&](const char* fn) {
    reduce_rows(runtime_arg(runtime, fn), x, y, rows, cols, reduce_op_arg(op, fn),
                dtype_arg(dtype, fn, "dtype"), stream_arg(stream));
  });
}

JITUNE_API jitune_status jitune_reduce_rows_signature(int64_t rows, int64_t cols, jitune_reduce_op op,
                                                      jitune_dtype dtype, char* out, size_t out_size,
                                                      size_t* required) {
  return guarded("jitune_reduce_rows_signature", [&](const char* fn) {
    write_text(reduce_rows_signature(rows, cols, reduce_op_arg(op, fn), dtype_arg(dtype, fn, "dtype")), out,
               out_size, required, fn);
  });
}

JITUNE_API jitune_status jitune_call(jitune_runtime* runtime, const char* family, const int64_t* values,
                                     size_t n_values, const char* text, const double* scalars,
                                     size_t n_scalars, const void* const* buffers, size_t n_buffers,
                                     void* stream) {
  return guarded("jitune_call", [&](const char* fn) {
    Runtime& rt = runtime_arg(runtime, fn);
    const std::string_view family_name = text_arg(family, fn, "family");
    CallArgs args = call_args(values, n_values, text, fn);
    if (n_scalars > CallArgs::kMaxScalars)
      throw InvalidArgument(std::string(fn) + ": n_scalars is " + std::to_string(n_scalars) +
                            "; a call has at most " + std::to_string(CallArgs::kMaxScalars));
    for (double s : array_arg(scalars, n_scalars, fn, "scalars")) args.scalar(s);
    call(rt, family_name, args, array_arg(buffers, n_buffers, fn, "buffers"), stream_arg(stream));
  });
}

JITUNE_API jitune_status jitune_call_signature(const char* family, const int64_t* values, size_t n_values,
                                               const char* text, char* out, size_t out_size,
                                               size_t* required) {
  return guarded("jitune_call_signature", [&](const char* fn) {
    const std::string_view family_name = text_arg(family, fn, "family");
    write_text(call_signature(family_name, call_args(values, n_values, text, fn)), out, out_size, required,
               fn);
  });
}

}  // extern "C"
