// jitune::elementwise: warm path = hash lookup of (expression, dtype, n), alignment rule, cuLaunchKernel.
#include <bit>

#include <jitune/ops.hpp>

#include "runtime/op_caches.hpp"

namespace jitune {
namespace {

ElementwiseEntry& entry_for(Runtime::Impl& impl, std::string_view expression, DType dtype, std::int64_t n) {
  auto& caches = *impl.op_caches;
  {
    std::shared_lock lock(caches.mutex);
    auto it = caches.elementwise.find(ElementwiseKeyView{expression, dtype, n});
    if (it != caches.elementwise.end()) return *it->second;
  }
  auto entry = std::make_unique<ElementwiseEntry>();
  entry->problem = std::make_unique<ew::ElementwiseProblem>(ew::parse_expression(expression), dtype, n);
  entry->decision = &impl.decide(ew::elementwise_family(), *entry->problem);
  entry->tuned_pack = static_cast<int>(entry->decision->config.at("pack"));
  std::unique_lock lock(caches.mutex);
  auto [it, inserted] =
      caches.elementwise.try_emplace(ElementwiseKey{std::string(expression), dtype, n}, std::move(entry));
  return *it->second;
}

}  // namespace

std::string elementwise_signature(std::string_view expression, std::int64_t n, DType dtype) {
  return ew::ElementwiseProblem(ew::parse_expression(expression), dtype, n).signature();
}

void elementwise(Runtime& runtime, std::string_view expression, std::span<const void* const> inputs, void* output,
                 std::int64_t n, DType dtype, Stream stream) {
  Runtime::Impl& impl = runtime.impl();
  if (n <= 0) {
    // Validate anyway: a wrong call should fail the same way at n = 0 as at n = 1.
    ew::ElementwiseProblem problem(ew::parse_expression(expression), dtype, n);
    if (static_cast<int>(inputs.size()) != problem.arity())
      throw InvalidArgument("elementwise '" + problem.expression().canonical + "' reads " +
                            std::to_string(problem.arity()) + " input(s) but " + std::to_string(inputs.size()) +
                            " pointer(s) were given");
    return;
  }
  ElementwiseEntry& e = entry_for(impl, expression, dtype, n);
  const auto arity = static_cast<std::size_t>(e.problem->arity());
  if (inputs.size() != arity) {
    std::string names;
    for (const auto& s : e.problem->expression().inputs) names += (names.empty() ? "" : ", ") + s;
    throw InvalidArgument("elementwise '" + e.problem->expression().canonical + "' reads " + std::to_string(arity) +
                          " input(s) (" + names + ", in that order) but " + std::to_string(inputs.size()) +
                          " pointer(s) were given");
  }
  const std::size_t es = dtype_size(dtype);
  const void* pointers[ew::kMaxInputs + 1];
  pointers[0] = output;
  for (std::size_t i = 0; i < arity; ++i) pointers[i + 1] = inputs[i];
  for (std::size_t i = 0; i <= arity; ++i) {
    const auto addr = reinterpret_cast<std::uintptr_t>(pointers[i]);
    if (addr == 0 || addr % es != 0)
      throw InvalidArgument(std::string("elementwise: ") + (i == 0 ? "output" : "input " + std::to_string(i - 1)) +
                            " pointer " + (addr == 0 ? "is null" : "is not aligned to its " + std::to_string(es) +
                                                                       "-byte element type") +
                            "; pass a device pointer to " + std::string(dtype_name(dtype)) + " elements");
  }
  // Device-memory and range checks through the driver, only when this call site's pointers change: a loop over the
  // same buffers keeps the warm path a lookup plus cuLaunchKernel.
  std::uint64_t pointer_hash = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i <= arity; ++i)
    pointer_hash = (pointer_hash ^ reinterpret_cast<std::uintptr_t>(pointers[i])) * 0x100000001b3ull;
  if (e.checked_pointers.load(std::memory_order_relaxed) != pointer_hash) {
    const std::size_t bytes = static_cast<std::size_t>(n) * es;
    for (std::size_t i = 0; i <= arity; ++i)
      impl.check_device_range(pointers[i], bytes,
                              "elementwise " + (i == 0 ? std::string("output") : "input " + std::to_string(i - 1)));
    e.checked_pointers.store(pointer_hash, std::memory_order_relaxed);
  }
  const ew::Alignment al = ew::align_pointers(std::span<const void* const>(pointers, arity + 1), es, e.tuned_pack, n);
  const int slot = std::countr_zero(static_cast<unsigned>(al.pack));
  const Kernel* k = e.kernels[slot].load(std::memory_order_acquire);
  if (!k) {
    Config c = e.decision->config;
    c.set("pack", al.pack);
    k = &impl.kernel(ew::elementwise_family(), *e.problem, c);
    e.kernels[slot].store(k, std::memory_order_release);
  }
  KernelArgs args;
  ew::push_params(*e.problem, std::span<const void* const>(pointers + 1, arity), output, al.head, args);
  impl.launch(*k, args, stream);
}

}  // namespace jitune
