// The host check of an index buffer's values, for calls made with CallOptions::check_indices.
#pragma once

#include <string>

#include "runtime/driver.hpp"
#include "templates/family.hpp"

namespace jitune {

/// Synchronises `stream`, copies the index buffer to the host and scans it (on several threads when large);
/// throws InvalidArgument naming the first entry outside [0, spec.index_bound). int32 or int64 entries.
void check_indices_on_host(const std::string& op, const BufferSpec& spec, const void* index, CUstream stream);

}  // namespace jitune
