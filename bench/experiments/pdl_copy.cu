// Experiment (2026-11-22): back-to-back copy kernels with and without programmatic dependent launch.
// Build here: nvcc -O3 -arch=sm_90 -o pdl_copy bench/experiments/pdl_copy.cu; carry the binary and run it on the GPU.
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)
template <int kMode>  // 0 plain, 1 wait at top, 2 wait + trigger at top
__global__ void __launch_bounds__(256) copy4(const uint4* __restrict__ in, uint4* __restrict__ out, size_t n) {
  if (kMode >= 1) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (kMode == 2) asm volatile("griddepcontrol.launch_dependents;");
  size_t stride = (size_t)gridDim.x * 256 * 4;
  for (size_t b = blockIdx.x * 256 * 4 + threadIdx.x; b < n; b += stride) {
    uint4 v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) if (b + k * 256 < n) v[k] = in[b + k * 256];
#pragma unroll
    for (int k = 0; k < 4; ++k) if (b + k * 256 < n) out[b + k * 256] = v[k];
  }
}
int main() {
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t s; CK(cudaStreamCreate(&s));
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (size_t bytes : {size_t(128) * 128 * 9 * 64 * 4, size_t(8192) * 8192 * 4, size_t(1) << 30}) {
    size_t n = bytes / 16;
    uint4 *in, *out; CK(cudaMalloc(&in, bytes)); CK(cudaMalloc(&out, bytes));
    CK(cudaMemset(in, 0x3c, bytes));
    for (int per : {1, 100}) {
      for (int mode = -1; mode < 3; ++mode) {
        auto launch = [&]() {
          if (mode < 0) { CK(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, s)); return; }
          unsigned grid = (unsigned)std::min<size_t>((n + 1023) / 1024, (size_t)sms * 8 * 16);
          cudaLaunchConfig_t cfg = {}; cfg.gridDim = grid; cfg.blockDim = 256; cfg.stream = s;
          cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
          at[0].val.programmaticStreamSerializationAllowed = 1;
          cfg.attrs = at; cfg.numAttrs = mode >= 1 ? 1 : 0;
          if (mode == 0) CK(cudaLaunchKernelEx(&cfg, copy4<0>, (const uint4*)in, out, n));
          if (mode == 1) CK(cudaLaunchKernelEx(&cfg, copy4<1>, (const uint4*)in, out, n));
          if (mode == 2) CK(cudaLaunchKernelEx(&cfg, copy4<2>, (const uint4*)in, out, n));
        };
        for (int i = 0; i < 10; ++i) launch();
        std::vector<float> t;
        for (int g = 0; g < (per == 1 ? 50 : 20); ++g) {
          CK(cudaEventRecord(a, s)); for (int i = 0; i < per; ++i) launch(); CK(cudaEventRecord(b, s));
          CK(cudaEventSynchronize(b)); float ms; CK(cudaEventElapsedTime(&ms, a, b)); t.push_back(ms * 1000 / per);
        }
        std::sort(t.begin(), t.end());
        const char* names[] = {"memcpy", "kernel", "kernel+pdl wait", "kernel+pdl wait+trigger"};
        printf("%10.1f MB per=%3d %-26s %9.2f us %7.1f GB/s\n", bytes / 1e6, per, names[mode + 1], t[t.size() / 2], 2 * bytes / (t[t.size() / 2] * 1e3));
      }
    }
    CK(cudaFree(in)); CK(cudaFree(out));
  }
}
