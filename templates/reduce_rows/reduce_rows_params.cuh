// Kernel parameters of the reduce_rows family, shared by the host (templates/reduce_rows/reduce_rows.cpp
// fills them) and the kernels (reduce_rows/reduce_rows.cuh). One plain struct of 64-bit words, so both
// compilers lay it out alike; no headers, so the file compiles under NVRTC and as host C++.
#pragma once

namespace jitune {
namespace templates {
namespace reduce_rows {

/// Threads per block of the group kernel (teams of 1 to 32 threads, one row each).
constexpr int kGroupBlock = 256;

/// y[r] = op over c of x[r * cols + c], for r < rows.
struct Params {
  unsigned long long x;         ///< Input: rows x cols elements, row-major, element-aligned.
  unsigned long long y;         ///< Output: rows elements of x's type.
  unsigned long long partials;  ///< Workspace kernel: float[rows * split], a partial per slice; else 0.
  unsigned long long arrivals;  ///< Workspace kernel: unsigned[rows], zeroed before the launch; else 0.
  long long rows;               ///< Rows, >= 1.
  long long cols;               ///< Elements per row, 1 .. 2^30.
  long long split;              ///< Blocks per row (1: one block or one group of threads per row).
};

}  // namespace reduce_rows
}  // namespace templates
}  // namespace jitune
