// The scatter_add family: index_add (torch's index_add_ along dim 0; the 1-D scatter_add is row_length 1) and
// the half / bf16 / float dot product, with the strategies the tuner chooses between (plain, fast and packed
// atomics, warp pre-reduction, float workspace, partition into buckets summed in shared memory).
#pragma once

#include <cstdint>

#include <jitune/tensor.hpp>

#include "templates/family.hpp"

namespace jitune::templates::scatter_add {

/// Which operation a problem describes.
enum class Op : std::uint8_t { kIndexAdd, kDot };

/// Which public op a call came from (scatter_add is index_add with row_length 1).
enum class Api : std::uint8_t { kIndexAdd, kScatterAdd, kDot };
/// "index_add", "scatter_add" or "dot".
std::string_view api_name(Api api) noexcept;

/// Most destination elements the float-workspace strategy takes: the last block alone adds the workspace into
/// the destination, which stays cheap up to about this size.
constexpr std::int64_t kMaxWorkspaceElements = std::int64_t{1} << 20;
/// Mirrors templates::scatter_add::kMaxDotBlocks in scatter_add.cuh: partials a dot workspace holds.
constexpr int kMaxDotBlocks = 4096;
/// Most float bins one block of the shared-memory pre-reduction (prereduce=2) holds: 160 KB, which sm_80 and
/// sm_90 both allow a block.
constexpr std::int64_t kSliceElements = 40960;
/// Most slices (block rows, each re-reading the index) the shared-memory pre-reduction splits a destination
/// into.
constexpr std::int64_t kMaxBlockSlices = 4;

/// One index_add or dot call.
class ScatterAddProblem final : public Problem {
 public:
  /// index_add: dst is rows x row_length, index holds `count` entries of index_dtype, src is count x
  /// row_length. Throws InvalidArgument for an unsupported dtype or index dtype, rows < 1, row_length < 1 or
  /// count < 0.
  static ScatterAddProblem index_add(DType dtype, DType index_dtype, std::int64_t rows, std::int64_t count,
                                     std::int64_t row_length);
  /// dot of two vectors of n elements. Throws InvalidArgument for an unsupported dtype or n < 0.
  static ScatterAddProblem dot(DType dtype, std::int64_t n);
  /// index_add / scatter_add as the public op was called: validates its sizes (src_rows is src's rows, or
  /// src's element count for scatter_add) and accepts empty calls, which run nothing.
  static ScatterAddProblem call(Api api, DType dtype, DType index_dtype, std::int64_t rows,
                                std::int64_t count, std::int64_t src_rows, std::int64_t row_length);
  Api api() const noexcept { return api_; }

  Op op() const noexcept { return op_; }
  DType dtype() const noexcept { return dtype_; }
  DType index_dtype() const noexcept { return index_dtype_; }
  std::int64_t rows() const noexcept { return rows_; }
  std::int64_t count() const noexcept { return count_; }  ///< index entries (index_add) or n (dot)
  std::int64_t row_length() const noexcept { return row_length_; }
  std::int64_t dst_elements() const noexcept { return rows_ * row_length_; }
  /// Whether a float workspace is legal at all: 16-bit dtype and at most kMaxWorkspaceElements (dot: always).
  bool workspace_possible() const noexcept;
  /// Bytes of the zeroed float workspace the kernels expect (0 when workspace_possible() is false).
  std::size_t workspace_bytes() const noexcept;

  /// "count=16777216;dtype=float16;index=int64;op=index_add;row_length=1;rows=65536" or
  /// "dtype=float16;n=1024;op=dot"
  std::string signature() const override;
  std::string group() const override;             ///< "index_add|float16|int64", "dot|float16"
  std::vector<double> features() const override;  ///< log2 of count, rows, row_length (dot: log2 n)
  /// index_add: source and index read once, destination written once; dot: both vectors read once.
  double bytes_moved() const override;
  double flops() const override;

 private:
  ScatterAddProblem() = default;
  /// An index_add problem of these fields, unchecked: index_add() and call() validate them first.
  ScatterAddProblem(Api api, DType dtype, DType index_dtype, std::int64_t rows, std::int64_t count,
                    std::int64_t row_length) noexcept;
  Op op_ = Op::kIndexAdd;
  Api api_ = Api::kIndexAdd;
  DType dtype_ = DType::kFloat32;
  DType index_dtype_ = DType::kInt64;
  std::int64_t rows_ = 1, count_ = 0, row_length_ = 1;
};

/// Most buckets the partition strategy (partition=1) takes: its per-bucket counters live in shared memory.
constexpr std::int64_t kMaxPartitionBuckets = 16384;
/// Buckets of 2^bucket destination elements the partition strategy cuts the destination into.
std::int64_t partition_buckets(const ScatterAddProblem& problem, const Config& config);
/// Bytes of the partition workspace: the header words and per-bucket totals, fill counts and bases (the first
/// partition_zeroed_bytes() of it zero at launch; the kernel leaves them zero), then one 16-bit offset and one
/// source-typed value per source element.
std::size_t partition_workspace_bytes(const ScatterAddProblem& problem, const Config& config);
std::size_t partition_zeroed_bytes(const ScatterAddProblem& problem, const Config& config);
/// Dynamic shared memory of the partition kernel: a counter per bucket and a float bin per bucket element.
std::int64_t partition_shared_bytes(const ScatterAddProblem& problem, const Config& config);

/// Destination slices of the shared-memory pre-reduction (grid rows; each slice's blocks read every index).
std::int64_t block_slices(const ScatterAddProblem& problem);
/// Float bins per slice (even; the dynamic shared memory is 4 bytes each).
std::int64_t block_slice_elements(const ScatterAddProblem& problem);

/// Units per row the index_add kernel walks: vec-element units with vec > 1, else pair units for `config` when the accumulation target starts at element
/// parity `parity` (the destination's element offset modulo 2, or 0 in the float workspace).
std::int64_t units_per_row(const ScatterAddProblem& problem, const Config& config, int parity);

/// The vec (elements per unit) index_add can use for these pointers: config's vec, halved until the source and,
/// without the workspace, the destination are aligned to it (1: the scalar / pair kernel).
int index_add_vec(const ScatterAddProblem& problem, const Config& config, const void* dst,
                  const void* src) noexcept;

/// Lays out the index_add kernel's arguments. `workspace` must be a zeroed buffer of
/// problem.workspace_bytes() when config has workspace=1 (else it may be null).
void push_index_add_args(const ScatterAddProblem& problem, const Config& config, void* dst, const void* index,
                         const void* src, void* workspace, float alpha, KernelArgs& args);

/// Lays out the partition kernel's arguments; `workspace` holds partition_workspace_bytes(), its first
/// partition_zeroed_bytes() zero.
void push_partition_args(const ScatterAddProblem& problem, const Config& config, void* dst, const void* index,
                         const void* src, void* workspace, float alpha, KernelArgs& args);

/// Widest vector width (elements, at most `max_vec`) x and y share, with the scalar head before it.
struct DotAlignment {
  int vec = 1;
  std::int64_t head = 0;
};
DotAlignment dot_alignment(const void* x, const void* y, std::size_t element_size, int max_vec,
                           std::int64_t n) noexcept;

/// Lays out the dot kernel's arguments for vector width `alignment`.
void push_dot_args(const ScatterAddProblem& problem, const DotAlignment& alignment, const void* x,
                   const void* y, void* out, void* workspace, KernelArgs& args);

/// Tolerance for a sum of at most `contributions` random terms of rms `rms` per output element when every
/// partial sum is rounded to `accumulation` (the element type for atomics in it, float32 for a workspace),
/// and the result is rounded once to `dtype`: the rounding errors of a random walk add up to a standard
/// deviation of about u * rms * contributions / sqrt(6) (u: unit roundoff); the tolerance is 12 of those plus
/// two units of the result.
OutputCheck accumulation_check(DType dtype, DType accumulation, std::int64_t contributions, double rms);

/// The registered family object.
const Family& scatter_add_family();

}  // namespace jitune::templates::scatter_add

namespace jitune {
using templates::scatter_add::scatter_add_family;
}  // namespace jitune
