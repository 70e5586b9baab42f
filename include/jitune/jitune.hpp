// Umbrella header: everything a program that launches jitune kernels needs.
#pragma once

#include <jitune/device.hpp>
#include <jitune/error.hpp>
#include <jitune/ops.hpp>
#include <jitune/runtime.hpp>
#include <jitune/tensor.hpp>
