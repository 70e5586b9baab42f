// jitune::upsample_nearest2d and its backward: warm path = hash lookup of the call's shape, the kernel and vector
// width the pointers allow (by rule), cuLaunchKernel. Equal sizes are one device copy.
#include <bit>
#include <cstring>

#include <jitune/ops.hpp>

#include "runtime/op_caches.hpp"
#include "templates/upsample_nearest2d/upsample_nearest2d.hpp"

namespace jitune {
namespace {

using upn::Direction;
using upn::KernelKind;
using upn::Strategy;
using upn::UpsampleProblem;

// "upsample_nearest2d\n" followed by the call's fields as raw bytes: no allocation on the warm path.
struct KeyBuffer {
  static constexpr std::string_view kPrefix = "upsample_nearest2d\n";
  char bytes[kPrefix.size() + 6 + 6 * 8 + 2 * 8];
  std::size_t size = 0;
  template <class T>
  void put(const T& v) {
    std::memcpy(bytes + size, &v, sizeof v);
    size += sizeof v;
  }
  KeyBuffer(Direction direction, const UpsampleNearest2d& s) {
    std::memcpy(bytes, kPrefix.data(), kPrefix.size());
    size = kPrefix.size();
    const char flags[6] = {static_cast<char>(direction), static_cast<char>(s.dtype), static_cast<char>(s.layout),
                           static_cast<char>(s.mode), static_cast<char>(s.scale_h.has_value()),
                           static_cast<char>(s.scale_w.has_value())};
    put(flags);
    for (std::int64_t v : {s.n, s.c, s.in_h, s.in_w, s.out_h, s.out_w}) put(v);
    put(s.scale_h.value_or(0.0));
    put(s.scale_w.value_or(0.0));
  }
  std::string_view view() const noexcept { return {bytes, size}; }
};

void check_pointer(const char* op, const char* what, const void* ptr, DType dtype) {
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  const std::size_t es = dtype_size(dtype);
  if (addr == 0 || addr % es != 0)
    throw InvalidArgument(
        std::string(op) + ": " + what + " pointer " +
        (addr == 0 ? "is null" : "is not aligned to its " + std::to_string(es) + "-byte element type") +
        "; pass a device pointer to " + std::string(dtype_name(dtype)) + " elements");
}

void run(Runtime& runtime, Direction direction, const UpsampleNearest2d& shape, const void* src, void* dst,
         Stream stream) {
  Runtime::Impl& impl = runtime.impl();
  const char* op = direction == Direction::kForward ? "upsample_nearest2d" : "upsample_nearest2d_backward";
  if (shape.n == 0 || shape.c == 0) {
    UpsampleProblem validate(direction, shape);  // a wrong call fails the same way when it is empty
    return;
  }
  const Family& family = upn::upsample_nearest2d_family();
  const KeyBuffer key(direction, shape);
  OpEntry& entry =
      op_entry(impl, family, key.view(), [&] { return std::make_unique<UpsampleProblem>(direction, shape); });
  const auto& p = static_cast<const UpsampleProblem&>(*entry.problem);
  const DType dtype = p.dtype();
  const char* src_name = direction == Direction::kForward ? "input" : "grad_output";
  const char* dst_name = direction == Direction::kForward ? "output" : "grad_input";
  check_pointer(op, src_name, src, dtype);
  check_pointer(op, dst_name, dst, dtype);
  const std::size_t es = dtype_size(dtype);
  const std::uintptr_t s0 = reinterpret_cast<std::uintptr_t>(src), d0 = reinterpret_cast<std::uintptr_t>(dst);
  const std::uintptr_t s1 = s0 + static_cast<std::uintptr_t>(p.src_numel()) * es;
  const std::uintptr_t d1 = d0 + static_cast<std::uintptr_t>(p.dst_numel()) * es;
  if (s0 < d1 && d0 < s1)
    throw InvalidArgument(std::string(op) + ": " + src_name + " and " + dst_name +
                          " overlap; the operation cannot run in place, give separate buffers");
  const auto cu_stream = reinterpret_cast<CUstream>(stream);
  driver::make_current(impl.context);
  if (p.copy()) {  // PyTorch copies when the sizes are equal (both directions)
    JITUNE_CU_CHECK(cuMemcpyDtoDAsync(static_cast<CUdeviceptr>(d0), static_cast<CUdeviceptr>(s0), d1 - d0, cu_stream));
    return;
  }

  const Config& tuned = entry.decision->config;
  KernelKind kernel = static_cast<KernelKind>(tuned.at("kernel"));
  Strategy strategy = static_cast<Strategy>(tuned.at("strategy"));
  const int max_pack = static_cast<int>(tuned.at("pack"));
  int pack = upn::usable_pack(p, kernel, strategy, max_pack, src, dst);
  if (pack == 0) {  // the 2x kernel's pair accesses do not fit these pointers: the general gather does any
    kernel = KernelKind::kGeneral;
    strategy = Strategy::kGather;
    pack = upn::usable_pack(p, kernel, strategy, max_pack, src, dst);
  }
  const int slot = (kernel == KernelKind::kPacked2x ? 4 : 0) + std::countr_zero(static_cast<unsigned>(pack));
  const Kernel* k = entry.kernels[slot].load(std::memory_order_acquire);
  if (!k) {
    Config c = tuned;
    c.set("kernel", static_cast<std::int64_t>(kernel));
    c.set("strategy", static_cast<std::int64_t>(strategy));
    c.set("pack", pack);
    k = &op_kernel(impl, family, entry, slot, c);
  }
  if (strategy == Strategy::kScatter)
    JITUNE_CU_CHECK(cuMemsetD8Async(static_cast<CUdeviceptr>(d0), 0, d1 - d0, cu_stream));
  KernelArgs args;
  args.push(upn::make_params(p, kernel, strategy, pack, src, dst));
  impl.launch(*k, args, cu_stream);
}

}  // namespace

void upsample_nearest2d(Runtime& runtime, const UpsampleNearest2d& shape, const void* input, void* output,
                        Stream stream) {
  run(runtime, Direction::kForward, shape, input, output, stream);
}

void upsample_nearest2d_backward(Runtime& runtime, const UpsampleNearest2d& shape, const void* grad_output,
                                 void* grad_input, Stream stream) {
  run(runtime, Direction::kBackward, shape, grad_output, grad_input, stream);
}

std::string upsample_nearest2d_signature(const UpsampleNearest2d& shape, bool backward) {
  return UpsampleProblem(backward ? Direction::kBackward : Direction::kForward, shape).signature();
}

}  // namespace jitune
