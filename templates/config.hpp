// Config: a kernel configuration, parameter name -> integer value, with a canonical text form.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace jitune {

/// Tunable parameter values. Canonical text: names sorted, "block=256,pack=4,unroll=2".
class Config {
 public:
  Config() = default;
  Config(std::initializer_list<std::pair<const std::string, std::int64_t>> values) : values_(values) {}

  /// Parses canonical (or unsorted, space-tolerant) text. Throws InvalidArgument on malformed text.
  static Config parse(std::string_view text);
  /// Canonical text form.
  std::string text() const;

  /// Value of `name`; throws InvalidArgument naming the missing parameter.
  std::int64_t at(std::string_view name) const;
  /// Value of `name` or nullopt.
  std::optional<std::int64_t> find(std::string_view name) const;
  void set(std::string name, std::int64_t value) { values_[std::move(name)] = value; }
  /// The stored value of `name` (set before), to be changed in place; valid until the parameter is erased or the
  /// Config destroyed. Throws InvalidArgument where `name` is missing.
  std::int64_t* slot(std::string_view name);
  const std::map<std::string, std::int64_t, std::less<>>& values() const noexcept { return values_; }
  bool empty() const noexcept { return values_.empty(); }

  friend bool operator==(const Config&, const Config&) = default;
  friend bool operator<(const Config& a, const Config& b) { return a.values_ < b.values_; }

 private:
  [[noreturn]] void throw_missing(std::string_view name) const;
  std::map<std::string, std::int64_t, std::less<>> values_;
};

}  // namespace jitune
