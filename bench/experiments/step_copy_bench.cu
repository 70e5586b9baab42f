// Experiment (2026-11-29): repack 3's steps (templates/conv2d/igemm_launches.cuh) timed alone on the N32 3x3
// layers of the default suite: the copy of x and w with the grid the host launches, with x's tile count as
// grid, with half the tiles (each block two), its first form (repack 2's ring in 396 blocks of 64 KiB, commit
// 78dfdb8), an empty kernel of the same grid and a plain 16-byte copy of the same bytes; the unstaging of y,
// new and first form. Each figure is the median of 15 runs of a CUDA graph of 100 launches (the host's launch
// rate out of it), inputs L2-resident (constant bytes: a timing, not a test). Built by
// bench/experiments/step_copy_bench.sh; figures in bench/RESULTS.md (2026-11-29, twenty-fourth session).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#include "conv2d/igemm_launches.cuh"
#include "old_launches.cuh"
using namespace jitune::conv;
#define CK(x)                                                          \
  do {                                                                 \
    cudaError_t e = (x);                                               \
    if (e != cudaSuccess) {                                            \
      printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      exit(1);                                                         \
    }                                                                  \
  } while (0)
__global__ void empty_kernel() {}
__global__ void copy16(const uint4* __restrict__ in, uint4* __restrict__ out, long long n) {
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n; i += 256ll * gridDim.x) out[i] = in[i];
}
template <class F>
float timeit(F f, int reps = 100) {
  // reps launches captured in a graph: the host's launch rate out of the figure.
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < reps; ++i) f(st);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(ge, st));
  std::vector<float> v;
  for (int r = 0; r < 15; ++r) {
    cudaEventRecord(a, st);
    CK(cudaGraphLaunch(ge, st));
    cudaEventRecord(b, st);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    v.push_back(ms * 1000 / reps);
  }
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(st);
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
template <class T, int kC, int kK, int kRS>
void run(const char* name, int n, int h, int w) {
  const long long xe = 1ll * n * kC * h * w, we = 1ll * kK * kC * kRS;
  T *x, *wt, *xs, *ws;
  CK(cudaMalloc(&x, xe * sizeof(T)));
  CK(cudaMalloc(&wt, we * sizeof(T)));
  CK(cudaMalloc(&xs, xe * sizeof(T)));
  CK(cudaMalloc(&ws, we * sizeof(T)));
  CK(cudaMemset(x, 1, xe * sizeof(T)));
  CK(cudaMemset(wt, 1, we * sizeof(T)));
  Args<T> a{};
  a.x = x;
  a.wt = wt;
  a.n = n;
  a.h = h;
  a.w = w;
  auto tiles = [](long long rows, int l, int es) {
    int parts = (l + 63) / 64, span = (l + parts - 1) / parts;
    int groups = span == l ? 64 / l : 1;
    long long tr = groups * 128 / es;
    return (rows + tr - 1) / tr * parts;
  };
  const int es = sizeof(T);
  const long long tx = tiles(1ll * n * kC, h * w, es), tw = tiles(1ll * kK * kC, kRS, es);
  const double mb = 2.0 * (xe + we) * sizeof(T) / 1e6;
  float t_full = timeit(
      [&](cudaStream_t st) { conv2d_repack_copy<T, kC, kK, kRS><<<tx + tw, 256, 0, st>>>(a, xs, ws); });
  // x only: grid of x's tiles (the kernel walks x's tiles first)
  float t_x =
      timeit([&](cudaStream_t st) { conv2d_repack_copy<T, kC, kK, kRS><<<tx, 256, 0, st>>>(a, xs, ws); });
  float t_half = timeit(
      [&](cudaStream_t st) { conv2d_repack_copy<T, kC, kK, kRS><<<(tx + tw) / 2, 256, 0, st>>>(a, xs, ws); });
  float t_empty = timeit([&](cudaStream_t st) { empty_kernel<<<tx + tw, 256, 0, st>>>(); });
  const long long chunks = (xe + we) * sizeof(T) / 16;
  uint4 *cin, *cout;
  CK(cudaMalloc(&cin, chunks * 16));
  CK(cudaMalloc(&cout, chunks * 16));
  CK(cudaMemset(cin, 1, chunks * 16));
  float t_copy = timeit([&](cudaStream_t st) {
    copy16<<<(int)std::min<long long>(chunks / 256 + 1, 132 * 8), 256, 0, st>>>(cin, cout, chunks);
  });
  cudaFree(cin);
  cudaFree(cout);
  CK(cudaFuncSetAttribute(old_repack_copy<T, kC, kK, kRS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          65536));
  float t_old =
      timeit([&](cudaStream_t st) { old_repack_copy<T, kC, kK, kRS><<<396, 256, 65536, st>>>(a, xs, ws); });
  // The unstaging of y {N,PQ,K} -> {N,K,PQ} (3x3 pad 1: P = H, Q = W), new and old.
  const long long ye = 1ll * n * kK * h * w;
  T *ys, *y;
  CK(cudaMalloc(&ys, ye * sizeof(T)));
  CK(cudaMalloc(&y, ye * sizeof(T)));
  CK(cudaMemset(ys, 1, ye * sizeof(T)));
  Args<T> b = a;
  b.p = h;
  b.q = w;
  b.y = y;
  const int pq = h * w, parts = (pq + 63) / 64;
  const long long ut = 1ll * n * ((kK + 128 / es - 1) / (128 / es)) * parts;
  float u_new = timeit([&](cudaStream_t st) { conv2d_unstage<T, kK><<<ut, 256, 0, st>>>(b, ys); });
  CK(cudaFuncSetAttribute(old_unstage<T, kK>, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  float u_old = timeit([&](cudaStream_t st) { old_unstage<T, kK><<<396, 256, 65536, st>>>(b, ys); });
  printf(
      "   copy: old (ring, 396 blocks) %6.2f us, new %6.2f us; unstage %lld blocks: old %6.2f us, new %6.2f "
      "us (%.1f MB moved)\n",
      t_old, t_full, ut, u_old, u_new, 2.0 * ye * sizeof(T) / 1e6);
  cudaFree(ys);
  cudaFree(y);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  printf(
      "%-28s tiles %lld+%lld  full %6.2f us (%5.0f GB/s)  x-tiles-only %6.2f  half-grid-strided %6.2f  empty "
      "%5.2f  plain copy same bytes %5.2f\n",
      name, tx, tw, t_full, mb * 1e3 / t_full, t_x, t_half, t_empty, t_copy);
  cudaFree(x);
  cudaFree(wt);
  cudaFree(xs);
  cudaFree(ws);
}
int main() {
  run<__half, 256, 256, 9>("f16 N32 C256 14x14", 32, 14, 14);
  run<__half, 512, 512, 9>("f16 N32 C512 7x7", 32, 7, 7);
  run<float, 256, 256, 9>("f32 N32 C256 14x14", 32, 14, 14);
  run<__half, 128, 128, 9>("f16 N32 C128 28x28", 32, 28, 28);
  run<__half, 64, 64, 9>("f16 N32 C64 56x56", 32, 56, 56);
}
