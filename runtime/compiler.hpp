// Compiler: NVRTC for the device's exact architecture, with the embedded templates as its header list and name
// expressions resolved to lowered names. Thread-safe; compiles nothing itself in parallel (the tuner's pool does).
#pragma once

#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "templates/sources.hpp"

namespace jitune {

/// Registers / stack / spills of one kernel, from ptxas's report (-1 when not reported).
struct KernelResources {
  int registers = -1;
  int stack_bytes = -1;
  int spill_store_bytes = -1;
  int spill_load_bytes = -1;
  bool spills() const noexcept { return spill_store_bytes > 0 || spill_load_bytes > 0; }
};

/// Outcome of one NVRTC program. A failed compile is a value carrying the log and options.
struct CompiledProgram {
  bool ok = false;
  std::string log;                        ///< NVRTC's full log (errors, or ptxas's report on success).
  std::string options;                    ///< Options used, space separated.
  std::vector<char> cubin;                ///< Device code for the exact architecture.
  std::vector<std::string> lowered;       ///< Lowered (mangled) name per name expression.
  std::vector<KernelResources> resources; ///< Per name expression.
  double seconds = 0;                     ///< Wall time of nvrtcCompileProgram.
};

/// NVRTC front end shared by the runtime and the tuner.
class Compiler {
 public:
  /// Looks for the CUDA include folder: $JITUNE_CUDA_INCLUDE, $CUDA_HOME/include, $CUDA_PATH/include, the build
  /// machine's toolkit, /usr/local/cuda/include. When none has cuda_fp16.h, compile() throws Error saying what was
  /// tried and how to set it (loading cached binaries still works).
  Compiler();
  /// The same with `headers` as NVRTC's header list instead of the templates (tests: a changed template).
  explicit Compiler(std::vector<SourceFile> headers);

  /// The include folder in use.
  const std::string& cuda_include() const noexcept { return cuda_include_; }
  /// "13.0".
  const std::string& nvrtc_version() const noexcept { return nvrtc_version_; }

  /// Compiles `program` for `arch` ("sm_90") instantiating every name expression. With `resource_report` ptxas's
  /// per-kernel register and spill report is parsed into CompiledProgram::resources.
  CompiledProgram compile(const std::string& program, const std::vector<std::string>& name_expressions,
                          const std::string& arch, bool resource_report) const;

  /// NVRTC programs compiled by this object so far (lets tests and benchmarks prove a path skipped NVRTC).
  std::size_t compile_count() const noexcept { return compile_count_.load(); }

  /// Key of the binary holding one instantiation: SHA-256 of program + name expression + code-affecting options +
  /// arch + NVRTC version + the name and contents of every header the program reaches through #include "..."
  /// (64 hex digits). The headers are in it because a program's text only includes them: a kernel binary kept on
  /// disk must not outlive a change to its template. Only its own include closure: a new or edited template of
  /// another family (or another conv2d algorithm's file) leaves the binaries kept on disk valid.
  std::string binary_key(const std::string& program, const std::string& name_expression,
                         const std::string& arch) const;

 private:
  std::vector<std::string> base_options(const std::string& arch) const;
  const std::vector<SourceFile>& headers() const;
  void index_headers(const std::vector<SourceFile>& headers);
  std::optional<std::vector<SourceFile>> own_headers_;  ///< Set by the second constructor; else template_sources().
  struct HeaderEntry {
    std::string digest;                 ///< SHA-256 of its name and contents.
    std::vector<std::string> includes;  ///< Its #include "..." names.
  };
  std::map<std::string, HeaderEntry, std::less<>> header_index_;  ///< By include name.
  std::string cuda_include_;
  std::string include_error_;
  mutable std::atomic<std::size_t> compile_count_{0};
  std::string nvrtc_version_;
};

/// Parses ptxas -v output: resources of each lowered name that appears in `log`.
KernelResources parse_resources(const std::string& log, const std::string& lowered_name);

}  // namespace jitune
