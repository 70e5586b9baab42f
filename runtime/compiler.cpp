// NVRTC wrapper: embedded headers, include discovery, lowered names, ptxas resource reports.
#include "runtime/compiler.hpp"

#include <nvrtc.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>

#include <jitune/error.hpp>

#include "runtime/sha256.hpp"
#include "templates/sources.hpp"

#ifndef JITUNE_CUDA_INCLUDE_DEFAULT
#define JITUNE_CUDA_INCLUDE_DEFAULT "/usr/local/cuda/include"
#endif

namespace jitune {
namespace {

struct ProgramDeleter {
  void operator()(nvrtcProgram p) const noexcept { nvrtcDestroyProgram(&p); }
};
using ProgramHandle = std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, ProgramDeleter>;

void nvrtc_check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) throw Error(std::string(what) + " failed: " + nvrtcGetErrorString(r));
}

bool has_fp16_header(const std::string& dir) {
  std::error_code ec;
  return !dir.empty() && std::filesystem::exists(std::filesystem::path(dir) / "cuda_fp16.h", ec);
}

// One header's entry in a binary key: SHA-256 over its name and contents, each with its length (no two headers share
// one).
std::string header_digest(const SourceFile& f) {
  Sha256 h;
  for (const std::string* part : {&f.name, &f.contents}) {
    const std::uint64_t n = part->size();
    h.update(&n, sizeof n);
    h.update(*part);
  }
  const auto d = h.digest();
  return to_hex(d.data(), d.size());
}

}  // namespace

Compiler::Compiler(std::vector<SourceFile> headers) : Compiler() {
  own_headers_ = std::move(headers);
  index_headers(*own_headers_);
}

void Compiler::index_headers(const std::vector<SourceFile>& headers) {
  header_index_.clear();
  for (const SourceFile& f : headers) header_index_[f.name] = {header_digest(f), quoted_includes(f.contents)};
}

const std::vector<SourceFile>& Compiler::headers() const {
  return own_headers_ ? *own_headers_ : template_sources();
}

Compiler::Compiler() {
  try {
    index_headers(template_sources());
  } catch (const Error&) {
    // $JITUNE_TEMPLATE_DIR is unreadable: compile() says so; no key made here matches a binary built from templates
    // (every include reads as missing).
    header_index_.clear();
  }
  std::vector<std::pair<std::string, std::string>> tried;
  auto consider = [&](const char* origin, std::string dir) {
    if (!cuda_include_.empty() || dir.empty()) return;
    if (has_fp16_header(dir)) cuda_include_ = dir;
    else tried.emplace_back(origin, dir);
  };
  if (const char* v = std::getenv("JITUNE_CUDA_INCLUDE")) consider("JITUNE_CUDA_INCLUDE", v);
  if (const char* v = std::getenv("CUDA_HOME")) consider("CUDA_HOME", std::string(v) + "/include");
  if (const char* v = std::getenv("CUDA_PATH")) consider("CUDA_PATH", std::string(v) + "/include");
  consider("build-time toolkit", JITUNE_CUDA_INCLUDE_DEFAULT);
  consider("default", "/usr/local/cuda/include");
  if (cuda_include_.empty()) {
    std::string msg = "cannot find the CUDA headers NVRTC needs (cuda_fp16.h); tried:";
    for (auto& [origin, dir] : tried) msg += " " + dir + " (" + origin + ");";
    msg += " set JITUNE_CUDA_INCLUDE to the toolkit's include folder (e.g. /usr/local/cuda/include)";
    include_error_ = msg;
  }
  int major = 0, minor = 0;
  nvrtc_check(nvrtcVersion(&major, &minor), "nvrtcVersion");
  nvrtc_version_ = std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> Compiler::base_options(const std::string& arch) const {
  // sm_90 compiles for its arch-specific target sm_90a (wgmma, conv2d's mma 1): a cubin runs on its own
  // architecture only either way, and the other kernels' code is the same.
  return {"-arch=" + (arch == "sm_90" ? std::string("sm_90a") : arch), "-std=c++17", "-I" + cuda_include_,
          "-default-device"};
}

std::string Compiler::binary_key(const std::string& program, const std::string& name_expression,
                                 const std::string& arch) const {
  std::string material = program + '\0' + name_expression + '\0' + nvrtc_version_;
  for (const std::string& o : base_options(arch))
    if (o.rfind("-I", 0) != 0) material += '\0' + o;  // the include folder's location does not change the code
  // The headers the program reaches through #include "...", in name order, each with its digest: a change to a
  // template outside the closure leaves the binary's key (and the kept file) as it was.
  std::set<std::string> closure;
  std::vector<std::string> todo = quoted_includes(program);
  while (!todo.empty()) {
    std::string next = std::move(todo.back());
    todo.pop_back();
    if (!closure.insert(next).second) continue;
    if (auto it = header_index_.find(next); it != header_index_.end())
      todo.insert(todo.end(), it->second.includes.begin(), it->second.includes.end());
  }
  for (const std::string& name : closure) {
    const auto it = header_index_.find(name);
    material += '\0' + name + '\0' + (it == header_index_.end() ? std::string("missing") : it->second.digest);
  }
  return sha256_hex(material);  // a file name nobody can make two programs share
}

CompiledProgram Compiler::compile(const std::string& program, const std::vector<std::string>& name_expressions,
                                  const std::string& arch, bool resource_report) const {
  if (!include_error_.empty()) throw Error(include_error_);
  ++compile_count_;
  CompiledProgram out;
  const auto& sources = headers();
  std::vector<const char*> header_names, header_texts;
  for (const SourceFile& f : sources) {
    header_names.push_back(f.name.c_str());
    header_texts.push_back(f.contents.c_str());
  }
  nvrtcProgram raw = nullptr;
  nvrtc_check(nvrtcCreateProgram(&raw, program.c_str(), "jitune_program.cu", static_cast<int>(sources.size()),
                                 header_texts.data(), header_names.data()),
              "nvrtcCreateProgram");
  ProgramHandle prog(raw);
  for (const std::string& name : name_expressions)
    nvrtc_check(nvrtcAddNameExpression(raw, name.c_str()), "nvrtcAddNameExpression");

  std::vector<std::string> options = base_options(arch);
  if (resource_report) options.push_back("-Xptxas=-v");
  std::vector<const char*> option_ptrs;
  for (const std::string& o : options) {
    option_ptrs.push_back(o.c_str());
    out.options += (out.options.empty() ? "" : " ") + o;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const nvrtcResult result = nvrtcCompileProgram(raw, static_cast<int>(option_ptrs.size()), option_ptrs.data());
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::size_t log_size = 0;
  nvrtcGetProgramLogSize(raw, &log_size);
  out.log.resize(log_size);
  if (log_size > 0) nvrtcGetProgramLog(raw, out.log.data());
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  if (result != NVRTC_SUCCESS) {
    if (out.log.empty()) out.log = nvrtcGetErrorString(result);
    return out;
  }
  for (const std::string& name : name_expressions) {
    const char* lowered = nullptr;
    nvrtc_check(nvrtcGetLoweredName(raw, name.c_str(), &lowered), "nvrtcGetLoweredName");
    out.lowered.emplace_back(lowered);
    out.resources.push_back(resource_report ? parse_resources(out.log, lowered) : KernelResources{});
  }
  std::size_t size = 0;
  nvrtc_check(nvrtcGetCUBINSize(raw, &size), "nvrtcGetCUBINSize");
  out.cubin.resize(size);
  nvrtc_check(nvrtcGetCUBIN(raw, out.cubin.data()), "nvrtcGetCUBIN");
  out.ok = true;
  return out;
}

KernelResources parse_resources(const std::string& log, const std::string& lowered_name) {
  KernelResources r;
  std::istringstream lines(log);
  std::string line;
  bool inside = false;
  while (std::getline(lines, line)) {
    if (line.find("Compiling entry function") != std::string::npos ||
        line.find("Function properties for") != std::string::npos) {
      inside = line.find("'" + lowered_name + "'") != std::string::npos ||
               line.find("for " + lowered_name) != std::string::npos;
      continue;
    }
    if (!inside) continue;
    if (auto p = line.find("bytes stack frame"); p != std::string::npos) {
      std::size_t start = line.find_last_not_of("0123456789", p - 2);
      start = start == std::string::npos ? 0 : start + 1;
      std::sscanf(line.c_str() + start, "%d bytes stack frame, %d bytes spill stores, %d bytes spill loads",
                  &r.stack_bytes, &r.spill_store_bytes, &r.spill_load_bytes);
    } else if (auto u = line.find("Used "); u != std::string::npos) {
      std::sscanf(line.c_str() + u, "Used %d registers", &r.registers);
      inside = false;
    }
  }
  return r;
}

}  // namespace jitune
