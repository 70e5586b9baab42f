// Socket framing with deadlines (poll) for the worker protocol.
#include "tuner/wire.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>

namespace jitune::tuner::wire {
namespace {

using Clock = std::chrono::steady_clock;

bool write_all(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

ReadStatus read_all(int fd, char* data, std::size_t n, Clock::time_point deadline, bool has_deadline) {
  while (n > 0) {
    int wait_ms = -1;
    if (has_deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return ReadStatus::kTimeout;
      wait_ms = static_cast<int>(std::min<long long>(left, 1 << 30));
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return ReadStatus::kError;
    if (ready == 0) return ReadStatus::kTimeout;
    const ssize_t r = ::recv(fd, data, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return ReadStatus::kEof;
    if (r < 0) return errno == ECONNRESET ? ReadStatus::kEof : ReadStatus::kError;
    data += r;
    n -= static_cast<std::size_t>(r);
  }
  return ReadStatus::kOk;
}

}  // namespace

bool write_frame(int fd, const nlohmann::json& header, std::string_view blob) {
  const std::string text = header.dump();
  const auto hlen = static_cast<std::uint32_t>(text.size());
  const auto blen = static_cast<std::uint64_t>(blob.size());
  char prefix[12];
  std::memcpy(prefix, &hlen, 4);
  std::memcpy(prefix + 4, &blen, 8);
  return write_all(fd, prefix, 12) && write_all(fd, text.data(), text.size()) &&
         write_all(fd, blob.data(), blob.size());
}

ReadStatus read_frame(int fd, Frame& out, double timeout_s) {
  const bool has_deadline = timeout_s >= 0;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::max(timeout_s, 0.0)));
  char prefix[12];
  ReadStatus s = read_all(fd, prefix, 12, deadline, has_deadline);
  if (s != ReadStatus::kOk) return s;
  std::uint32_t hlen;
  std::uint64_t blen;
  std::memcpy(&hlen, prefix, 4);
  std::memcpy(&blen, prefix + 4, 8);
  if (hlen > (64u << 20) || blen > (std::uint64_t{4} << 30)) return ReadStatus::kError;
  std::string text(hlen, '\0');
  if ((s = read_all(fd, text.data(), hlen, deadline, has_deadline)) != ReadStatus::kOk) return s;
  out.blob.assign(blen, '\0');
  if ((s = read_all(fd, out.blob.data(), blen, deadline, has_deadline)) != ReadStatus::kOk) return s;
  out.header = nlohmann::json::parse(text, nullptr, false);
  return out.header.is_discarded() ? ReadStatus::kError : ReadStatus::kOk;
}

}  // namespace jitune::tuner::wire
