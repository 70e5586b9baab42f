// Framing between the tuner and its worker process over a Unix socket: u32 header length, u64 blob length, a JSON
// header, then an optional binary blob (a cubin). MSG_NOSIGNAL keeps a dead peer from killing the writer.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace jitune::tuner::wire {

/// One message.
struct Frame {
  nlohmann::json header;
  std::string blob;
};

enum class ReadStatus { kOk, kEof, kTimeout, kError };

/// Writes one frame; false when the peer is gone.
bool write_frame(int fd, const nlohmann::json& header, std::string_view blob = {});
/// Reads one frame, waiting at most `timeout_s` seconds (negative: forever).
ReadStatus read_frame(int fd, Frame& out, double timeout_s);

}  // namespace jitune::tuner::wire
