__global__ void k(float* o, const int* idx) {
  __shared__ float s[4096];
  for (int i = threadIdx.x; i < 4096; i += blockDim.x) s[i] = 0.f;
  __syncthreads();
  for (int r = 0; r < 256; ++r) atomicAdd(&s[idx[(threadIdx.x + r * 1024) & 65535] & 4095], 1.f);
  __syncthreads();
  o[blockIdx.x * 4096 + threadIdx.x] = s[threadIdx.x];
}
__global__ void ki(unsigned* o, const int* idx) {
  __shared__ unsigned s[4096];
  for (int i = threadIdx.x; i < 4096; i += blockDim.x) s[i] = 0;
  __syncthreads();
  for (int r = 0; r < 256; ++r) atomicAdd(&s[idx[(threadIdx.x + r * 1024) & 65535] & 4095], 1u);
  __syncthreads();
  o[blockIdx.x * 4096 + threadIdx.x] = s[threadIdx.x];
}
#include <cstdio>
#include <cstdlib>
int main() {
  float* o; int* idx; unsigned* oi;
  cudaMalloc(&o, 132 * 4 * 4096 * 4); cudaMalloc(&oi, 132 * 4 * 4096 * 4); cudaMalloc(&idx, 65536 * 4);
  int* h = (int*)malloc(65536 * 4); for (int i = 0; i < 65536; ++i) h[i] = rand();
  cudaMemcpy(idx, h, 65536 * 4, cudaMemcpyHostToDevice);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (int rep = 0; rep < 3; ++rep) {
    cudaEventRecord(a); k<<<132 * 2, 1024>>>(o, idx); cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b);
    cudaEventRecord(a); ki<<<132 * 2, 1024>>>(oi, idx); cudaEventRecord(b); cudaEventSynchronize(b);
    float ms2; cudaEventElapsedTime(&ms2, a, b);
    printf("f32 smem atomics: %.1f us (%.1f G/s); u32: %.1f us (%.1f G/s)\n", ms * 1e3, 264.0 * 1024 * 256 / ms / 1e6, ms2 * 1e3, 264.0 * 1024 * 256 / ms2 / 1e6);
  }
}
