// SHA-256 (FIPS 180-4), for what must not be forgeable: the names and checksums of compiled kernel images on disk.
// A small own implementation rather than OpenSSL's so libjitune and the Python wheel need no libcrypto at build or
// run time; tests/host/sha256_test.cpp checks it against the FIPS 180-4 / NIST CAVP vectors.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace jitune {

/// Incremental SHA-256: update() any number of times, then digest() once.
class Sha256 {
 public:
  Sha256() noexcept;
  void update(const void* data, std::size_t size) noexcept;
  void update(std::string_view bytes) noexcept { update(bytes.data(), bytes.size()); }
  /// The 32-byte digest; the object must not be updated afterwards.
  std::array<std::uint8_t, 32> digest() noexcept;

 private:
  void block(const std::uint8_t* p) noexcept;
  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t total_ = 0;
};

/// Lowercase hex of the SHA-256 of `bytes` (64 digits).
std::string sha256_hex(std::string_view bytes);
/// Lowercase hex of any digest bytes.
std::string to_hex(const std::uint8_t* bytes, std::size_t size);

}  // namespace jitune
