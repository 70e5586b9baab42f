// libFuzzer target: cache import, end to end. Arbitrary bytes as a JSON Lines file go through line parsing, shape
// checks, the registry validator and the import transaction; then the store is exported and every exported line
// must parse back to a record of the store (what jitune writes, jitune reads). Anything but a clean report or a
// jitune::Error is a bug.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>

#include "cache/jsonl.hpp"
#include "cache/store.hpp"
#include "templates/family.hpp"

namespace {

const std::filesystem::path& dir() {
  static const std::filesystem::path d = [] {
    auto p = std::filesystem::temp_directory_path() / ("jitune_fuzz_import_" + std::to_string(::getpid()));
    std::filesystem::create_directories(p);
    return p;
  }();
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static jitune::cache::Store store(dir() / "fuzz.sqlite", jitune::cache::OpenMode::kReadWrite);
  const std::string text(reinterpret_cast<const char*>(data), size);
  // Line parser alone, every line.
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    try {
      auto r = jitune::cache::from_json_line(text.substr(start, end - start));
      (void)jitune::cache::check_record_shape(r);
      (void)jitune::check_tuned_config(r.key.family, r.key.signature, r.config);
      (void)jitune::cache::to_json_line(r);
    } catch (const jitune::Error&) {
    }
    start = end + 1;
  }
  // The whole import path through a file.
  const auto file = dir() / "in.jsonl";
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(text.data(), static_cast<std::streamsize>(text.size()));
  try {
    auto report = store.import_jsonl(file, [](const jitune::cache::Record& r) {
      return jitune::check_tuned_config(r.key.family, r.key.signature, r.config);
    });
    if (report.added + report.replaced + report.kept + report.rejected > text.size() + 1) __builtin_trap();
  } catch (const jitune::Error&) {
  }
  // Export what the store holds now and read it back.
  const auto out = dir() / "out.jsonl";
  store.export_jsonl(out);
  const auto back = jitune::cache::read_jsonl(out);
  if (!back.rejected.empty() || back.records.size() != store.records().size()) __builtin_trap();
  return 0;
}
