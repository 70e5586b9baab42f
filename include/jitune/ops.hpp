// The operations jitune provides. Each picks the tuned kernel for this device and problem (or the nearest tuned
// one, or a heuristic default), compiles it once, and launches it asynchronously on `stream`. Pointers are device
// pointers from cudaMalloc, PyTorch, CuPy, ... on the runtime's device. One header per family under ops/.
#pragma once

#include <jitune/ops/conv2d.hpp>
#include <jitune/ops/elementwise.hpp>
#include <jitune/ops/scatter_add.hpp>
#include <jitune/ops/permute.hpp>
#include <jitune/ops/reduce_rows.hpp>
#include <jitune/ops/upsample_nearest2d.hpp>
