// The bad-input table: every row is one thing a user (or an attacker) can get wrong, through the CLI, the C++ API,
// import / export, files or the environment, with the exit code (or exception), the error kind and a piece of
// the message it must get. CLI rows run the built jitune with --json, so each error is parsed from the one JSON
// object it prints on stdout; nothing may crash, hang or go to stderr. docs/bad-input.md lists the same inputs.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include <jitune/jitune.hpp>

#include "cache/jsonl.hpp"
#include "cache/store.hpp"
#include "templates/config.hpp"
#include "templates/family.hpp"

namespace jitune {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  int code = 0;       ///< Exit code; for API rows 1 when it threw, 0 when it did not.
  std::string kind;   ///< The error kind ("usage", "invalid_argument", "store", ...), "" when none.
  std::string text;   ///< The message (or, for an import report, its issues).
  std::string raw;    ///< Everything printed, for failure messages.
};

// A folder of fixture files: a FIFO, a folder, a link, a file that is not SQLite, bad JSON Lines.
struct Fixture {
  fs::path dir = fs::temp_directory_path() / ("jitune_bad_input_" + std::to_string(std::random_device{}()));
  Fixture() {
    fs::create_directories(dir / "folder");
    REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
    std::ofstream(dir / "target.txt") << "precious\n";
    fs::create_symlink(dir / "target.txt", dir / "link.jsonl");
    std::ofstream(dir / "text.sqlite") << "not a database";
    std::ofstream(dir / "notjson.jsonl") << "{not json\n";
    std::ofstream(dir / "deep.jsonl") << std::string(100000, '[') << "\n";
    std::ofstream(dir / "scalar.jsonl") << "42\n";
    std::ofstream(dir / "empty.jsonl") << "";
  }
  ~Fixture() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string at(const std::string& name) const { return (dir / name).string(); }
};

Outcome run_cli(const std::string& env, const std::string& args) {
  const std::string cmd = env + " " + JITUNE_CLI_PATH + " --json " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  Outcome o;
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof buf, pipe)) o.raw.append(buf, n);
  const int status = pclose(pipe);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  try {
    const auto j = nlohmann::json::parse(o.raw);  // also fails when anything went to stderr
    if (j.is_object() && j.contains("error")) {
      o.kind = j["error"]["kind"];
      o.text = j["error"]["message"];
    } else if (j.is_object() && j.contains("issues")) {
      for (const auto& issue : j["issues"]) o.text += issue["message"].get<std::string>() + "\n";
    } else if (j.is_object() && j.contains("notes") && !j["notes"].empty()) {
      for (const auto& note : j["notes"]) o.text += note.get<std::string>() + "\n";
    } else {
      o.text = "(ok)";
    }
  } catch (const nlohmann::json::exception&) {
    o.kind = "NOT ONE JSON OBJECT";
  }
  return o;
}

Outcome run_api(const std::function<void()>& body) {
  Outcome o;
  try {
    body();
  } catch (const NoDevice& e) {
    o = {1, "no_device", e.what(), e.what()};
  } catch (const InvalidArgument& e) {
    o = {1, "invalid_argument", e.what(), e.what()};
  } catch (const StoreError& e) {
    o = {1, "store", e.what(), e.what()};
  } catch (const Error& e) {
    o = {1, "error", e.what(), e.what()};
  }
  return o;
}

struct Row {
  std::string input;                   ///< What was given (the CLI arguments, or what the API call does).
  std::function<Outcome()> run;
  int code;
  std::string kind;
  std::string text;
};

std::vector<Row> rows(const Fixture& f) {
  const std::string cache = "--cache " + f.at("user.sqlite") + " ";
  std::vector<Row> out;
  // Each row gets a user cache of the fixture's own, unless it names one or sets the environment that picks it.
  auto cli = [&](const std::string& args, int code, const std::string& kind, const std::string& text,
                 const std::string& env = "") {
    const bool own_cache = args.find("--cache ") != std::string::npos || env.find("JITUNE_CACHE_DIR") == 0;
    const std::string full = own_cache ? args : cache + args;
    out.push_back({env + " jitune " + full, [full, env] { return run_cli(env, full); }, code, kind, text});
  };
  auto api = [&](const std::string& what, std::function<void()> body, const std::string& kind,
                 const std::string& text) {
    out.push_back({what, [body] { return run_api(body); }, 1, kind, text});
  };
  const std::string ew = "tune elementwise --dry-run --dtype float32 --n 16 --expr ";
  const std::string up = "tune upsample_nearest2d --dry-run --dtype float32 --n 1 --c 1 --in_h 4 --in_w 4 ";
  const std::string pm = "tune permute --dry-run --dtype float32 ";

  // The command line.
  cli("", 2, "usage", "A subcommand is required");
  cli("frobnicate", 2, "usage", "unknown command 'frobnicate'; the commands are devices, tune");
  cli("tune", 2, "usage", "name a family");
  cli("tune nosuch", 1, "invalid_argument", "unknown family 'nosuch'; the families are elementwise");
  cli("explain nosuch", 1, "invalid_argument", "unknown family 'nosuch'");
  cli("cache show nosuch", 1, "invalid_argument", "unknown family 'nosuch'");
  cli("cache frob", 2, "usage", "unknown cache command 'frob'");
  cli("cache export", 2, "usage", "file is required");
  cli("cache import /nonexistent/x.jsonl", 2, "usage", "File does not exist");
  cli("--device -1 devices", 2, "usage", "'-1' is not a CUDA device ordinal");
  cli("--device abc devices", 2, "usage", "'abc' is not a CUDA device ordinal");
  cli("tune --suite weekly", 2, "usage", "weekly not in {default}");
  cli("tune --strategy sometimes --suite default", 2, "usage", "sometimes not in {exhaustive,random,guided}");
  cli("tune --suite default --family nosuch --dry-run", 1, "invalid_argument", "known families");
  cli("tune --suite default --strategy random --budget 0", 2, "usage", "'0' is not a candidate count");
  cli("tune --suite default --min-time-ms 0", 2, "usage", "--min-time-ms");
  cli("tune --suite default --dry-run --arch gfx90", 2, "usage", "expected sm_XY");
  cli("tune elementwise --expr 'z = x' --dtype float32 --n 10 --arch sm_90", 2, "usage", "--arch names the target");
  cli("tune elementwise --expr 'z = x' --dtype float32 --n 10 --budget 3", 2, "usage", "--budget is the random");
  cli("tune --family elementwise --dry-run elementwise --expr 'z = x' --dtype float32 --n 10", 2, "usage",
      "--family filters a suite");
  cli(ew + "'z = x' --no-store", 2, "usage", "--no-store has no effect with --dry-run");
  cli(ew + "'z = x' --l2 warm", 2, "usage", "--l2 has no effect with --dry-run");
  cli(ew + "'z = x' --in-process", 2, "usage", "--in-process has no effect with --dry-run");
  cli(ew + "'z = x' --configs 'block=256'", 2, "usage", "--configs has no effect with --dry-run");

  // Problem values.
  cli("tune elementwise --dry-run --expr 'z = x' --dtype fp8 --n 10", 1, "invalid_argument", "unknown dtype 'fp8'");
  cli("tune elementwise --dry-run --expr 'z = x' --dtype float32 --n -5", 1, "invalid_argument", "non-negative");
  cli("tune elementwise --dry-run --expr 'z = x' --dtype float32 --n abc", 1, "invalid_argument", "non-negative");
  cli("tune elementwise --dry-run --expr 'z = x' --dtype float32 --n 99999999999999999999999", 1,
      "invalid_argument", "non-negative");
  cli("tune elementwise --dry-run --dtype float32 --n 10", 1, "invalid_argument", "missing 'expr'");
  cli(ew + "'z = x; y'", 1, "invalid_argument", "unexpected ';'");
  cli(ew + "'z = '", 1, "invalid_argument", "the right-hand side is empty");
  cli(ew + "'z += x'", 1, "invalid_argument", "operator '+=' is not allowed");
  cli(ew + "'z = x +* 2'", 1, "invalid_argument", "expected a value");
  cli(ew + "'z = nope(x)'", 1, "compile", "identifier \"nope\" is undefined");
  cli(ew + "'z = a+b+c+d+e+f+g+h+i'", 1, "invalid_argument", "reads 9 inputs");
  cli(ew + "'z = float(x)'", 1, "invalid_argument", "'float' is a C++ keyword");
  cli(ew + "'int = x'", 1, "invalid_argument", "'int' is a C++ keyword");
  cli(ew + "'z = " + std::string(300, '(') + "x" + std::string(300, ')') + "'", 1, "invalid_argument",
      "nests more than 256 levels deep");
  cli(pm + "--shape 4x4 --perm 0,0", 1, "invalid_argument", "dim 0 appears twice");
  cli(pm + "--shape 4x4 --perm 0,1,2", 1, "invalid_argument", "3 entries for 2 dims");
  cli(pm + "--shape 4x-4 --perm 1,0", 1, "invalid_argument", "'-4' is not a non-negative integer");
  cli(pm + "--shape 1x2x3x4x5x6x7x8x9 --perm 0,1,2,3,4,5,6,7,8", 1, "invalid_argument", "at most 8");
  cli("tune permute --dry-run --dtype complex --shape 4x4 --perm 1,0", 1, "invalid_argument", "unknown dtype");
  cli(up + "--scale_h 1e308 --scale_w 2", 1, "invalid_argument", "over 1e308; it must be below 2^31");
  cli(up + "--scale_h 1e9 --scale_w 2", 1, "invalid_argument", "4e+09; it must be below 2^31");
  cli(up + "--scale_h -2 --scale_w 2", 1, "invalid_argument", "positive finite scale factor");
  cli(up + "--scale_h nan --scale_w 2", 1, "invalid_argument", "positive finite scale factor");
  cli(up + "--scale_h 0.1 --scale_w 2", 1, "invalid_argument", "PyTorch requires at least 1");
  cli(up, 1, "invalid_argument", "out_h and scale_h are both missing");
  cli(up + "--scale_h 2 --scale_w 2 --layout nhcw", 1, "invalid_argument", "layout 'nhcw' is not nchw or nhwc");
  cli(up + "--scale_h 2 --scale_w 2 --mode linear", 1, "invalid_argument", "mode 'linear'");
  cli("tune scatter_add --dry-run --op index_add --dtype float32 --index int16 --rows 10 --count 5", 1,
      "invalid_argument", "index dtype int16 is not supported");
  cli("tune scatter_add --dry-run --op gather --dtype float32 --n 10", 1, "invalid_argument", "op='gather'");
  cli("tune scatter_add --dry-run --op dot --dtype int32 --n 10", 1, "invalid_argument", "dtype int32");
  cli("tune conv2d --dry-run --dtype float32 --n 1 --c 3 --h 8 --w 8 --k 4 --r 9 --s 9", 1, "invalid_argument",
      "the filter spans 9 x 9");
  cli("tune conv2d --dry-run --dtype float32 --n 1 --c 0 --h 8 --w 8 --k 4 --r 3 --s 3", 1, "invalid_argument",
      "C = 0 must be >= 1");
  cli("tune reduce_rows --dry-run --dtype float32 --rows 10 --cols 10 --op min", 1, "invalid_argument",
      "op='min' is neither sum nor max");
  cli("explain --signature 'foo' elementwise", 1, "invalid_argument", "item 'foo' is not name=value");
  cli("explain --signature 'dtype=float32;n=5' elementwise", 1, "invalid_argument", "missing 'expr'");
  cli("explain --device-name 'Some GPU' --suite default", 1, "invalid_argument", "no tuned record for device");

  // Files: import and export.
  cli("cache import " + f.at("notjson.jsonl"), 1, "", "line 1: rejected: not valid JSON");
  cli("cache import " + f.at("deep.jsonl"), 1, "", "the limit is 65536");
  cli("cache import " + f.at("scalar.jsonl"), 1, "", "not a JSON object (got 42)");
  cli("cache import " + f.at("fifo"), 1, "store", "not a regular file");
  cli("cache import " + f.at("folder"), 2, "usage", "is actually a directory");
  cli("cache export " + f.at("fifo"), 1, "store", "not a regular file");
  cli("cache export " + f.at("folder"), 1, "store", "it is a folder");
  cli("cache export " + f.at("link.jsonl"), 1, "store", "pass --force");
  cli("--cache " + f.at("text.sqlite") + " cache export " + f.at("out.jsonl"), 1, "store",
      "not a readable SQLite database");
  cli("cache merge " + f.at("text.sqlite"), 1, "store", "not a readable SQLite database");
  cli("--cache " + f.at("folder") + " cache list", 1, "store", "is a folder, not a database file");
  cli("--cache /nonexistent/dir/c.sqlite cache export " + f.at("x.jsonl"), 1, "store", "does not exist");

  // The environment.
  cli("cache export " + f.at("y.jsonl"), 1, "store", "does not exist", "JITUNE_CACHE_DIR=" + f.at("text.sqlite"));
  if (device_count() == 0)  // explain from the caches: an unreadable shipped cache is a note, the others still serve
    cli("explain --device-name 'NVIDIA H100 80GB HBM3' permute --dtype float32 --shape 8192x8192 --perm 1,0", 0, "",
        "shipped cache skipped",
        "JITUNE_SHIPPED_CACHES=" + f.at("text.sqlite"));
  cli("cache paths", 0, "", "(ok)", "env -u HOME -u XDG_CACHE_HOME -u JITUNE_CACHE_DIR");

  // The C++ API.
  api("from_json_line of 160 KB of '['", [] { cache::from_json_line(std::string(160000, '[')); }, "invalid_argument",
      "the limit is 65536");
  api("a Store with an empty path", [] { cache::Store s("", cache::OpenMode::kReadOnly); }, "invalid_argument",
      "the path is empty");
  api("Config::parse(\"block=\")", [] { Config::parse("block="); }, "invalid_argument", "block");
  api("family(\"nosuch\")", [] { family("nosuch"); }, "invalid_argument", "nosuch");
  api("elementwise_signature of a bad expression", [] { elementwise_signature("z = x +", 10, DType::kFloat32); },
      "invalid_argument", "invalid elementwise expression");
  api("permute_signature with a repeated dim",
      [] {
        const std::int64_t shape[] = {4, 4};
        const int perm[] = {1, 1};
        permute_signature(shape, perm, DType::kFloat32);
      },
      "invalid_argument", "appears twice");
  api("a Runtime without a GPU", [] { Runtime rt; }, device_count() > 0 ? "" : "no_device",
      device_count() > 0 ? "" : "libcuda");
  return out;
}

TEST_CASE("the bad-input table: each input gets its exit code, error kind and a message that says what to do") {
  Fixture fixture;
  const std::vector<Row> table = rows(fixture);
  CHECK(table.size() >= 60);
  for (const Row& row : table) {
    if (row.kind.empty() && row.text.empty()) continue;  // a row that does not apply on this machine
    const Outcome o = row.run();
    INFO(row.input, "\n  got: ", o.code, " ", o.kind, "\n  ", o.raw.substr(0, 600));
    CHECK(o.code == row.code);
    CHECK(o.kind == row.kind);
    CHECK(o.text.find(row.text) != std::string::npos);
  }
  // Nothing a bad input did touched what was there.
  CHECK(fs::is_fifo(fs::symlink_status(fixture.dir / "fifo")));
  CHECK(fs::is_symlink(fixture.dir / "link.jsonl"));
  CHECK(fs::is_empty(fixture.dir / "folder"));
  std::ifstream target(fixture.dir / "target.txt");
  std::string line;
  std::getline(target, line);
  CHECK(line == "precious");
}

}  // namespace
}  // namespace jitune
