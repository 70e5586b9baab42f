// CUDA graph capture: a warm op (its kernel decided and loaded) is captured in a global-mode capture, even with
// pointers it has not seen, and the graph replays it on fresh inputs; an op that would compile, load, tune on
// first use or read indices back to the host inside a capture is refused with an error that says to warm up
// first, and the capture stays valid (it ends, instantiates and replays what was captured before the refusal).
// Through the C++ ops and through the C ABI.
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <jitune/jitune.h>

#include <cmath>
#include <cstring>
#include <string>

#include <jitune/ops.hpp>

#include "c_runtime.hpp"
#include "gpu_util.hpp"
#include "runtime/runtime_impl.hpp"
#include "templates/conv2d/conv2d.hpp"

namespace jitune::test {
namespace {

#define JITUNE_TEST_STR2(x) #x
#define JITUNE_TEST_STR(x) JITUNE_TEST_STR2(x)  // expands cuda.h's versioning macros first

// The graph entry points, which the runtime itself never calls (it only asks whether a stream is capturing).
struct GraphApi {
  decltype(&::cuStreamBeginCapture) begin = nullptr;
  decltype(&::cuStreamEndCapture) end = nullptr;
  decltype(&::cuGraphInstantiateWithFlags) instantiate = nullptr;
  decltype(&::cuGraphLaunch) launch = nullptr;
  decltype(&::cuGraphExecDestroy) exec_destroy = nullptr;
  decltype(&::cuGraphDestroy) destroy = nullptr;

  GraphApi() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    REQUIRE(lib != nullptr);
    begin = reinterpret_cast<decltype(begin)>(dlsym(lib, JITUNE_TEST_STR(cuStreamBeginCapture)));
    end = reinterpret_cast<decltype(end)>(dlsym(lib, JITUNE_TEST_STR(cuStreamEndCapture)));
    instantiate = reinterpret_cast<decltype(instantiate)>(dlsym(lib, JITUNE_TEST_STR(cuGraphInstantiateWithFlags)));
    launch = reinterpret_cast<decltype(launch)>(dlsym(lib, JITUNE_TEST_STR(cuGraphLaunch)));
    exec_destroy = reinterpret_cast<decltype(exec_destroy)>(dlsym(lib, JITUNE_TEST_STR(cuGraphExecDestroy)));
    destroy = reinterpret_cast<decltype(destroy)>(dlsym(lib, JITUNE_TEST_STR(cuGraphDestroy)));
    REQUIRE((begin && end && instantiate && launch && exec_destroy && destroy));
  }
};

const GraphApi& graph_api() {
  static const GraphApi api;
  return api;
}

// One global-mode capture on `stream`: begun on construction; finish() ends it and must get a valid graph.
class Capture {
 public:
  explicit Capture(CUstream stream) : stream_(stream) {
    REQUIRE(graph_api().begin(stream, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  }
  ~Capture() {
    if (exec_) graph_api().exec_destroy(exec_);
    if (graph_) graph_api().destroy(graph_);
  }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  // Ends the capture; CUDA_ERROR_STREAM_CAPTURE_INVALIDATED here would mean jitune broke it.
  void finish() {
    const CUresult r = graph_api().end(stream_, &graph_);
    REQUIRE_MESSAGE(r == CUDA_SUCCESS, "the capture was invalidated: ", driver::error_text(r));
    REQUIRE(graph_api().instantiate(&exec_, graph_, 0) == CUDA_SUCCESS);
  }
  void replay() const {
    launch();
    JITUNE_CU_CHECK(cuStreamSynchronize(stream_));
  }
  void launch() const { REQUIRE(graph_api().launch(exec_, stream_) == CUDA_SUCCESS); }

 private:
  CUstream stream_;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

// float32 elements of `got` further than 1e-5 (relative, plus 1e-5 absolute) from `want`.
std::size_t wrong_floats(const std::vector<std::byte>& got, const std::vector<double>& want) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    float v;
    std::memcpy(&v, got.data() + i * 4, 4);
    bad += std::abs(v - want[i]) > 1e-5 * (1 + std::abs(want[i]));
  }
  return bad;
}

// n float32 inputs x, y and the expected x * y + 3.
struct MulAdd {
  std::int64_t n;
  Buffer x, y;
  explicit MulAdd(std::int64_t count) : n(count), x(count * 4), y(count * 4) {}
  std::vector<float> fill(std::uint64_t seed) const {
    const auto hx = random_values(DType::kFloat32, static_cast<std::size_t>(n), seed);
    const auto hy = random_values(DType::kFloat32, static_cast<std::size_t>(n), seed + 1);
    x.upload(hx, 0);
    y.upload(hy, 0);
    std::vector<float> want(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < want.size(); ++i) {
      float a, b;
      std::memcpy(&a, hx.data() + i * 4, 4);
      std::memcpy(&b, hy.data() + i * 4, 4);
      want[i] = a * b + 3.0f;
    }
    return want;
  }
  void check(const Buffer& out, const std::vector<float>& want, const char* what) const {
    const auto got = out.download(static_cast<std::size_t>(n) * 4, 0);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      float v;
      std::memcpy(&v, got.data() + i * 4, 4);
      bad += std::abs(v - want[i]) > 1e-5f * (1.0f + std::abs(want[i]));
    }
    CHECK_MESSAGE(bad == 0, what, ": ", bad, " of ", n, " outputs wrong");
  }
};

TEST_CASE("a warm op is captured and replays on fresh inputs; a cold one is refused and the capture survives") {
  TempDir dir;
  Runtime rt(isolated_options(dir));
  driver::StreamHandle stream;
  MulAdd w(4099);
  Buffer warm_out(4099 * 4), out(4099 * 4);
  w.fill(1);
  elementwise(rt, "z = x * y + 3", {w.x.at(0), w.y.at(0)}, warm_out.at(0), w.n, DType::kFloat32, stream.get());
  JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));

  MulAdd cold(12347);  // allocated before the capture: cuMemAlloc is not allowed inside one
  Buffer cold_out(12347 * 4);

  Capture capture(stream.get());
  // A warm op on an output it never saw: the pointer check runs inside the capture and must not break it.
  elementwise(rt, "z = x * y + 3", {w.x.at(0), w.y.at(0)}, out.at(0), w.n, DType::kFloat32, stream.get());
  try {
    elementwise(rt, "z = x * y - 7", {cold.x.at(0), cold.y.at(0)}, cold_out.at(0), cold.n, DType::kFloat32,
                stream.get());
    FAIL("a cold op inside a capture was not refused");
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    CHECK_MESSAGE(what.find("CUDA graph capture") != std::string::npos, what);
    CHECK_MESSAGE(what.find("warmed up") != std::string::npos, what);
    CHECK_MESSAGE(what.find("compile and load") != std::string::npos, what);
  }
  capture.finish();
  for (std::uint64_t round = 0; round < 3; ++round) {
    out.poison();
    const auto want = w.fill(100 + round * 2);
    capture.replay();
    w.check(out, want, "graph replay");
  }
  // After the capture the refused op runs normally (its call site kept no broken state).
  const auto want_cold = cold.fill(7);
  elementwise(rt, "z = x * y - 7", {cold.x.at(0), cold.y.at(0)}, cold_out.at(0), cold.n, DType::kFloat32,
              stream.get());
  JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
  std::vector<float> minus7(want_cold.size());
  for (std::size_t i = 0; i < minus7.size(); ++i) minus7[i] = want_cold[i] - 10.0f;
  cold.check(cold_out, minus7, "the refused op, run after the capture");
}

TEST_CASE("check_indices inside a capture is refused; a warm index_add without it is captured") {
  TempDir dir;
  Runtime rt(isolated_options(dir));
  driver::StreamHandle stream;
  const std::int64_t dst_rows = 50, rows = 17, len = 33;
  Buffer dst(dst_rows * len * 4), src(rows * len * 4), index(rows * 4);
  std::vector<std::byte> hidx(rows * 4);
  for (std::int64_t i = 0; i < rows; ++i) {
    const std::int32_t v = static_cast<std::int32_t>((i * 7) % dst_rows);
    std::memcpy(hidx.data() + i * 4, &v, 4);
  }
  index.upload(hidx, 0);
  const auto hsrc = random_values(DType::kFloat32, rows * len, 3);
  src.upload(hsrc, 0);
  auto run = [&](bool check) {
    ScatterAddOptions options;
    options.check_indices = check;
    index_add(rt, dst.at(0), dst_rows, index.at(0), rows, DType::kInt32, src.at(0), rows, len, DType::kFloat32,
              stream.get(), options);
  };
  JITUNE_CU_CHECK(cuMemsetD8(dst.mem.get(), 0, dst.bytes));
  JITUNE_CU_CHECK(cuCtxSynchronize());  // the legacy stream's memset, before the non-blocking stream's launch
  run(true);  // warm-up, with the check
  JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));

  Capture capture(stream.get());
  CHECK_THROWS_WITH_AS(run(true), doctest::Contains("check_indices"), InvalidArgument);
  run(false);
  capture.finish();
  JITUNE_CU_CHECK(cuMemsetD8(dst.mem.get(), 0, dst.bytes));
  JITUNE_CU_CHECK(cuCtxSynchronize());
  capture.replay();
  capture.replay();  // index_add accumulates: two replays add each source row twice
  const auto got = dst.download(dst_rows * len * 4, 0);
  std::vector<double> want(dst_rows * len, 0.0);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < len; ++j) {
      float v;
      std::memcpy(&v, hsrc.data() + (i * len + j) * 4, 4);
      want[((i * 7) % dst_rows) * len + j] += 2.0 * v;
    }
  const std::size_t bad = wrong_floats(got, want);
  CHECK_MESSAGE(bad == 0, bad, " destination elements wrong after two replays");
}

TEST_CASE("a conv2d of three launches (copy, GEMM, unstaging; programmatic) is captured and replays on fresh inputs") {
  TempDir dir;
  Runtime rt(isolated_options(dir));
  driver::StreamHandle stream;
  // float16 NCHW, 14 x 14 (P * Q = 196, not a multiple of 8: y staged), enough output tiles for the three-launch
  // default on sm_90 (conv2d's repack 3); bias and an epilogue, applied by the unstaging step.
  templates::conv2d::ConvProblem::Shape s;
  s.n = 32, s.c = 64, s.h = s.w = 14, s.k = 128, s.r = s.s = 3, s.pad_h = s.pad_w = 1, s.bias = true;
  s.epilogue = "y = max(acc, 0.0f)";
  const templates::conv2d::ConvProblem p(DType::kFloat16, s);
  const std::string config = rt.explain("conv2d", p.signature()).config;
  if (config.find("repack=3") == std::string::npos) {
    MESSAGE("skipped: the default here is not repack 3 (sm_90 only): ", config);
    return;
  }
  const Family& fam = templates::conv2d::conv2d_family();
  Conv2dParams params;
  params.input = {s.n, s.c, s.h, s.w};
  params.weight = {s.k, s.c, s.r, s.s};
  params.padding = {1, 1};
  params.epilogue = s.epilogue;
  Workload w = fam.workload(p, 31);
  std::vector<std::unique_ptr<Buffer>> in;
  for (const auto& host : w.inputs) in.push_back(std::make_unique<Buffer>(host.size()));
  Buffer out(w.output_bytes[0]);
  const OutputCheck check = fam.output_check(p, 0);
  const std::uint64_t count = w.output_bytes[0] / 2;
  auto run = [&] {
    conv2d(rt, in[0]->at(0), in[1]->at(0), in[2]->at(0), out.at(0), params, DType::kFloat16, stream.get());
  };
  // Fresh inputs of `seed` uploaded, y poisoned, `launch` run, y compared with the CPU reference.
  auto round = [&](std::uint64_t seed, const auto& launch, const char* what) {
    w = fam.workload(p, seed);
    for (std::size_t i = 0; i < in.size(); ++i) in[i]->upload(w.inputs[i], 0);
    out.poison();
    launch();
    JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
    const auto got = out.download(w.output_bytes[0], 0);
    const CompareResult r = compare_host(check, got.data(), fam.reference(p, w)[0].data(), count);
    CHECK_MESSAGE(r.ok(), what, ": ", r.describe(count, check));
  };
  round(31, run, "the warm-up call");
  Capture capture(stream.get());
  run();
  capture.finish();
  round(32, [&] { capture.launch(); }, "first replay");
  round(33, [&] { capture.launch(); }, "second replay");
}

TEST_CASE("a partitioned index_add (cooperative launch, stream-ordered workspace) is captured and replays") {
  TempDir dir;
  Runtime rt(isolated_options(dir));
  driver::StreamHandle stream;
  // A float32 destination larger than L2 with one source per element: the heuristic partitions it.
  const std::int64_t n = std::int64_t{1} << 24;
  const std::string sig = "count=" + std::to_string(n) + ";dtype=float32;index=int32;op=index_add;row_length=1;rows=" +
                          std::to_string(n);
  const Explanation x = rt.explain("scatter_add", sig);
  INFO(x.config);
  REQUIRE(x.config.find("partition=1") != std::string::npos);
  Buffer dst(n * 4), src(n * 4), index(n * 4);
  std::vector<std::int32_t> hidx(static_cast<std::size_t>(n));
  std::uint64_t state = 12345;
  for (auto& v : hidx) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<std::int32_t>((state >> 33) % static_cast<std::uint64_t>(n));
  }
  std::vector<std::byte> bidx(hidx.size() * 4);
  std::memcpy(bidx.data(), hidx.data(), bidx.size());
  index.upload(bidx, 0);
  const auto hsrc = random_values(DType::kFloat32, static_cast<std::size_t>(n), 5);
  src.upload(hsrc, 0);
  auto run = [&] {
    ScatterAddOptions options;
    options.check_indices = false;
    index_add(rt, dst.at(0), n, index.at(0), n, DType::kInt32, src.at(0), n, 1, DType::kFloat32, stream.get(),
              options);
  };
  JITUNE_CU_CHECK(cuMemsetD8(dst.mem.get(), 0, dst.bytes));
  JITUNE_CU_CHECK(cuCtxSynchronize());
  run();  // warm-up: compiles and loads the kernel
  JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
  Capture capture(stream.get());
  run();
  capture.finish();
  JITUNE_CU_CHECK(cuMemsetD8(dst.mem.get(), 0, dst.bytes));
  JITUNE_CU_CHECK(cuCtxSynchronize());
  capture.replay();
  capture.replay();  // two replays add every source twice; each replay's workspace header starts zeroed
  const auto got = dst.download(static_cast<std::size_t>(n) * 4, 0);
  std::vector<double> want(static_cast<std::size_t>(n), 0.0);
  for (std::int64_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, hsrc.data() + i * 4, 4);
    want[static_cast<std::size_t>(hidx[static_cast<std::size_t>(i)])] += 2.0 * v;
  }
  const std::size_t bad = wrong_floats(got, want);
  CHECK_MESSAGE(bad == 0, bad, " destination elements wrong after two replays");
}

TEST_CASE("through the C ABI: tuning on first use inside a capture is refused, a warm op is captured") {
  TempDir dir;
  // Declared first, so freed last: the runtime holds the primary context the stream and buffers below live in.
  const CRuntime owner(dir, {}, true);  // tunes on first use (3 candidates)
  jitune_runtime* crt = owner.get();
  driver::StreamHandle stream;
  MulAdd w(3001);
  Buffer out(3001 * 4);
  const void* inputs[] = {w.x.at(0), w.y.at(0)};
  w.fill(5);
  REQUIRE_MESSAGE(jitune_elementwise(crt, "z = x * y + 3", inputs, 2, out.at(0), w.n, JITUNE_FLOAT32,
                                     stream.get()) == JITUNE_OK,
                  jitune_last_error());  // warm-up: tunes and loads
  JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
  {
    Capture capture(stream.get());
    REQUIRE(jitune_elementwise(crt, "z = x * y + 3", inputs, 2, out.at(0), w.n, JITUNE_FLOAT32, stream.get()) ==
            JITUNE_OK);
    const jitune_status cold =
        jitune_elementwise(crt, "z = x * y * 2", inputs, 2, out.at(0), w.n, JITUNE_FLOAT32, stream.get());
    CHECK(cold == JITUNE_ERROR_INVALID_ARGUMENT);
    const std::string message = jitune_last_error();
    CHECK_MESSAGE(message.find("tune on first use") != std::string::npos, message);
    CHECK_MESSAGE(message.find("warmed up") != std::string::npos, message);
    capture.finish();
    out.poison();
    const auto want = w.fill(9);
    capture.replay();
    w.check(out, want, "C ABI graph replay");
  }
}

// dot's block counter lives in a workspace the runtime keeps for each stream (the kernel's last block leaves it
// zero, so no memset per call): dots in flight on three streams at once each end with their own exact sum, and
// a dot captured into a graph takes a stream-ordered workspace of its own, so its replays run beside direct calls.
struct DotJob {
  std::int64_t n;
  Buffer x, y, out;
  float want = 0.0f;
  DotJob(std::int64_t count, std::uint64_t seed) : n(count), x(count * 4), y(count * 4), out(4) {
    std::vector<std::byte> hx(static_cast<std::size_t>(n) * 4), hy(hx.size());
    std::uint64_t r = seed * 0x9e3779b97f4a7c15ull + 1;
    double sum = 0.0;
    for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      const float a = static_cast<float>(static_cast<int>((r >> 33) % 7) - 3);  // small integers: exact sums
      const float b = static_cast<float>(static_cast<int>((r >> 45) % 5) - 2);
      std::memcpy(hx.data() + i * 4, &a, 4);
      std::memcpy(hy.data() + i * 4, &b, 4);
      sum += static_cast<double>(a) * b;
    }
    x.upload(hx, 0);
    y.upload(hy, 0);
    want = static_cast<float>(sum);
  }
  void run(Runtime& rt, CUstream stream) { dot(rt, x.at(0), y.at(0), n, out.at(0), DType::kFloat32, stream); }
  float got() const {
    float v;
    const auto b = out.download(4, 0);
    std::memcpy(&v, b.data(), 4);
    return v;
  }
};

TEST_CASE("dot: a workspace kept per stream, streams at once, a captured dot replayed beside direct calls") {
  TempDir dir;
  Runtime rt(isolated_options(dir));
  driver::StreamHandle s1, s2;
  const CUstream streams[] = {s1.get(), s2.get(), nullptr};  // nullptr: the legacy default stream
  std::vector<std::unique_ptr<DotJob>> jobs;
  for (int i = 0; i < 12; ++i) jobs.push_back(std::make_unique<DotJob>(i % 2 ? 1000003 : 4099 + i, 10 + i));
  for (auto& j : jobs) j->run(rt, s1.get());  // decide and load each size outside the timed part
  JITUNE_CU_CHECK(cuCtxSynchronize());
  for (int round = 0; round < 3; ++round) {
    for (auto& j : jobs) j->out.poison();
    for (std::size_t i = 0; i < jobs.size(); ++i) jobs[i]->run(rt, streams[i % 3]);  // no wait in between
    JITUNE_CU_CHECK(cuCtxSynchronize());
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      INFO("round ", round, " job ", i, " n=", jobs[i]->n);
      CHECK(jobs[i]->got() == jobs[i]->want);
    }
  }
  CHECK(internal::impl(rt).scratches.size() == 3);  // one kept workspace per stream, reused every round

  Capture capture(s1.get());
  jobs[0]->run(rt, s1.get());
  capture.finish();
  CHECK(internal::impl(rt).scratches.size() == 3);  // the captured launch did not take a kept workspace
  for (int round = 0; round < 3; ++round) {
    for (auto& j : jobs) j->out.poison();
    capture.launch();  // jobs[0] on s1, while direct dots run on s2 and then s1
    for (std::size_t i = 1; i < jobs.size(); ++i) jobs[i]->run(rt, i % 2 ? s2.get() : s1.get());
    JITUNE_CU_CHECK(cuCtxSynchronize());
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      INFO("graph round ", round, " job ", i);
      CHECK(jobs[i]->got() == jobs[i]->want);
    }
  }
}

}  // namespace
}  // namespace jitune::test
