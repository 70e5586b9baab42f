// jitune::permute: warm path = validation (a few comparisons), one hash lookup of (dtype, shape, perm), the
// kernel for the pointers' alignment, cuLaunchKernel. An identity after simplification is one device copy.
#include <bit>
#include <charconv>

#include <jitune/ops.hpp>

#include "runtime/op_caches.hpp"
#include "templates/permute/permute.hpp"

namespace jitune {
namespace {

void append_number(std::string& text, std::int64_t value) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  text.append(buf, end);
}

void check_pointer(const void* pointer, const char* name, DType dtype) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  if (address != 0 && address % dtype_size(dtype) == 0) return;
  throw InvalidArgument(
      std::string("permute: ") + name + " pointer " +
      (address == 0 ? "is null"
                    : "is not aligned to its " + std::to_string(dtype_size(dtype)) + "-byte element type") +
      "; pass a device pointer to " + std::string(dtype_name(dtype)) + " elements");
}

}  // namespace

std::string permute_signature(std::span<const std::int64_t> shape, std::span<const int> perm, DType dtype) {
  return pmt::PermuteProblem(dtype, {shape.begin(), shape.end()}, {perm.begin(), perm.end()}).signature();
}

void permute(Runtime& runtime, const void* src, void* dst, std::span<const std::int64_t> shape,
             std::span<const int> perm, DType dtype, Stream stream) {
  const std::size_t es = dtype_size(dtype);
  pmt::validate(shape, perm, es);
  std::int64_t count = 1;
  for (std::int64_t extent : shape) count *= extent;
  if (count == 0) return;
  check_pointer(src, "src", dtype);
  check_pointer(dst, "dst", dtype);
  const auto bytes = static_cast<std::uintptr_t>(count) * es;
  const auto s = reinterpret_cast<std::uintptr_t>(src), d = reinterpret_cast<std::uintptr_t>(dst);
  if (s < d + bytes && d < s + bytes)
    throw InvalidArgument("permute: src and dst overlap (" + std::to_string(bytes) +
                          " bytes each); the permuted copy needs its own output buffer");
  Runtime::Impl& impl = runtime.impl();
  if (pmt::is_identity(shape, perm)) {
    driver::make_current(impl.context);
    JITUNE_CU_CHECK(
        cuMemcpyDtoDAsync(static_cast<CUdeviceptr>(d), static_cast<CUdeviceptr>(s), bytes, stream));
    return;
  }
  std::string key;
  key.reserve(96);
  key += "permute\n";
  key += dtype_name(dtype);
  for (std::int64_t extent : shape) {
    key += 'x';
    append_number(key, extent);
  }
  key += ';';
  for (int p : perm) {
    key += ',';
    append_number(key, p);
  }
  const Family& family = pmt::permute_family();
  OpEntry& entry = op_entry(impl, family, key, [&] {
    return std::make_unique<pmt::PermuteProblem>(dtype, std::vector<std::int64_t>(shape.begin(), shape.end()),
                                                 std::vector<int>(perm.begin(), perm.end()));
  });
  const auto& problem = static_cast<const pmt::PermuteProblem&>(*entry.problem);
  const int alignment = pmt::pointer_alignment(src, dst);
  const int slot = std::countr_zero(static_cast<unsigned>(alignment));
  const Kernel* kernel = entry.kernels[slot].load(std::memory_order_acquire);
  if (!kernel)
    kernel = &op_kernel(impl, family, entry, slot,
                        pmt::adapt_config(problem, entry.decision->config, alignment, impl.device));
  KernelArgs args;
  pmt::push_params(problem, kernel->config, src, dst, args);
  impl.launch(*kernel, args, stream);
}

}  // namespace jitune
