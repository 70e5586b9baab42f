/* The jitune C ABI: every op of every kernel family, runtimes, explain, tuning and the cache's export /
 * import behind plain C functions, for C programs and for other languages (the Python package calls it
 * through ctypes). Shipped as libjitune.so (SONAME libjitune.so.0); the header is C99 and C++ alike.
 * docs/c-abi.md describes the rules; in short:
 *
 * Errors. Every function that can fail returns a jitune_status; on failure jitune_last_error() says what was
 * wrong (on this thread, until this thread's next jitune call). No C++ exception ever leaves the library.
 *
 * Memory. Ops take raw device pointers of the runtime's device (cudaMalloc, PyTorch, CuPy, ...) with sizes
 * and dtype codes; `stream` is a cudaStream_t / CUstream (NULL: the legacy default stream). Ops run
 * asynchronously on the stream, as the C++ ops do.
 *
 * Structs are owned by the caller and begin with `size_t struct_size`, which the caller sets to sizeof(the
 * struct) after zeroing it: the library reads and writes only what that size covers, so callers built against
 * an older or newer header keep working. A zero field means its default. No struct is returned by value.
 *
 * Texts the library returns are written into caller buffers (`out`, `out_size`); `*required` receives the
 * bytes needed, the terminating NUL included, and a buffer that is too small gets
 * JITUNE_ERROR_BUFFER_TOO_SMALL.
 *
 * Threads. One jitune_runtime may be shared by threads; each op call is thread-safe. */
#ifndef JITUNE_JITUNE_H
#define JITUNE_JITUNE_H

#include <stddef.h>
#include <stdint.h>

#if defined(JITUNE_BUILDING_C_ABI)
#define JITUNE_API __attribute__((visibility("default")))
#else
#define JITUNE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes and errors */

/** What a call did; the values never change. Each error names a C++ exception class of jitune (or a C-level
 *  condition); the message of jitune_last_error() says what was wrong and what to do. */
typedef enum jitune_status {
  /** Done (an op is queued on its stream). */
  JITUNE_OK = 0,
  /** jitune::InvalidArgument: a NULL, misaligned or host pointer, a bad shape or dtype, an unknown family, a
   *  struct_size too small, ... */
  JITUNE_ERROR_INVALID_ARGUMENT = 1,
  /** jitune::NoDevice: no driver, no GPU, or no device of that ordinal. */
  JITUNE_ERROR_NO_DEVICE = 2,
  /** jitune::CudaError: a CUDA driver call failed (its error name is in the message); after a kernel fault
   * the context is unusable. */
  JITUNE_ERROR_CUDA = 3,
  /** jitune::CompileError: NVRTC rejected a kernel (the log is in the message). */
  JITUNE_ERROR_COMPILE = 4,
  /** jitune::StoreError: a tuning database could not be opened, read or written. */
  JITUNE_ERROR_STORE = 5,
  /** Any other jitune::Error (tuning found no candidate that verifies, an internal error). */
  JITUNE_ERROR_OTHER = 6,
  /** std::bad_alloc: host memory ran out. */
  JITUNE_ERROR_OUT_OF_MEMORY = 7,
  /** A caller's text buffer is smaller than *required; nothing was written. */
  JITUNE_ERROR_BUFFER_TOO_SMALL = 8,
  /** An exception that is no jitune::Error (a bug: please report it). */
  JITUNE_ERROR_UNKNOWN = 9
} jitune_status;

/** The message of this thread's last failed jitune call ("" after a call that succeeded). Never NULL. The
 * text stays valid until this thread's next jitune call (jitune_last_error and jitune_status_name excepted).
 */
JITUNE_API const char* jitune_last_error(void);

/** The enumerator's name ("JITUNE_ERROR_INVALID_ARGUMENT"); "JITUNE_UNKNOWN_STATUS" for other values. Static
 * text, never NULL. */
JITUNE_API const char* jitune_status_name(int status);

/** The library's version, "MAJOR.MINOR.PATCH" (static text). */
JITUNE_API const char* jitune_version(void);

/* Codes shared with the C++ API */

/** Element types: the values of jitune::DType. Ops list the ones they take. */
typedef enum jitune_dtype {
  JITUNE_FLOAT32 = 0,
  JITUNE_FLOAT16 = 1,
  JITUNE_BFLOAT16 = 2,
  JITUNE_FLOAT64 = 3,
  JITUNE_INT8 = 4,
  JITUNE_UINT8 = 5,
  JITUNE_INT16 = 6,
  JITUNE_INT32 = 7,
  JITUNE_INT64 = 8
} jitune_dtype;

/** Memory layout of an image batch: jitune::ImageLayout. */
typedef enum jitune_image_layout { JITUNE_NCHW = 0, JITUNE_NHWC = 1 } jitune_image_layout;

/** How float32 products may be computed: jitune::Fp32Precision (PyTorch's fp32_precision "ieee" / "tf32"). */
typedef enum jitune_fp32_precision { JITUNE_FP32_IEEE = 0, JITUNE_FP32_TF32 = 1 } jitune_fp32_precision;

/** Source pixel rule of upsample_nearest2d: jitune::NearestMode (PyTorch's mode="nearest" / "nearest-exact").
 */
typedef enum jitune_nearest_mode { JITUNE_NEAREST = 0, JITUNE_NEAREST_EXACT = 1 } jitune_nearest_mode;

/** What reduce_rows computes over a row: jitune::ReduceOp. */
typedef enum jitune_reduce_op { JITUNE_REDUCE_SUM = 0, JITUNE_REDUCE_MAX = 1 } jitune_reduce_op;

/* Devices and runtimes */

/** Number of CUDA devices the driver sees: 0 without a driver or a device (still JITUNE_OK). */
JITUNE_API jitune_status jitune_device_count(int* count);

/** A runtime: one device, its compiler and kernel cache, the tuning caches and the dispatcher. Opaque. */
typedef struct jitune_runtime jitune_runtime;

/** How a runtime is made. Zero every field, set struct_size = sizeof(jitune_runtime_options), then set what
 * differs from the defaults (each zero means the default named on it). Mirrors jitune::RuntimeOptions. */
typedef struct jitune_runtime_options {
  /** sizeof(jitune_runtime_options). */
  size_t struct_size;
  /** CUDA device ordinal (its primary context is used). */
  int device;
  /** Tuning database read and written; NULL: $JITUNE_CACHE_DIR/tuning.sqlite, else
   *  ~/.cache/jitune/tuning.sqlite. */
  const char* user_cache;
  /** Non-zero: no user cache (nothing is written). */
  int disable_user_cache;
  /** Extra read-only tuning databases (n_shipped_caches paths), searched after the user cache. */
  const char* const* shipped_caches;
  size_t n_shipped_caches;
  /** Non-zero: the caches installed with jitune are not consulted. */
  int disable_builtin_shipped_caches;
  /** Compiled kernels; NULL: <folder of the user cache>/kernels. */
  const char* binary_cache_dir;
  /** Non-zero: compiled kernels are kept in memory only. */
  int disable_disk_binary_cache;
  /** Non-zero: cache problems are not printed to stderr (they are still in jitune_runtime_warnings and in
   *  explain's notes). */
  int quiet;
  /** Non-zero: a problem without an exact tuned record is tuned the first time it is called, and the result
   *  stored in the user cache. */
  int tune_on_first_use;
  /** Candidates tried per problem when tuning on first use: > 0 that many (a random sample with the heuristic
   *  default); 0: 48; < 0: the whole legal space. */
  int64_t tune_budget;
  /** Minimum timed milliseconds per candidate when tuning on first use; 0: 1 ms. */
  double tune_min_time_ms;
} jitune_runtime_options;

/** Opens a runtime on `options` (NULL: every default). On success *runtime is the new runtime; on failure it
 * is NULL (JITUNE_ERROR_NO_DEVICE without a usable GPU, with the reason). Unusable caches are not an error:
 * see jitune_runtime_warnings. The device's primary context becomes current on the calling thread. */
JITUNE_API jitune_status jitune_runtime_create(const jitune_runtime_options* options,
                                               jitune_runtime** runtime);

/** Frees a runtime; NULL is accepted and does nothing (as free() does). No other call may be using it.
 * Kernels it queued still run: synchronise their streams before freeing the memory they use. */
JITUNE_API jitune_status jitune_runtime_destroy(jitune_runtime* runtime);

/** What ops need to know about a device (a subset of jitune::DeviceInfo). */
typedef struct jitune_device_info {
  size_t struct_size;             /**< sizeof(jitune_device_info), set by the caller. */
  int ordinal;                    /**< CUDA device ordinal. */
  int cc_major, cc_minor;         /**< Compute capability, e.g. 9 and 0. */
  int sm_count;                   /**< Streaming multiprocessors. */
  int64_t l2_bytes;               /**< L2 cache size. */
  int64_t global_memory_bytes;    /**< Total device memory. */
  int max_shared_per_block_optin; /**< Dynamic shared memory a block may opt into. */
  int driver_version;             /**< e.g. 13000 for CUDA 13.0. */
  char name[256];                 /**< e.g. "NVIDIA H100 80GB HBM3", NUL-terminated. */
  char nvrtc_version[32];         /**< e.g. "13.0". */
  /* Added after the first release: a caller whose struct_size ends before them gets the fields above only. */
  int sm_clock_mhz;               /**< Peak SM clock, 0 where the driver does not say. */
  int memory_clock_mhz;           /**< Peak memory clock, 0 where the driver does not say. */
} jitune_device_info;

/** Fills *info for the runtime's device. */
JITUNE_API jitune_status jitune_runtime_device(const jitune_runtime* runtime, jitune_device_info* info);

/** What went wrong opening the runtime's caches (one problem a line, each saying what to do), "" when
 * nothing. */
JITUNE_API jitune_status jitune_runtime_warnings(const jitune_runtime* runtime, char* out, size_t out_size,
                                                 size_t* required);

/** Forgets the runtime's decisions, so the next calls look the caches up again (after jitune_cache_import
 * into its user cache, or another process tuned). Loaded kernels stay. */
JITUNE_API jitune_status jitune_runtime_reload(jitune_runtime* runtime);

/* Ops
 *
 * Each op mirrors the C++ op of the same name (include/jitune/ops/<op>.hpp says what it computes and which
 * dtypes, sizes and pointers it takes). Pointers are device pointers on the runtime's device; they are
 * checked (NULL, element alignment, device memory large enough, outputs not overlapping inputs) the first
 * time a call site sees them, and a bad one is JITUNE_ERROR_INVALID_ARGUMENT naming the argument. Each op has
 * a *_signature function that writes the problem's canonical signature (for jitune_explain and jitune_tune)
 * without a runtime. */

/** jitune::elementwise: `expression` ("z = x * y + 1") over `n_inputs` (at most 8) same-shaped contiguous
 * inputs, in the order their names first appear on the right-hand side, into `output`; n elements of `dtype`
 * (float32, float16, bfloat16). */
JITUNE_API jitune_status jitune_elementwise(jitune_runtime* runtime, const char* expression,
                                            const void* const* inputs, size_t n_inputs, void* output,
                                            int64_t n, jitune_dtype dtype, void* stream);
JITUNE_API jitune_status jitune_elementwise_signature(const char* expression, int64_t n, jitune_dtype dtype,
                                                      char* out, size_t out_size, size_t* required);

/** jitune::permute: dst = the contiguous copy of contiguous src (shape[0..n_dims), at most 8 dims) permuted
 * so that output dim i is input dim perm[i]; any dtype (only its size matters). */
JITUNE_API jitune_status jitune_permute(jitune_runtime* runtime, const void* src, void* dst,
                                        const int64_t* shape, const int32_t* perm, size_t n_dims,
                                        jitune_dtype dtype, void* stream);
JITUNE_API jitune_status jitune_permute_signature(const int64_t* shape, const int32_t* perm, size_t n_dims,
                                                  jitune_dtype dtype, char* out, size_t out_size,
                                                  size_t* required);

/** One nearest-neighbour resampling (jitune::UpsampleNearest2d): an n x c x in_h x in_w batch to out_h x
 * out_w. Zero out_h / out_w: floor(in * scale); zero scale_h / scale_w: no scale factor given (PyTorch's
 * None). */
typedef struct jitune_upsample_nearest2d_shape {
  size_t struct_size;         /**< sizeof(jitune_upsample_nearest2d_shape). */
  int64_t n, c;               /**< Batch and channels (0: nothing to do). */
  int64_t in_h, in_w;         /**< Input size, >= 1. */
  int64_t out_h, out_w;       /**< Output size; 0: from the scale. */
  double scale_h, scale_w;    /**< scale_factor (output / input), > 0; 0: not given. */
  jitune_image_layout layout; /**< JITUNE_NCHW or JITUNE_NHWC, input and output alike. */
  jitune_nearest_mode mode;   /**< JITUNE_NEAREST or JITUNE_NEAREST_EXACT. */
  jitune_dtype dtype;         /**< float32, float16 or bfloat16. */
} jitune_upsample_nearest2d_shape;

/** jitune::upsample_nearest2d: output = F.interpolate(input, ..., mode), contiguous in shape->layout. */
JITUNE_API jitune_status jitune_upsample_nearest2d(jitune_runtime* runtime,
                                                   const jitune_upsample_nearest2d_shape* shape,
                                                   const void* input, void* output, void* stream);
/** jitune::upsample_nearest2d_backward: grad_input (n, c, in_h, in_w) = the gradient for grad_output
 * (written, not accumulated). */
JITUNE_API jitune_status jitune_upsample_nearest2d_backward(jitune_runtime* runtime,
                                                            const jitune_upsample_nearest2d_shape* shape,
                                                            const void* grad_output, void* grad_input,
                                                            void* stream);
/** The signature of the forward (backward == 0) or backward call. */
JITUNE_API jitune_status jitune_upsample_nearest2d_signature(const jitune_upsample_nearest2d_shape* shape,
                                                             int backward, char* out, size_t out_size,
                                                             size_t* required);

/** jitune::index_add: dst[index[i], :] += alpha * src[i, :] (torch's index_add_ along dim 0): dst is dst_rows
 * x row_length, src src_rows x row_length (src_rows == index_count), index of index_dtype (int32 / int64);
 * dtype float32, float16 or bfloat16. check_indices != 0 checks every index on the host first (a stream
 *  synchronisation) and fails naming the first one out of range; without it such indices are skipped. */
JITUNE_API jitune_status jitune_index_add(jitune_runtime* runtime, void* dst, int64_t dst_rows,
                                          const void* index, int64_t index_count, jitune_dtype index_dtype,
                                          const void* src, int64_t src_rows, int64_t row_length,
                                          jitune_dtype dtype, float alpha, int check_indices, void* stream);
JITUNE_API jitune_status jitune_index_add_signature(int64_t dst_rows, int64_t index_count, int64_t row_length,
                                                    jitune_dtype dtype, jitune_dtype index_dtype, char* out,
                                                    size_t out_size, size_t* required);

/** jitune::scatter_add: 1-D dst[index[i]] += alpha * src[i] for i < index_count (src may be longer). */
JITUNE_API jitune_status jitune_scatter_add(jitune_runtime* runtime, void* dst, int64_t dst_count,
                                            const void* index, int64_t index_count, jitune_dtype index_dtype,
                                            const void* src, int64_t src_count, jitune_dtype dtype,
                                            float alpha, int check_indices, void* stream);
JITUNE_API jitune_status jitune_scatter_add_signature(int64_t dst_count, int64_t index_count,
                                                      int64_t src_count, jitune_dtype dtype,
                                                      jitune_dtype index_dtype, char* out, size_t out_size,
                                                      size_t* required);

/** jitune::dot: out[0] = sum of x[i] * y[i] over n elements, accumulated in float (float32, float16,
 * bfloat16). */
JITUNE_API jitune_status jitune_dot(jitune_runtime* runtime, const void* x, const void* y, int64_t n,
                                    void* out, jitune_dtype dtype, void* stream);
JITUNE_API jitune_status jitune_dot_signature(int64_t n, jitune_dtype dtype, char* out, size_t out_size,
                                              size_t* required);

/** Shapes and geometry of a convolution (jitune::Conv2dParams): PyTorch conv2d, groups = 1. Every field must
 * be set: stride and dilation are at least 1. */
typedef struct jitune_conv2d_params {
  size_t struct_size;  /**< sizeof(jitune_conv2d_params). */
  int64_t input[4];    /**< x: {N, C, H, W}, the logical shape (contiguous in `layout`). */
  int64_t weight[4];   /**< w: {K, C, R, S}, the logical shape (contiguous in `layout`). */
  int64_t stride[2];   /**< {vertical, horizontal}, >= 1. */
  int64_t padding[2];  /**< Zero padding {top and bottom, left and right}, >= 0. */
  int64_t dilation[2]; /**< {vertical, horizontal}, >= 1. */
  /** JITUNE_NCHW (0; also what a caller built without this field gets) or JITUNE_NHWC: x stored {N, H, W, C},
   *  w {K, R, S, C}, y {N, P, Q, K} (float16 / bfloat16 on sm_80+). */
  jitune_image_layout layout;
  /** NULL or "" (also what a caller built without this field gets): none. Otherwise an elementwise expression
   *  applied to every output before it is stored, in the same kernel, over acc (the convolution plus bias, as
   *  stored) and r (the residual's element at the same position): "y = max(acc + r, 0.0f)". Reading r needs
   *  jitune_conv2d_fused's residual. Jitune::Conv2dParams::epilogue says more. */
  const char* epilogue;
  /** JITUNE_FP32_IEEE (0; also what a caller built without this field gets): float32 products exact. JITUNE_FP32_TF32:
   *  a float32 convolution may run on TF32 tensor cores (inputs truncated to 10 mantissa bits, sums in float);
   *  float16 / bfloat16 ignore it. Jitune::Conv2dParams::precision says more. */
  jitune_fp32_precision precision;
} jitune_conv2d_params;

/** jitune::conv2d: y {N, K, P, Q} = conv2d(x, w) + bias {K} (bias NULL: none), then params->epilogue where it
 * reads no residual; float32, float16 or bfloat16. */
JITUNE_API jitune_status jitune_conv2d(jitune_runtime* runtime, const void* x, const void* w,
                                       const void* bias, void* y, const jitune_conv2d_params* params,
                                       jitune_dtype dtype, void* stream);
/** jitune::conv2d with a residual: y = epilogue(conv2d(x, w) + bias, residual), the residual laid out and shaped
 * as y (NULL where params->epilogue does not read r). */
JITUNE_API jitune_status jitune_conv2d_fused(jitune_runtime* runtime, const void* x, const void* w,
                                             const void* bias, const void* residual, void* y,
                                             const jitune_conv2d_params* params, jitune_dtype dtype,
                                             void* stream);
/** jitune::conv2d_output_shape: writes {N, K, P, Q} into output_shape[0..4). */
JITUNE_API jitune_status jitune_conv2d_output_shape(const jitune_conv2d_params* params,
                                                    int64_t* output_shape);
JITUNE_API jitune_status jitune_conv2d_signature(const jitune_conv2d_params* params, jitune_dtype dtype,
                                                 int has_bias, char* out, size_t out_size, size_t* required);

/** jitune::reduce_rows: y[r] = sum or max over the rows x cols contiguous x's row r (float32, float16,
 * bfloat16, accumulated in float). */
JITUNE_API jitune_status jitune_reduce_rows(jitune_runtime* runtime, const void* x, void* y, int64_t rows,
                                            int64_t cols, jitune_reduce_op op, jitune_dtype dtype,
                                            void* stream);
JITUNE_API jitune_status jitune_reduce_rows_signature(int64_t rows, int64_t cols, jitune_reduce_op op,
                                                      jitune_dtype dtype, char* out, size_t out_size,
                                                      size_t* required);

/* The generic call (jitune::call): any registered family by name
 *
 * `values` are the family's key values in the order its C++ op packs them (docs/c-abi.md lists them; at most
 * 168), `text` its text argument (elementwise's expression; NULL: none), `scalars` the values only the kernel
 * sees (index_add's alpha; at most 4), `buffers` the device pointers in the family's buffer order. */
JITUNE_API jitune_status jitune_call(jitune_runtime* runtime, const char* family, const int64_t* values,
                                     size_t n_values, const char* text, const double* scalars,
                                     size_t n_scalars, const void* const* buffers, size_t n_buffers,
                                     void* stream);
/** The canonical signature of a generic call (jitune::call_signature). */
JITUNE_API jitune_status jitune_call_signature(const char* family, const int64_t* values, size_t n_values,
                                               const char* text, char* out, size_t out_size,
                                               size_t* required);

/* Explain, tune, cache */

/** Which configuration a call of `family` with canonical `signature` uses on this runtime, and why, as one
 * JSON object (UTF-8): {"family", "signature", "config", "level" ("exact" | "nearest_problem" |
 * "same_architecture" | "heuristic"), "source", "matched_signature", "matched_device", "time_us",
 * "default_time_us", "heuristic_config", "device", "notes" (array of strings)}, the keys of `jitune explain
 * --json`. With tune_on_first_use, explaining a problem with no exact record tunes it first. */
JITUNE_API jitune_status jitune_explain(jitune_runtime* runtime, const char* family, const char* signature,
                                        char* out, size_t out_size, size_t* required);

/** What jitune_tune found (the numbers of the tuner's report). */
typedef struct jitune_tune_result {
  size_t struct_size;         /**< sizeof(jitune_tune_result), set by the caller. */
  double best_us;             /**< The winner's median time, from the side-by-side re-timing. */
  double default_us;          /**< The heuristic default's median time, same re-timing. */
  uint64_t candidates;        /**< Candidates tried. */
  uint64_t failed;            /**< Of those, how many failed to compile, verify or launch. */
  int stored;                 /**< Non-zero when the winner was written to the user cache. */
  double wall_s;              /**< Seconds the session took. */
  char config[256];           /**< The winner's canonical config text, "" if it does not fit. */
  char heuristic_config[256]; /**< The heuristic default's, "" if it does not fit. */
} jitune_tune_result;

/** Tunes one problem on the runtime's device now (verifying every candidate, timing the correct ones), stores
 * the winner in the runtime's user cache and reloads the runtime's decisions, so later calls and
 * jitune_explain use it. budget > 0: that many candidates (a random sample with the heuristic default); 0:
 * 48; < 0: the whole legal space. `result` may be NULL. JITUNE_ERROR_OTHER when no candidate verifies. Blocks
 * the calling thread (seconds to minutes). */
JITUNE_API jitune_status jitune_tune(jitune_runtime* runtime, const char* family, const char* signature,
                                     int64_t budget, jitune_tune_result* result);

/** Writes every record of the tuning database `cache` (NULL: the default user cache) to `file` as JSON Lines
 * (the format of `jitune cache export`); *n_records (may be NULL) receives how many. Needs no GPU. Only a
 * regular file at `file` is replaced: a symbolic link, folder, FIFO, device or socket there is
 * JITUNE_ERROR_STORE with nothing written (the CLI's --force replaces a link). */
JITUNE_API jitune_status jitune_cache_export(const char* cache, const char* file, uint64_t* n_records);

/** How an import went (jitune::cache::ImportReport). */
typedef struct jitune_import_report {
  size_t struct_size; /**< sizeof(jitune_import_report), set by the caller. */
  uint64_t added;     /**< New records. */
  uint64_t replaced;  /**< Records replaced by faster incoming ones. */
  uint64_t kept;      /**< Records kept (as fast or faster than the incoming one). */
  uint64_t rejected;  /**< Invalid incoming records (not imported). */
} jitune_import_report;

/** Imports JSON Lines `file` into the tuning database `cache` (NULL: the default user cache; created when
 *  missing): new keys are added; a record already stored is never replaced (`jitune cache import --trust`
 *  does that). Each record is checked against the families, and times no GPU could reach are rejected. `file`
 *  must be a regular file of at most 256 MiB; lines over 64 KiB, nesting deeper than 8, text fields over 16 KiB
 *  and more than 64 features are rejected line by line (cache/jsonl.hpp). `report` (may be NULL) receives the
 *  counts. When any record is rejected the valid ones are still imported and the call
 * returns JITUNE_ERROR_INVALID_ARGUMENT, its message listing the rejected lines. Runtimes using `cache` see
 * the new records after jitune_runtime_reload. Needs no GPU. */
JITUNE_API jitune_status jitune_cache_import(const char* cache, const char* file,
                                             jitune_import_report* report);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // JITUNE_JITUNE_H
