// SHA-256 against the FIPS 180-4 examples and NIST CAVP short/long messages, one-shot and fed in pieces.
#include <doctest/doctest.h>

#include <random>
#include <string>

#include "runtime/sha256.hpp"

namespace jitune {

TEST_CASE("SHA-256 of the FIPS 180-4 example messages") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256_hex(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // 55, 56 and 64 bytes: the padding's edge cases (length fits / does not fit in the last block).
  CHECK(sha256_hex(std::string(55, 'a')) == "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  CHECK(sha256_hex(std::string(56, 'a')) == "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  CHECK(sha256_hex(std::string(64, 'a')) == "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST_CASE("SHA-256 fed in random pieces equals the one-shot digest") {
  std::mt19937 rng(7);
  std::string message(5000, '\0');
  for (char& c : message) c = static_cast<char>(rng());
  const std::string whole = sha256_hex(message);
  for (int round = 0; round < 20; ++round) {
    Sha256 h;
    std::size_t at = 0;
    while (at < message.size()) {
      const std::size_t n = std::min<std::size_t>(rng() % 130, message.size() - at);
      h.update(message.data() + at, n);
      at += n;
    }
    const auto d = h.digest();
    CHECK(to_hex(d.data(), d.size()) == whole);
  }
  message[4999] ^= 1;
  CHECK(sha256_hex(message) != whole);
}

}  // namespace jitune
