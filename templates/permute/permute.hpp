// The permute family: host-side simplification of a permute call (by rule), the problem type, kernel
// parameters and the family object.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include <jitune/tensor.hpp>

#include "templates/family.hpp"
#include "templates/permute/permute_params.cuh"

namespace jitune::templates::permute {

// The kernel parameter structs are shared with the device code (permute_params.cuh), which keeps the kernels'
// own namespace: the name expressions and the template hash of the shipped records depend on it.
using pmt::Divisor;
using pmt::kMaxRank;
using pmt::GeneralParams;
using pmt::TiledParams;

/// A permute after simplification: at most 8 input dims of `unit`-byte units; output dim i is input dim
/// perm[i].
struct Plan {
  int rank = 0;                               ///< Dims left (0: one unit, or an empty tensor).
  std::array<std::int64_t, kMaxRank> dims{};  ///< Input dims in units, outermost first.
  std::array<int, kMaxRank> perm{};           ///< Output dim i is input dim perm[i].
  int unit = 1;                               ///< Bytes per unit: the movement size.
  std::int64_t units = 0;                     ///< Total units; 0 for an empty tensor.

  /// Nothing moves: the permute is one copy of `units * unit` bytes.
  bool identity() const noexcept { return rank <= 1; }
  /// The input's contiguous (last) dim is not the output's: the tiled kernel applies.
  bool last_dim_moves() const noexcept { return rank >= 2 && perm[rank - 1] != rank - 1; }
  /// Output dims in units, outermost first.
  std::int64_t out_dim(int i) const noexcept { return dims[perm[i]]; }
};

/// Throws InvalidArgument when `shape` and `perm` cannot describe a permute: more than 8 dims, lengths
/// differ, a negative extent, `perm` not a permutation of 0..n-1, or more than 2^62 bytes of
/// `element_size`-byte elements.
void validate(std::span<const std::int64_t> shape, std::span<const int> perm, std::size_t element_size);

/// Simplifies by rule: drops size-1 dims; merges runs of input dims that stay adjacent and in order in the
/// output; then, when the last dim stays last, widens the unit to the widest of 16/8/4/2 bytes (at most
/// `max_movement`, at least the element size) that divides the last dim's bytes, and simplifies again (the
/// last dim may collapse to one unit and disappear). `shape` and `perm` must be valid (see validate).
Plan simplify(std::span<const std::int64_t> shape, std::span<const int> perm, int element_size,
              int max_movement);

/// The widest power of two <= 16 that divides both addresses.
int pointer_alignment(const void* a, const void* b) noexcept;

/// True when a plan of `units` units needs 64-bit indices (offsets beyond 2^31 - 1).
bool needs_index64(std::int64_t units) noexcept;

/// The divisor `d` (>= 1) with its magic number and shift for 32-bit division (see Divisor).
Divisor make_divisor(std::uint64_t d) noexcept;

/// Element-order-independent check of the identity case: true when the dims of extent > 1 keep their order.
bool is_identity(std::span<const std::int64_t> shape, std::span<const int> perm) noexcept;

/// One permute call: dtype (only its size matters to the kernels), input shape and permutation.
class PermuteProblem final : public Problem {
 public:
  /// Throws InvalidArgument as validate() does.
  PermuteProblem(DType dtype, std::vector<std::int64_t> shape, std::vector<int> perm);
  DType dtype() const noexcept { return dtype_; }
  int element_size() const noexcept { return static_cast<int>(dtype_size(dtype_)); }
  const std::vector<std::int64_t>& shape() const noexcept { return shape_; }
  const std::vector<int>& perm() const noexcept { return perm_; }
  std::int64_t elements() const noexcept { return elements_; }
  /// The widest movement the rule allows with 16-byte aligned pointers.
  int max_movement() const noexcept { return max_movement_; }
  /// The plan for movement `bytes` (element size <= bytes <= max_movement, power of two).
  const Plan& plan(int bytes) const;

  std::string signature() const override;         ///< "dtype=float32;perm=0,2,1;shape=64x1024x1024"
  std::string group() const override;             ///< "bytes=4|perm=0,2,1": unit and simplified permutation
  std::vector<double> features() const override;  ///< log2 of the simplified dims
  double bytes_moved() const override;            ///< Input read once plus output written once.

 private:
  DType dtype_;
  std::vector<std::int64_t> shape_;
  std::vector<int> perm_;
  std::int64_t elements_ = 0;
  int max_movement_ = 1;
  std::array<Plan, 5> plans_;  // index log2(movement)
};

/// Kernel kinds (the "kind" parameter).
enum Kind : int { kGeneral = 0, kTiled = 1, kTiledPairs = 2 };

/// `config` made legal for pointers aligned to `alignment` bytes (pointer_alignment of src and dst): movement
/// and vector width shrink to what the pointers allow, a tiled config whose plan no longer moves the last dim
/// becomes the general kernel. Returns `config` itself when it already fits.
Config adapt_config(const PermuteProblem& problem, const Config& config, int alignment,
                    const DeviceInfo& device);

/// Appends the kernel's parameter struct (GeneralParams or TiledParams) for `config` as one argument.
void push_params(const PermuteProblem& problem, const Config& config, const void* src, void* dst,
                 KernelArgs& args);

/// The registered family object.
const Family& permute_family();

}  // namespace jitune::templates::permute

namespace jitune {
using templates::permute::permute_family;
}  // namespace jitune
