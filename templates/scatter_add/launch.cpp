// Scatter_add instantiation and launch: name expressions, launch shapes and the kernels' arguments.
#include <algorithm>

#include "templates/scatter_add/scatter_add_detail.hpp"

namespace jitune::templates::scatter_add {
namespace detail {

KernelSource source(const ScatterAddProblem& p, const Config& config) {
  const std::string type(dtype_cuda_type(p.dtype()));
  const std::string block = std::to_string(config.at("block")), items = std::to_string(config.at("items"));
  // Loop indices reach the element (unit) count plus one grid step; keep them below 2^31.
  const std::int64_t limit = (std::int64_t{1} << 30);
  if (p.op() == Op::kDot) {
    const std::string index = p.count() > limit ? "long long" : "int";
    return {"#include \"scatter_add/scatter_add.cuh\"\n",
            "jitune::sa::dot<" + type + ", " + block + ", " + items + ", " + std::to_string(config.at("vec")) +
                ", " + std::to_string(config.at("order")) + ", " + std::to_string(config.at("cache")) + ", " + index +
                ">"};
  }
  if (config.at("partition"))
    return {"#include \"scatter_add/scatter_add.cuh\"\n",
            "jitune::sa::index_add_partition<" + type + ", " +
                (p.index_dtype() == DType::kInt32 ? "int" : "long long") + ", " + block + ", " + items + ", " +
                std::to_string(config.at("bucket")) + ", " + std::to_string(config.at("segment")) + ">"};
  const std::int64_t units = units_per_row(p, config, 1);
  const std::string index = p.count() > limit / std::max<std::int64_t>(units, 1) ? "long long" : "int";
  const std::string index_type = p.index_dtype() == DType::kInt32 ? "int" : "long long";
  if (config.at("vec") > 1)
    return {"#include \"scatter_add/scatter_add.cuh\"\n",
            "jitune::sa::index_add_vec<" + type + ", " + index_type + ", " +
                (config.at("workspace") ? "true" : "false") + ", " + block + ", " + items + ", " +
                std::to_string(config.at("vec")) + ", " + index + ">"};
  return {"#include \"scatter_add/scatter_add.cuh\"\n",
          "jitune::sa::index_add<" + type + ", " + index_type + ", " + std::to_string(config.at("atomic")) + ", " +
              (config.at("workspace") ? "true" : "false") + ", " + std::to_string(config.at("prereduce")) +
              ", " + block + ", " + items + ", " + index + ">"};
}

LaunchShape launch_shape(const ScatterAddProblem& p, const Config& config, const DeviceInfo& device) {
  const std::int64_t block = config.at("block"), items = config.at("items");
  const std::int64_t resident = resident_blocks(device, block);
  LaunchShape s;
  s.block.x = static_cast<unsigned>(block);
  if (p.op() == Op::kDot) {
    const std::int64_t per_block = block * items * config.at("vec");
    const std::int64_t needed = std::max<std::int64_t>(1, (p.count() + per_block - 1) / per_block);
    s.grid.x = static_cast<unsigned>(std::min({needed, resident, std::int64_t{kMaxDotBlocks}}));
    return s;
  }
  if (config.at("partition")) {
    // One resident wave (ready_function caps it at the loaded kernel's occupancy), at most a block per step.
    const std::int64_t steps = (p.count() * p.row_length() + block * items - 1) / (block * items);
    s.grid.x = static_cast<unsigned>(std::clamp<std::int64_t>(steps, 1, resident));
    s.shared_bytes = static_cast<unsigned>(partition_shared_bytes(p, config));
    s.cooperative = true;
    return s;
  }
  // The most units a row can have (odd offsets add one); blocks past the end exit at once.
  const std::int64_t total = p.count() * units_per_row(p, config, 1);
  const std::int64_t needed = std::max<std::int64_t>(1, (total + block * items - 1) / (block * items));
  if (config.at("prereduce") == 2) {
    // Few, full blocks: each block's bins should see as many sources as possible before they are flushed.
    const std::int64_t slices = block_slices(p), bytes = block_slice_elements(p) * 4;
    const std::int64_t by_smem = std::max<std::int64_t>(1, device.max_shared_per_sm / (bytes + 1024));
    const std::int64_t per_sm =
        std::min(by_smem, std::max<std::int64_t>(1, device.max_threads_per_sm / block));
    s.grid.x =
        static_cast<unsigned>(std::min(needed, std::max<std::int64_t>(1, device.sm_count * per_sm / slices)));
    s.grid.y = static_cast<unsigned>(slices);
    s.shared_bytes = static_cast<unsigned>(bytes);
    return s;
  }
  // With the workspace every block ends with a fence (its atomics must drain before it reports done): one
  // wave of blocks, so that wait happens once per SM rather than once per wave.
  s.grid.x = static_cast<unsigned>(std::min(needed, config.at("workspace") ? resident : resident * 8));
  return s;
}

}  // namespace detail

std::int64_t partition_buckets(const ScatterAddProblem& p, const Config& config) {
  const std::int64_t bins = std::int64_t{1} << config.at("bucket");
  return (p.dst_elements() + bins - 1) / bins;
}

std::size_t partition_zeroed_bytes(const ScatterAddProblem& p, const Config& config) {
  // Mirrors index_add_partition in partition.cuh: kPartitionHeaderWords words, then totals and fill.
  return 4 * static_cast<std::size_t>(4 + 2 * partition_buckets(p, config));
}

namespace {
// Bytes of one bucketed entry (PartitionEntry in partition.cuh): a word for 16-bit types, two for float.
std::size_t partition_entry_bytes(const ScatterAddProblem& p) {
  return p.dtype() == DType::kFloat32 ? 8 : 4;
}
}  // namespace

std::size_t partition_workspace_bytes(const ScatterAddProblem& p, const Config& config) {
  // Header words, totals, fill and base, then the entries from the next 8-byte boundary.
  const std::size_t header = 4 * static_cast<std::size_t>(4 + 3 * partition_buckets(p, config));
  return ((header + 7) & ~std::size_t{7}) +
         static_cast<std::size_t>(p.count() * p.row_length()) * partition_entry_bytes(p);
}

std::int64_t partition_shared_bytes(const ScatterAddProblem& p, const Config& config) {
  // A word per bucket throughout; then phase 3's tile (a word per bucket, an entry and a 16-bit bucket per
  // unit) or phase 4's float bins, whichever is larger.
  const std::int64_t buckets = partition_buckets(p, config);
  const std::int64_t tile = config.at("block") * config.at("items");
  const std::int64_t scatter = 4 * buckets + tile * (static_cast<std::int64_t>(partition_entry_bytes(p)) + 2);
  return 4 * buckets + std::max(scatter, std::int64_t{4} << config.at("bucket"));
}

std::int64_t block_slices(const ScatterAddProblem& p) {
  return std::max<std::int64_t>(1, (p.dst_elements() + kSliceElements - 1) / kSliceElements);
}

std::int64_t block_slice_elements(const ScatterAddProblem& p) {
  const std::int64_t slices = block_slices(p);
  const std::int64_t slice = (p.dst_elements() + slices - 1) / slices;
  return (slice + 1) & ~std::int64_t{1};  // mirrors block_slice() in scatter_add.cuh
}

std::int64_t units_per_row(const ScatterAddProblem& p, const Config& config, int parity) {
  if (config.at("vec") > 1) return p.row_length() / config.at("vec");
  if (config.at("atomic") != kPacked || config.at("prereduce") == 2) return p.row_length();
  const std::int64_t d = p.row_length();
  const int acc_parity = config.at("workspace") ? 0 : parity;
  return (d % 2 == 0 && acc_parity == 0) ? d / 2 : d / 2 + 1;
}

void push_index_add_args(const ScatterAddProblem& p, const Config& config, void* dst, const void* index,
                         const void* src, void* workspace, float alpha, KernelArgs& args) {
  const int parity = static_cast<int>((reinterpret_cast<std::uintptr_t>(dst) / dtype_size(p.dtype())) & 1u);
  args.push(dst);
  args.push(index);
  args.push(src);
  args.push(config.at("workspace") ? workspace : nullptr);
  args.push(static_cast<long long>(p.rows()));
  args.push(static_cast<long long>(p.count()));
  args.push(static_cast<long long>(p.row_length()));
  args.push(static_cast<long long>(units_per_row(p, config, parity)));
  args.push(parity);
  args.push(alpha);
}

void push_partition_args(const ScatterAddProblem& p, const Config& config, void* dst, const void* index,
                         const void* src, void* workspace, float alpha, KernelArgs& args) {
  args.push(dst);
  args.push(index);
  args.push(src);
  args.push(workspace);
  args.push(static_cast<long long>(p.rows()));
  args.push(static_cast<long long>(p.count()));
  args.push(static_cast<long long>(p.row_length()));
  args.push(static_cast<int>(partition_buckets(p, config)));
  args.push(static_cast<int>((reinterpret_cast<std::uintptr_t>(dst) / dtype_size(p.dtype())) & 1u));
  args.push(alpha);
}

int index_add_vec(const ScatterAddProblem& p, const Config& config, const void* dst, const void* src) noexcept {
  const auto es = static_cast<std::uintptr_t>(dtype_size(p.dtype()));
  const auto d = reinterpret_cast<std::uintptr_t>(dst), s = reinterpret_cast<std::uintptr_t>(src);
  int vec = static_cast<int>(config.at("vec"));
  // The workspace (when used) is aligned by the runtime; the destination is then only read element-wise.
  while (vec > 1 && (s % (es * static_cast<std::uintptr_t>(vec)) != 0 ||
                     (!config.at("workspace") && d % (es * static_cast<std::uintptr_t>(vec)) != 0)))
    vec /= 2;
  return vec;
}

DotAlignment dot_alignment(const void* x, const void* y, std::size_t element_size, int max_vec,
                           std::int64_t n) noexcept {
  const auto ax = reinterpret_cast<std::uintptr_t>(x), ay = reinterpret_cast<std::uintptr_t>(y);
  for (int vec = max_vec; vec > 1; vec /= 2) {
    const std::uintptr_t bytes = static_cast<std::uintptr_t>(vec) * element_size;
    if (ax % bytes != ay % bytes || ax % element_size != 0) continue;
    const auto head = static_cast<std::int64_t>(((bytes - ax % bytes) % bytes) / element_size);
    return {vec, std::min(head, n)};
  }
  return {1, 0};
}

void push_dot_args(const ScatterAddProblem& p, const DotAlignment& a, const void* x, const void* y, void* out,
                   void* workspace, KernelArgs& args) {
  args.push(x);
  args.push(y);
  args.push(static_cast<long long>(p.count()));
  args.push(static_cast<long long>(a.head));
  args.push(out);
  args.push(workspace);
}

}  // namespace jitune::templates::scatter_add
