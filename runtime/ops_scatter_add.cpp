// jitune::index_add / scatter_add / dot: validation, the optional host index check, the warm path (op_entry
// lookup plus cuLaunchKernel), and the stream-ordered float workspace (allocated, zeroed, used and freed on
// the caller's stream, so concurrent calls on different streams never share one).
#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <thread>

#include <jitune/ops.hpp>

#include "runtime/op_caches.hpp"
#include "templates/scatter_add/scatter_add.hpp"

namespace jitune {
namespace {

bool float_type(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16;
}

void check_pointer(const char* op, const char* what, const void* p, std::size_t element_size, DType dtype) {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  if (addr == 0)
    throw InvalidArgument(std::string(op) + ": " + what + " pointer is null; pass a device pointer to " +
                          std::string(dtype_name(dtype)) + " elements");
  if (addr % element_size != 0)
    throw InvalidArgument(std::string(op) + ": " + what + " pointer is not aligned to its " +
                          std::to_string(element_size) + "-byte " + std::string(dtype_name(dtype)) +
                          " elements");
}

void check_size(const char* op, const char* what, std::int64_t v) {
  if (v < 0)
    throw InvalidArgument(std::string(op) + ": " + what + " is negative (" + std::to_string(v) + ")");
}

// The warm-path key "<op tag><value>;<value>;..." built in a fixed buffer (no heap allocation per call).
class KeyBuilder {
 public:
  explicit KeyBuilder(std::string_view tag) {
    std::memcpy(text_, tag.data(), tag.size());
    size_ = tag.size();
  }
  void add(std::int64_t v) {
    char digits[24];
    const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, v);
    const auto n = static_cast<std::size_t>(end - digits);
    std::memcpy(text_ + size_, digits, n);
    size_ += n;
    text_[size_++] = ';';
  }
  std::string_view view() const { return {text_, size_}; }

 private:
  char text_[32 + 8 * 25];  // the tag and up to 8 values
  std::size_t size_ = 0;
};

// Scans the index array on the host (the caller asked for it) and throws on the first entry outside [0,
// rows).
void check_indices_on_host(const char* op, const void* index, std::int64_t count, DType index_dtype,
                           std::int64_t rows, CUstream stream) {
  JITUNE_CU_CHECK(cuStreamSynchronize(stream));
  const std::size_t isz = dtype_size(index_dtype);
  std::vector<std::byte> host(static_cast<std::size_t>(count) * isz);
  JITUNE_CU_CHECK(cuMemcpyDtoH(host.data(), reinterpret_cast<CUdeviceptr>(index), host.size()));
  const unsigned threads =
      count < (1 << 20) ? 1u : std::min(16u, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::int64_t> first_bad(threads, -1);
  auto scan = [&](unsigned t) {
    const std::int64_t chunk = (count + threads - 1) / threads;
    const std::int64_t begin = std::min(count, chunk * t), end = std::min(count, begin + chunk);
    for (std::int64_t i = begin; i < end; ++i) {
      std::int64_t v;
      if (isz == 4) {
        std::int32_t w;
        std::memcpy(&w, host.data() + i * 4, 4);
        v = w;
      } else {
        std::memcpy(&v, host.data() + i * 8, 8);
      }
      if (v < 0 || v >= rows) {
        first_bad[t] = i;
        return;
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(scan, t);
  scan(0);
  for (auto& th : pool) th.join();
  for (std::int64_t i : first_bad) {
    if (i < 0) continue;
    std::int64_t v;
    if (isz == 4) {
      std::int32_t w;
      std::memcpy(&w, host.data() + i * 4, 4);
      v = w;
    } else {
      std::memcpy(&v, host.data() + i * 8, 8);
    }
    throw InvalidArgument(std::string(op) + ": index[" + std::to_string(i) + "] = " + std::to_string(v) +
                          " is out of range for a destination of " + std::to_string(rows) +
                          " rows (valid: 0 to " + std::to_string(rows - 1) + ")");
  }
}

// A zeroed float workspace in stream order: allocated and cleared on `stream`, freed there after the kernel.
class StreamWorkspace {
 public:
  StreamWorkspace(std::size_t bytes, std::size_t zero_offset, std::size_t zero_bytes, CUstream stream)
      : stream_(stream) {
    JITUNE_CU_CHECK(cuMemAllocAsync(&ptr_, bytes, stream));
    const CUresult r = driver::api().cuMemsetD32Async(ptr_ + zero_offset, 0u, zero_bytes / 4, stream);
    if (r != CUDA_SUCCESS) {
      driver::api().cuMemFreeAsync(ptr_, stream);
      driver::check(r, "cuMemsetD32Async (scatter_add workspace)");
    }
  }
  ~StreamWorkspace() {
    if (ptr_) driver::api().cuMemFreeAsync(ptr_, stream_);  // never throws; the memory returns to the pool
  }
  StreamWorkspace(const StreamWorkspace&) = delete;
  StreamWorkspace& operator=(const StreamWorkspace&) = delete;
  void* data() const noexcept { return reinterpret_cast<void*>(ptr_); }

 private:
  CUdeviceptr ptr_ = 0;
  CUstream stream_;
};

void run_index_add(Runtime& runtime, const char* op, void* dst, std::int64_t rows, const void* index,
                   std::int64_t count, DType index_dtype, const void* src, std::int64_t row_length,
                   DType dtype, Stream stream, const ScatterAddOptions& options) {
  Runtime::Impl& impl = runtime.impl();
  const auto cu_stream = reinterpret_cast<CUstream>(stream);
  const Family& fam = sa::scatter_add_family();
  KeyBuilder key("scatter_add\ni;");
  key.add(static_cast<std::int64_t>(dtype));
  key.add(static_cast<std::int64_t>(index_dtype));
  key.add(rows);
  key.add(count);
  key.add(row_length);
  OpEntry& e = op_entry(impl, fam, key.view(), [&] {
    return std::make_unique<sa::ScatterAddProblem>(
        sa::ScatterAddProblem::index_add(dtype, index_dtype, rows, count, row_length));
  });
  driver::make_current(impl.context);
  if (options.check_indices) check_indices_on_host(op, index, count, index_dtype, rows, cu_stream);
  const auto& problem = static_cast<const sa::ScatterAddProblem&>(*e.problem);
  const Config& config = e.decision->config;
  const Kernel& k = op_kernel(impl, fam, e, 0, config);
  KernelArgs args;
  if (config.at("workspace")) {
    const std::size_t bytes = problem.workspace_bytes();
    StreamWorkspace ws(bytes, 0, bytes, cu_stream);
    sa::push_index_add_args(problem, config, dst, index, src, ws.data(), options.alpha, args);
    impl.launch(k, args, cu_stream);
  } else {
    sa::push_index_add_args(problem, config, dst, index, src, nullptr, options.alpha, args);
    impl.launch(k, args, cu_stream);
  }
}

void validate_common(const char* op, DType dtype, DType index_dtype) {
  if (!float_type(dtype))
    throw InvalidArgument(std::string(op) + ": dtype " + std::string(dtype_name(dtype)) +
                          " is not supported; use float32, float16 or bfloat16");
  if (index_dtype != DType::kInt32 && index_dtype != DType::kInt64)
    throw InvalidArgument(std::string(op) + ": index dtype " + std::string(dtype_name(index_dtype)) +
                          " is not supported; use int32 or int64");
}

// The part index_add and scatter_add share once their shapes are validated and count > 0: the pointer checks, the
// empty destination (every index out of range: an error when checking, else nothing to do), then the launch.
void checked_index_add(Runtime& runtime, const char* op, void* dst, std::int64_t rows, const void* index,
                       std::int64_t count, DType index_dtype, const void* src, std::int64_t row_length, DType dtype,
                       Stream stream, const ScatterAddOptions& options, const char* empty_destination) {
  const std::size_t es = dtype_size(dtype);
  check_pointer(op, "index", index, dtype_size(index_dtype), index_dtype);
  check_pointer(op, "src", src, es, dtype);
  if (rows == 0) {
    if (options.check_indices)
      throw InvalidArgument(std::string(op) + ": the destination " + empty_destination +
                            ", so index[0] is out of range");
    return;
  }
  check_pointer(op, "dst", dst, es, dtype);
  run_index_add(runtime, op, dst, rows, index, count, index_dtype, src, row_length, dtype, stream, options);
}
}  // namespace

void index_add(Runtime& runtime, void* dst, std::int64_t dst_rows, const void* index,
               std::int64_t index_count, DType index_dtype, const void* src, std::int64_t src_rows,
               std::int64_t row_length, DType dtype, Stream stream, const ScatterAddOptions& options) {
  const char* op = "index_add";
  validate_common(op, dtype, index_dtype);
  check_size(op, "dst_rows", dst_rows);
  check_size(op, "index_count", index_count);
  check_size(op, "src_rows", src_rows);
  check_size(op, "row_length", row_length);
  if (src_rows != index_count)
    throw InvalidArgument("index_add: src has " + std::to_string(src_rows) + " rows but index has " +
                          std::to_string(index_count) +
                          " entries; source row i goes to destination row index[i], so they must match");
  if (index_count == 0 || row_length == 0) return;
  checked_index_add(runtime, op, dst, dst_rows, index, index_count, index_dtype, src, row_length, dtype, stream,
                    options, "has no rows");
}

void scatter_add(Runtime& runtime, void* dst, std::int64_t dst_count, const void* index,
                 std::int64_t index_count, DType index_dtype, const void* src, std::int64_t src_count,
                 DType dtype, Stream stream, const ScatterAddOptions& options) {
  const char* op = "scatter_add";
  validate_common(op, dtype, index_dtype);
  check_size(op, "dst_count", dst_count);
  check_size(op, "index_count", index_count);
  check_size(op, "src_count", src_count);
  if (index_count > src_count)
    throw InvalidArgument("scatter_add: index has " + std::to_string(index_count) + " entries but src only " +
                          std::to_string(src_count) + " elements; index may not be longer than src");
  if (index_count == 0) return;
  checked_index_add(runtime, op, dst, dst_count, index, index_count, index_dtype, src, 1, dtype, stream, options,
                    "is empty");
}

void dot(Runtime& runtime, const void* x, const void* y, std::int64_t n, void* out, DType dtype,
         Stream stream) {
  const char* op = "dot";
  if (!float_type(dtype))
    throw InvalidArgument("dot: dtype " + std::string(dtype_name(dtype)) +
                          " is not supported; use float16, bfloat16 or float32");
  check_size(op, "n", n);
  const std::size_t es = dtype_size(dtype);
  check_pointer(op, "out", out, es, dtype);
  Runtime::Impl& impl = runtime.impl();
  const auto cu_stream = reinterpret_cast<CUstream>(stream);
  if (n == 0) {
    driver::make_current(impl.context);
    JITUNE_CU_CHECK(cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(out), 0, es, cu_stream));
    return;
  }
  check_pointer(op, "x", x, es, dtype);
  check_pointer(op, "y", y, es, dtype);
  const Family& fam = sa::scatter_add_family();
  KeyBuilder key("scatter_add\nd;");
  key.add(static_cast<std::int64_t>(dtype));
  key.add(n);
  OpEntry& e = op_entry(impl, fam, key.view(), [&] {
    return std::make_unique<sa::ScatterAddProblem>(sa::ScatterAddProblem::dot(dtype, n));
  });
  const auto& problem = static_cast<const sa::ScatterAddProblem&>(*e.problem);
  const sa::DotAlignment a = sa::dot_alignment(x, y, es, static_cast<int>(e.decision->config.at("vec")), n);
  const int slot = std::countr_zero(static_cast<unsigned>(a.vec));
  const Kernel* k = e.kernels[slot].load(std::memory_order_acquire);
  if (!k) {
    Config c = e.decision->config;
    c.set("vec", a.vec);
    k = &op_kernel(impl, fam, e, slot, c);
  }
  driver::make_current(impl.context);
  // Only the counter must start at zero: every partial is written before it is read.
  const std::size_t bytes = problem.workspace_bytes();
  StreamWorkspace ws(bytes, bytes - 4, 4, cu_stream);
  KernelArgs args;
  sa::push_dot_args(problem, a, x, y, out, ws.data(), args);
  impl.launch(*k, args, cu_stream);
}

std::string index_add_signature(std::int64_t dst_rows, std::int64_t index_count, std::int64_t row_length,
                                DType dtype, DType index_dtype) {
  return sa::ScatterAddProblem::index_add(dtype, index_dtype, dst_rows, index_count, row_length).signature();
}

std::string dot_signature(std::int64_t n, DType dtype) {
  return sa::ScatterAddProblem::dot(dtype, n).signature();
}

}  // namespace jitune
