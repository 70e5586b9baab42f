#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "conv2d/conv2d.cuh"
template __global__ void jitune::conv::conv2d_igemm<__half, 64, 64, 3, 3, 1, 1, 1, 1, 128, 64, 32, 4, 2, 1, 0>(jitune::conv::Args<__half>);
