// Elementwise kernel: OneFlow's vectorised elementwise template, made tunable. Each thread loads kUnroll packs of
// every input (kPack elements per aligned vector access), applies Op in float, and stores packs of the output,
// in a grid-stride loop. The host peels `head` elements so the output's packs are aligned; an input whose address
// sits `shift` elements past a pack boundary there (a view offset by a few elements) is read as two aligned packs
// and realigned in registers with funnel shifts, so mixed alignment keeps full-width accesses (the second pack is
// the neighbouring thread's first, an L1 hit). Elements before the vector region and after it go through a
// scalar path, so any element alignment is correct and no access leaves a buffer. On sm_90 the host launches it
// programmatically (the launch overlaps the previous kernel's drain; the kernel waits before touching memory).
#pragma once

#include "common/pdl.cuh"
#include "common/realign.cuh"
#include "common/types.cuh"

namespace jitune {
namespace ew {

/// Kernel parameters: one output, kArity inputs, all of n elements of type T.
template <class T, int kArity>
struct Params {
  T* out;
  const T* in[kArity];
  long long n;       ///< Elements.
  long long head;    ///< Elements before the vector region (scalar path); out + head is pack-aligned.
  long long packs;   ///< Packs in the vector region; elements from head + packs * kPack on are scalar.
  long long shifts;  ///< 4 bits per input: in[a] + head lies shift_a elements past a pack boundary.
};

// Tunables (host names in brackets):
//   kPack   [pack]:   elements per vector access, kPack * sizeof(T) <= 16 bytes; 1, 2, 4, 8.
//   kBlock  [block]:  threads per block; 64, 128, 256, 512, 1024.
//   kUnroll [unroll]: packs each thread loads before computing, more bytes in flight; 1, 2, 4, 8.
//   grid cap [waves]: set on the host, blocks <= waves * resident blocks per wave.
//   Index:            int when every index fits in 31 bits, long long otherwise (by rule, not tuned).
// Op: a functor `float operator()(const float* v) const` over the kArity input values.
template <class Op, class T, int kArity, int kPack, int kBlock, int kUnroll, class Index>
__global__ void __launch_bounds__(kBlock) elementwise(Params<T, kArity> p) {
  const Op op;
  const Index head = static_cast<Index>(p.head);
  const Index packs = static_cast<Index>(p.packs);
  const Index tile = static_cast<Index>(kBlock) * kUnroll;
  const Pack<T, kPack>* in[kArity];
  int shift[kArity];
#pragma unroll
  for (int a = 0; a < kArity; ++a) {
    shift[a] = static_cast<int>((static_cast<unsigned long long>(p.shifts) >> (4 * a)) & 15u);
    in[a] = reinterpret_cast<const Pack<T, kPack>*>(p.in[a] + (head - shift[a]));
  }
  Pack<T, kPack>* out = reinterpret_cast<Pack<T, kPack>*>(p.out + head);
  wait_for_previous_kernel();

  for (Index base = static_cast<Index>(blockIdx.x) * tile + threadIdx.x; base < packs;
       base += static_cast<Index>(gridDim.x) * tile) {
    Pack<T, kPack> x[kUnroll][kArity];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const Index i = base + static_cast<Index>(u) * kBlock;
      if (i < packs) {
#pragma unroll
        for (int a = 0; a < kArity; ++a) {
          x[u][a] = in[a][i];
          if (shift[a] != 0) x[u][a] = realign(x[u][a], in[a][i + 1], shift[a]);  // uniform branch
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const Index i = base + static_cast<Index>(u) * kBlock;
      if (i < packs) {
        Pack<T, kPack> y;
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
          float v[kArity];
#pragma unroll
          for (int a = 0; a < kArity; ++a) v[a] = to_float(x[u][a].v[k]);
          y.v[k] = from_float<T>(op(v));
        }
        out[i] = y;
      }
    }
  }

  const Index tail = head + packs * kPack;
  const Index rest = head + (static_cast<Index>(p.n) - tail);
  for (Index r = static_cast<Index>(blockIdx.x) * kBlock + threadIdx.x; r < rest;
       r += static_cast<Index>(gridDim.x) * kBlock) {
    const Index e = r < head ? r : tail + (r - head);
    float v[kArity];
#pragma unroll
    for (int a = 0; a < kArity; ++a) v[a] = to_float(p.in[a][e]);
    p.out[e] = from_float<T>(op(v));
  }
}

}  // namespace ew
}  // namespace jitune
