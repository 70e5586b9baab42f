// Scatter_add config legality: the heuristic default and the constraints on a config.
#include "templates/scatter_add/scatter_add_detail.hpp"

namespace jitune::templates::scatter_add::detail {

Config heuristic(const ScatterAddProblem& p, const DeviceInfo& device) {
  if (p.op() == Op::kDot)
    return Config{{"atomic", kPlain}, {"workspace", 1}, {"prereduce", 0},
                  {"block", 256},     {"items", 2},     {"vec", static_cast<std::int64_t>(16 / dtype_size(p.dtype()))},
                  {"order", 0},       {"cache", 0},     {"partition", 0},
                  {"bucket", 15},     {"segment", 18}};
  Config c{{"atomic", kPlain}, {"workspace", 0}, {"prereduce", 0}, {"block", 256}, {"items", 4},
           {"vec", 1},         {"order", 0},     {"cache", 0},     {"partition", 0}, {"bucket", 15},
           {"segment", 18}};
  // A destination larger than L2 with about one source per element or more: every atomic would miss L2 (a
  // DRAM read and write of a sector each); sorting the sources into buckets summed in shared memory reads and
  // writes the destination once (the f32 2^24 into 2^24 case: 833 us atomics, 441 us partitioned on the H100).
  if (p.dst_elements() * static_cast<std::int64_t>(dtype_size(p.dtype())) > device.l2_bytes &&
      p.count() * p.row_length() >= p.dst_elements()) {
    Config part = c;
    part.set("partition", 1);
    part.set("block", 512);
    part.set("items", 8);
    if (check(p, part, device).empty()) return part;
  }
  // Few destination elements: lanes of one warp often share a target.
  if (p.dst_elements() <= 1024) c.set("prereduce", 1);
  // A destination that fits in one or two shared-memory slices and several sources per element: accumulate
  // per block in shared memory, then add each touched element once per block (adjacent bins as pairs).
  if (p.dst_elements() > 1024 && block_slices(p) <= 2 && p.count() * p.row_length() >= 8 * p.dst_elements() &&
      block_slice_elements(p) * 4 <= device.max_shared_per_block_optin) {
    c.set("prereduce", 2);
    c.set("block", 1024);
    c.set("items", 8);
    // Pairs of bins: half2 anywhere, bfloat162 and float2 natively from sm_90.
    if (p.dtype() == DType::kFloat16 || device.cc() >= 90)
      c.set("atomic", kPacked);
    else if (p.dtype() == DType::kBFloat16)
      c.set("atomic", kFast);
    return c;
  }
  if (p.dtype() != DType::kFloat32) {
    // bfloat16 pair atomics are compare-and-swap loops before sm_90: accumulate in float there.
    if (p.dtype() == DType::kBFloat16 && device.cc() < 90)
      c.set(p.workspace_possible() ? "workspace" : "atomic", 1);
    else
      c.set("atomic", p.row_length() >= 2 ? kPacked : kFast);
    // Rows of whole pairs: one vector load and one vector reduction per unit of up to 16 bytes.
    if (c.at("atomic") == kPacked && c.at("prereduce") == 0 && p.row_length() % 2 == 0) {
      std::int64_t vec = 16 / static_cast<std::int64_t>(dtype_size(p.dtype()));
      while (p.row_length() % vec != 0) vec /= 2;
      c.set("vec", vec);
    }
  }
  return c;
}

namespace {

// The partition strategy's limits: the other strategies' knobs at their neutral values, entry positions in 32
// bits, the per-bucket counters and the bins in the block's shared memory.
std::string check_partition(const ScatterAddProblem& p, const Config& config, const DeviceInfo& device) {
  if (config.at("atomic") != kPlain || config.at("workspace") != 0 || config.at("prereduce") != 0 ||
      config.at("vec") != 1)
    return "partition=1 sums in shared memory and writes each bucket once: it takes atomic=0, workspace=0, "
           "prereduce=0, vec=1";
  const std::int64_t block = config.at("block"), items = config.at("items");
  if (block < 256)
    return "partition=1 keeps one block per SM busy through its scans and barriers: it takes block >= 256";
  // The kernel holds two tiles' units per thread in phase 3 and twice the tile's entries in phase 4; with
  // fewer than 128 registers a thread (1024-thread blocks), ptxas spills beyond 2 items (tune --dry-run).
  const std::int64_t budget = device.registers_per_block / block;
  if (budget < 128 && items > 2)
    return "items " + std::to_string(items) + " of partition=1 spill registers when a thread of a " +
           std::to_string(block) + "-thread block has " + std::to_string(budget) + " registers; at most 2";
  const std::int64_t units = p.count() * p.row_length();
  if (units >= (std::int64_t{1} << 31))
    return "partition=1 numbers its entries in 32 bits: " + std::to_string(units) +
           " source elements exceed 2^31 - 1; use partition=0";
  const std::int64_t buckets = partition_buckets(p, config);
  if (buckets > kMaxPartitionBuckets)
    return std::to_string(p.dst_elements()) + " destination elements make " + std::to_string(buckets) +
           " buckets of 2^" + std::to_string(config.at("bucket")) + "; partition=1 takes at most " +
           std::to_string(kMaxPartitionBuckets) + " (a larger bucket makes fewer)";
  const std::int64_t bytes = partition_shared_bytes(p, config) + 1024;  // + the scan's and flags' static memory
  if (bytes > device.max_shared_per_block_optin)
    return "partition=1 with bucket=" + std::to_string(config.at("bucket")) + " needs " + std::to_string(bytes) +
           " bytes of shared memory; the device allows " + std::to_string(device.max_shared_per_block_optin);
  if (device.cc() < 70) return "partition=1 needs sm_70 or newer (__nanosleep in its grid barrier)";
  return {};
}

}  // namespace

std::string check(const ScatterAddProblem& p, const Config& config, const DeviceInfo& device) {
  const std::int64_t atomic = config.at("atomic"), workspace = config.at("workspace"),
                     prereduce = config.at("prereduce"), block = config.at("block"), vec = config.at("vec");
  if (block > device.max_threads_per_block)
    return "block " + std::to_string(block) + " exceeds the device's " +
           std::to_string(device.max_threads_per_block) + " threads per block";
  if (p.dtype() == DType::kBFloat16 && device.cc() < 80) return "bfloat16 atomics need sm_80 or newer";
  if (p.op() == Op::kDot) {
    if (config.at("partition")) return "partition is an index_add strategy; dot takes partition=0";
    if (atomic != kPlain || workspace != 1 || prereduce != 0)
      return "dot sums in a float workspace without atomics on data: it takes atomic=0, workspace=1, "
             "prereduce=0";
    const std::int64_t bytes = vec * static_cast<std::int64_t>(dtype_size(p.dtype()));
    if (bytes > 16)
      return "vec " + std::to_string(vec) + " loads " + std::to_string(bytes) +
             " bytes; the widest vector load is 16 bytes";
    // Both operands' loads in flight take items * bytes / 2 registers; leave half of a thread's share.
    const std::int64_t budget = device.registers_per_block / block;
    if (config.at("items") * bytes / 2 > budget / 2)
      return "items " + std::to_string(config.at("items")) + " x " + std::to_string(bytes) +
             " bytes per operand need more than half of the " + std::to_string(budget) +
             " registers a thread of a " + std::to_string(block) + "-thread block has";
    return {};
  }
  if (config.at("order") != 0 || config.at("cache") != 0)
    return "order and cache are dot parameters; index_add takes order=0 and cache=0";
  if (config.at("partition")) return check_partition(p, config, device);
  if (vec != 1) {
    const std::int64_t bytes = vec * static_cast<std::int64_t>(dtype_size(p.dtype()));
    if (bytes > 16)
      return "vec " + std::to_string(vec) + " loads " + std::to_string(bytes) +
             " bytes; the widest vector load is 16 bytes";
    if (atomic != kPacked || prereduce != 0)
      return "index_add's vector units (vec > 1) add with packed vector reductions: they take atomic=2 and "
             "prereduce=0";
    if (p.row_length() % vec != 0)
      return "index_add's vector units need rows of a multiple of vec elements; row_length " +
             std::to_string(p.row_length()) + " is not a multiple of " + std::to_string(vec);
    // Each unit in flight holds its vector, its index and its source row and unit: bytes / 4 + 4 registers.
    const std::int64_t budget = device.registers_per_block / block, items = config.at("items");
    if (items * (bytes / 4 + 4) > budget / 2)
      return "items " + std::to_string(items) + " vector units of " + std::to_string(bytes) +
             " bytes need more than half of the " + std::to_string(budget) + " registers a thread of a " +
             std::to_string(block) + "-thread block has";
  }
  const bool float_acc = p.dtype() == DType::kFloat32 || workspace == 1;
  if (workspace == 1 && p.dtype() == DType::kFloat32)
    return "a float32 destination accumulates in float already: workspace=1 is for float16 and bfloat16";
  if (workspace == 1 && !p.workspace_possible())
    return "the float workspace takes at most " + std::to_string(kMaxWorkspaceElements) +
           " destination elements (the last block adds it into the destination alone); this one has " +
           std::to_string(p.dst_elements());
  if (atomic == kFast && float_acc) return "for float accumulation the fast atomic is the plain atomic";
  if (prereduce == 2) {
    if (workspace == 1)
      return "the shared-memory pre-reduction accumulates in float already: it takes workspace=0";
    const std::int64_t slices = block_slices(p);
    if (slices > kMaxBlockSlices)
      return "the shared-memory pre-reduction would need " + std::to_string(slices) + " slices of " +
             std::to_string(kSliceElements) + " elements for " + std::to_string(p.dst_elements()) +
             " destination elements; at most " + std::to_string(kMaxBlockSlices) +
             " (each slice re-reads the index)";
    const std::int64_t bytes = block_slice_elements(p) * 4;
    if (bytes > device.max_shared_per_block_optin)
      return "the shared-memory pre-reduction needs " + std::to_string(bytes) +
             " bytes of shared memory; the device "
             "allows " +
             std::to_string(device.max_shared_per_block_optin);
  }
  if (atomic == kPacked && p.row_length() == 1 && prereduce != 2)
    return "packed atomics add two elements of one row; with row_length 1 they are the fast atomic (except "
           "for the "
           "bins of prereduce=2, which are adjacent elements)";
  if (atomic == kPacked && float_acc && device.cc() < 90) return "float2 atomics need sm_90 or newer";
  return {};
}

}  // namespace jitune::templates::scatter_add::detail
