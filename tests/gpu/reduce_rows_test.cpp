// GPU tests of the reduce_rows family: every legal config on odd shapes through the tuner's verification path
// and launched directly with x at several offsets within a pack and rows of odd lengths (each row's scalar
// head and tail around its aligned packs), max's NaN in every position of a
// row and a slice, the public op with the heuristic for every dtype, op and odd shape, stored configs of each
// kernel (the workspace in stream order, the cluster, teams) through the public op on a stream, a misaligned x's
// alignment class decided and tuned on its own, empty calls and bad input.
#include <jitune/jitune.hpp>
#include <jitune/tuner.hpp>

#include <cmath>
#include <limits>
#include <set>

#include "gpu_util.hpp"
#include "templates/reduce_rows/reduce_rows.hpp"
#include "tuner/measure.hpp"
#include "tuner/tuner.hpp"

namespace jitune {
namespace {

using templates::reduce_rows::ReduceRowsProblem;
using test::Buffer;
using test::TempDir;

const Family& fam() {
  return templates::reduce_rows::reduce_rows_family();
}

constexpr std::int64_t kRows[] = {1, 3, 1000};
constexpr std::int64_t kCols[] = {1, 7, 4097, 65536};
constexpr DType kDtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMax};

// The i-th (dtype, op) of the six, so a loop over shapes covers them all.
std::pair<DType, ReduceOp> rotation(std::size_t i) {
  return {kDtypes[i % 3], kOps[(i / 3) % 2]};
}

// A problem with its random x and the CPU reference; x and y in device memory at element offsets, y poisoned.
struct Case {
  ReduceRowsProblem p;
  Workload w;
  std::vector<std::byte> expected;
  std::size_t es, x_off = 0, y_off = 0;
  Buffer x, y;

  Case(DType dtype, ReduceOp op, std::int64_t rows, std::int64_t cols, std::uint64_t seed,
       std::size_t x_offset = 0, std::size_t y_offset = 0)
      : p(dtype, op, rows, cols),
        w(fam().workload(p, seed)),
        es(dtype_size(dtype)),
        x_off(x_offset * es),
        y_off(y_offset * es),
        x(w.inputs[0].size()),
        y(static_cast<std::size_t>(rows) * es) {
    upload();
  }
  // Uploads x (again, after its values were edited), computes the reference and poisons y.
  void upload() {
    x.upload(w.inputs[0], x_off);
    expected = fam().reference(p, w)[0];
    y.poison();
  }
  const void* x_ptr() const { return x.at(x_off); }
  void* y_ptr() const { return y.at(y_off); }

  // y against the reference (the family's tolerance); the bytes around y still poisoned.
  void verify(const std::string& what) const {
    const auto got = y.download(expected.size(), y_off);
    const OutputCheck check = fam().output_check(p, 0);
    const auto rows = static_cast<std::uint64_t>(p.rows());
    const CompareResult r = compare_host(check, got.data(), expected.data(), rows);
    INFO(p.signature(), " x offset ", x_off, " y offset ", y_off, " bytes, ", what);
    CHECK_MESSAGE(r.ok(), r.describe(rows, check));
    for (std::byte b : y.download(y_off, 0)) REQUIRE(b == std::byte{0xFF});
    const std::size_t end = y_off + expected.size();
    for (std::byte b : y.download(y.bytes - end, end)) REQUIRE(b == std::byte{0xFF});
  }
};

// One launch of `tuned` as the dispatcher makes it, bypassing the decision: the variant the pointers allow
// (peel 1 for an x off the pack's alignment), a workspace whose partials are garbage and whose counters are
// zeroed once, then two launches on it (the kernel leaves its counters zeroed for the next one).
void launch_directly(Runtime& rt, Case& c, const Config& tuned) {
  const auto specs = fam().buffers(c.p);
  const void* pointers[] = {c.x_ptr(), c.y_ptr()};
  const std::uint8_t alignment[] = {alignment_class(pointers[0], specs[0].stride_alignment()),
                                    alignment_class(pointers[1], specs[1].stride_alignment())};
  Bindings b{pointers, alignment, nullptr, {}};
  const Config config = fam().variant_config(c.p, tuned, fam().variant(c.p, tuned, b), rt.device());
  Runtime::Impl& impl = internal::impl(rt);
  const Kernel& k = impl.kernel(fam(), c.p, config);
  driver::DeviceBuffer workspace(std::max<std::size_t>(k.prep.workspace_bytes, 4));
  JITUNE_CU_CHECK(cuMemsetD8(workspace.get(), 0x7F, workspace.bytes()));
  if (k.prep.zero_end > k.prep.zero_begin)
    JITUNE_CU_CHECK(cuMemsetD8(workspace.get() + k.prep.zero_begin, 0, k.prep.zero_end - k.prep.zero_begin));
  b.workspace = workspace.data();
  KernelArgs args;
  fam().kernel_args(c.p, config, b, args);
  for (int launch = 0; launch < 2; ++launch) {
    c.y.poison();
    impl.launch(k, args, nullptr);
    JITUNE_CU_CHECK(cuCtxSynchronize());
    c.verify("config " + tuned.text() + " run as " + config.text() + ", launch " +
             std::to_string(launch + 1));
  }
}

std::vector<Config> legal(const Problem& p, const DeviceInfo& device) {
  std::size_t pruned = 0;
  return tuner::legal_candidates(fam(), p, device, pruned);
}

// Stores `config` as the tuned record of the problem, so the public op uses it exactly.
void store_config(Runtime& rt, const ReduceRowsProblem& p, const Config& config) {
  cache::Record rec;
  rec.key = internal::impl(rt).record_key(fam(), p, config);
  rec.group = p.group();
  rec.features = p.features();
  rec.config = config.text();
  rec.time_us = 1;
  rec.reps = 1;
  rec.created_at = "2026-11-21T00:00:00Z";
  internal::impl(rt).user_store->put(rec);
  rt.reload();
  REQUIRE(rt.explain("reduce_rows", p.signature()).config == rec.config);
}

Config config(std::int64_t threads, std::int64_t pack, std::int64_t unroll, std::int64_t rows,
              std::int64_t split, std::int64_t cluster, std::int64_t peel = 0) {
  return Config{{"threads", threads}, {"pack", pack},   {"peel", peel},      {"unroll", unroll},
                {"rows", rows},       {"split", split}, {"cluster", cluster}};
}

}  // namespace

TEST_CASE("every legal config verifies on odd shapes (tuner verification path)") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  std::size_t i = 0;
  for (std::int64_t rows : kRows)
    for (std::int64_t cols : kCols) {
      const auto [dtype, op] = rotation(i++);
      const ReduceRowsProblem p(dtype, op, rows, cols);
      tuner::TuneOptions opt;
      opt.min_time_ms = 0.02;
      opt.min_reps = 1;
      opt.max_reps = 3;
      opt.retime_top = 1;
      opt.retime_reps = 2;
      opt.store = false;
      const tuner::TuneReport r = tuner::tune(rt, fam(), p, opt);
      INFO(p.signature());
      CHECK(r.candidates.size() == legal(p, rt.device()).size());
      for (const auto& c : r.candidates) {
        INFO(c.config.text(), " ", c.reason);
        CHECK((c.status == "ok" || c.status == "cut"));
      }
    }
}

TEST_CASE("every legal config reads x at any offset within a pack and rows of any length") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  // Rows of 16-byte multiples (only the pointer is off), rows of odd lengths (every row starts at another
  // offset within a pack; rows shorter than a pack), a single odd row, few long rows (split kernels).
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{3, 4096}, {1000, 256}, {1, 4097}, {8, 65536},
                                                          {13, 4097}, {300, 33},  {5, 7},    {7, 30001}};
  std::size_t i = 0;
  std::uint64_t seed = 100;
  for (const auto& [rows, cols] : shapes) {
    const auto [dtype, op] = rotation(i++);
    const std::size_t es = dtype_size(dtype);
    // One element off, three (12 or 6 bytes), then 8-byte aligned.
    for (std::size_t x_offset : {std::size_t{1}, std::size_t{3}, 8 / es}) {
      Case c(dtype, op, rows, cols, ++seed, x_offset, 1);
      for (const Config& config : legal(c.p, rt.device())) launch_directly(rt, c, config);
    }
  }
}

TEST_CASE("max gives NaN for a NaN anywhere in a row, in every legal config; infinities are values") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  struct Shape {
    DType dtype;
    std::int64_t rows, cols;
  };
  const Shape shapes[] = {{DType::kFloat32, 37, 4097},
                          {DType::kFloat16, 1000, 1024},
                          {DType::kBFloat16, 8, 65536},
                          {DType::kFloat32, 8, 65536},
                          {DType::kFloat16, 1, 1000}};
  std::uint64_t seed = 200;
  for (const Shape& s : shapes) {
    Case c(s.dtype, ReduceOp::kMax, s.rows, s.cols, ++seed);
    for (std::int64_t r = 0; r < s.rows; ++r) {
      const std::int64_t last = s.cols - 1;
      std::byte* row = c.w.inputs[0].data() + static_cast<std::size_t>(r * s.cols) * c.es;
      const auto set = [&](std::int64_t col, float v) {
        store_element(s.dtype, row, static_cast<std::uint64_t>(col), v);
      };
      switch (r % 6) {
        case 0:  // first element: first slice, first pack
          set(0, nan);
          break;
        case 1:  // last element: the tail, the last slice
          set(last, nan);
          break;
        case 2:  // the middle: an inner slice
          set(s.cols / 2 + 1, nan);
          break;
        case 3:  // +inf is the max
          set(s.cols / 3, inf);
          break;
        case 4:  // all -inf but one NaN
          for (std::int64_t col = 0; col < s.cols; ++col) set(col, -inf);
          set(s.cols * 3 / 4, nan);
          break;
        default:  // all -inf: the max is -inf
          for (std::int64_t col = 0; col < s.cols; ++col) set(col, -inf);
      }
    }
    c.upload();
    REQUIRE(std::isnan(load_element(s.dtype, c.expected.data(), 0)));
    for (const Config& config : legal(c.p, rt.device())) launch_directly(rt, c, config);
    // The sum of the same rows: NaN and infinities propagate (the heuristic through the public op).
    Case sum(s.dtype, ReduceOp::kSum, s.rows, s.cols, seed);
    sum.w = c.w;
    sum.upload();
    reduce_rows(rt, sum.x_ptr(), sum.y_ptr(), s.rows, s.cols, ReduceOp::kSum, s.dtype);
    JITUNE_CU_CHECK(cuCtxSynchronize());
    sum.verify("public op, sum over NaN and infinities");
  }
}

TEST_CASE(
    "the public op with the heuristic: every dtype, op and odd shape, pointers aligned and one element off") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  std::uint64_t seed = 300;
  for (DType dtype : kDtypes)
    for (ReduceOp op : kOps)
      for (std::int64_t rows : kRows)
        for (std::int64_t cols : kCols)
          for (std::size_t offset : {0, 1}) {
            Case c(dtype, op, rows, cols, ++seed, offset, offset);
            reduce_rows(rt, c.x_ptr(), c.y_ptr(), rows, cols, op, dtype);
            JITUNE_CU_CHECK(cuCtxSynchronize());
            c.verify("heuristic " + rt.explain("reduce_rows", c.p.signature()).config);
          }
}

TEST_CASE("stored configs of every kernel through the public op: workspace in stream order, cluster, teams") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  struct Stored {
    DType dtype;
    ReduceOp op;
    std::int64_t rows, cols;
    Config config;
  };
  std::vector<Stored> cases = {
      {DType::kFloat32, ReduceOp::kSum, 8, 65536, config(256, 4, 4, 1, 16, 0)},   // workspace split
      {DType::kBFloat16, ReduceOp::kMax, 5, 30000, config(128, 8, 1, 1, 32, 0)},  // workspace, 32 slices
      {DType::kFloat16, ReduceOp::kSum, 1, 65537, config(1024, 8, 4, 1, 4, 0)},   // one row with a tail
      {DType::kFloat32, ReduceOp::kMax, 1000, 4097, config(512, 4, 2, 1, 1, 0, 1)},  // a block a row, odd rows
      {DType::kFloat16, ReduceOp::kSum, 3000, 33, config(4, 8, 2, 2, 1, 0, 1)},      // teams over odd rows
      {DType::kFloat16, ReduceOp::kMax, 100000, 32, config(4, 8, 1, 4, 1, 0)},    // teams of 4, 4 rows each
      {DType::kFloat32, ReduceOp::kSum, 4099, 1024, config(32, 4, 8, 1, 1, 0)},   // a warp a row
  };
  if (rt.device().cc() >= 90) {
    cases.push_back(
        {DType::kFloat32, ReduceOp::kSum, 8, 65536, config(512, 4, 4, 1, 8, 1)});  // clusters of 8
    cases.push_back(
        {DType::kBFloat16, ReduceOp::kMax, 3, 4097, config(256, 8, 2, 1, 2, 1, 1)});  // clusters of 2, odd rows
  }
  driver::StreamHandle stream;
  const auto s = reinterpret_cast<Stream>(stream.get());
  std::uint64_t seed = 400;
  for (const Stored& k : cases) {
    const ReduceRowsProblem p(k.dtype, k.op, k.rows, k.cols);
    REQUIRE(fam().validate(p, k.config, rt.device()).empty());
    store_config(rt, p, k.config);
    for (std::size_t offset : {0, 1}) {
      Case c(k.dtype, k.op, k.rows, k.cols, ++seed, offset, offset);
      std::vector<std::byte> first;
      for (int call = 0; call < 3; ++call) {  // a fresh workspace each call; the same bits each time
        c.y.poison();
        reduce_rows(rt, c.x_ptr(), c.y_ptr(), k.rows, k.cols, k.op, k.dtype, s);
        JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
        c.verify("stored " + k.config.text() + ", call " + std::to_string(call + 1));
        const auto got = c.y.download(c.expected.size(), c.y_off);
        if (call == 0) first = got;
        CHECK(got == first);
      }
    }
  }
}

TEST_CASE("an x off 16 bytes whose rows share the offset is decided for its class; the tuner places x there") {
  TempDir dir;
  RuntimeOptions o = test::isolated_options(dir);
  o.tuning = tuner::tune_on_first_use({6, 0.2});
  Runtime rt(o);
  const std::string plain = "cols=2048;dtype=float16;op=sum;rows=300";
  const std::string x_off = "align=2;" + plain;
  const std::string odd = "cols=2047;dtype=float16;op=sum;rows=300";
  auto stored = [&] { return test::stored_signatures(dir, "reduce_rows"); };
  auto call = [&](Runtime& r, std::int64_t cols, std::size_t x_offset, std::uint64_t seed) {
    Case c(DType::kFloat16, ReduceOp::kSum, 300, cols, seed, x_offset, 0);
    reduce_rows(r, c.x_ptr(), c.y_ptr(), c.p.rows(), c.p.cols(), c.p.op(), c.p.dtype());
    JITUNE_CU_CHECK(cuCtxSynchronize());
    c.verify("public op, x " + std::to_string(x_offset) + " elements off");
  };
  call(rt, 2048, 0, 1);  // aligned: the plain problem only
  CHECK(stored() == std::set<std::string>{plain});
  call(rt, 2048, 1, 2);  // one element off: its class, tuned on x placed 2 bytes off and stored apart
  CHECK(stored() == std::set<std::string>{plain, x_off});
  call(rt, 2048, 3, 3);  // three off is the same class: nothing new
  CHECK(stored() == std::set<std::string>{plain, x_off});
  call(rt, 2048, 4, 4);  // four off (8 bytes) is another class
  CHECK(stored() == std::set<std::string>{plain, x_off, "align=8;" + plain});
  // Rows of 4094 bytes start everywhere whatever x's offset: one problem, tuned with peel 1, serves both.
  call(rt, 2047, 0, 5);
  call(rt, 2047, 1, 6);
  CHECK(stored().count(odd) == 1);
  CHECK(stored().size() == 4);
  // Every candidate the tuner timed for the class read x where the class puts it: its stored config peels.
  Runtime plain_rt(test::isolated_options(dir));
  const Explanation e = plain_rt.explain("reduce_rows", x_off);
  CHECK(e.level == MatchLevel::kExact);
  CHECK(Config::parse(e.config).at("peel") == 1);
  call(plain_rt, 2048, 1, 7);
  // The tuner's workload puts x at the class's offset.
  const auto p = fam().parse_problem(x_off);
  const Workload w = fam().workload(*p, 5);
  tuner::DeviceWorkload dw(fam(), *p, w, fam().reference(*p, w));
  const Bindings b = dw.bindings({});
  CHECK(reinterpret_cast<std::uintptr_t>(b.pointers[0]) % 16 == 2);
  CHECK(b.alignment[0] == 2);
}

TEST_CASE("empty calls: no rows launch nothing, a sum over no columns is zero, a max over none is refused") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  Buffer x(256), y(64);
  y.poison();
  reduce_rows(rt, nullptr, nullptr, 0, 100, ReduceOp::kSum, DType::kFloat32);
  reduce_rows(rt, x.at(0), y.at(0), 0, 100, ReduceOp::kMax, DType::kFloat16);
  JITUNE_CU_CHECK(cuCtxSynchronize());
  for (std::byte b : y.download(y.bytes, 0)) CHECK(b == std::byte{0xFF});
  for (DType dtype : kDtypes) {
    y.poison();
    reduce_rows(rt, nullptr, y.at(0), 5, 0, ReduceOp::kSum, dtype);  // x is never read
    JITUNE_CU_CHECK(cuCtxSynchronize());
    const std::size_t bytes = 5 * dtype_size(dtype);
    for (std::byte b : y.download(bytes, 0)) CHECK(b == std::byte{0});
    for (std::byte b : y.download(y.bytes - bytes, bytes)) CHECK(b == std::byte{0xFF});
  }
  CHECK_THROWS_WITH_AS(reduce_rows(rt, x.at(0), y.at(0), 5, 0, ReduceOp::kMax, DType::kFloat32),
                       doctest::Contains("max over rows of 0 elements"), InvalidArgument);
}

TEST_CASE("bad input is a clear error before any launch") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  Buffer x(64 * 64 * 4), y(64 * 4);
  const auto run = [&](const void* xp, void* yp, std::int64_t rows, std::int64_t cols, ReduceOp op,
                       DType dtype) {
    reduce_rows(rt, xp, yp, rows, cols, op, dtype);
    JITUNE_CU_CHECK(cuCtxSynchronize());
  };
  const ReduceOp sum = ReduceOp::kSum;
  CHECK_THROWS_WITH_AS(run(nullptr, y.at(0), 64, 64, sum, DType::kFloat32),
                       doctest::Contains("x pointer is null"), InvalidArgument);
  CHECK_THROWS_WITH_AS(run(x.at(0), nullptr, 64, 64, sum, DType::kFloat32),
                       doctest::Contains("y pointer is null"), InvalidArgument);
  CHECK_THROWS_WITH_AS(run(x.at(2), y.at(0), 64, 64, sum, DType::kFloat32),
                       doctest::Contains("x pointer is not aligned"), InvalidArgument);
  std::vector<float> host(64 * 64);
  CHECK_THROWS_WITH_AS(run(host.data(), y.at(0), 64, 64, sum, DType::kFloat32),
                       doctest::Contains("not device memory"), InvalidArgument);
  CHECK_THROWS_WITH_AS(run(x.at(0), host.data(), 64, 64, sum, DType::kFloat32),
                       doctest::Contains("not device memory"), InvalidArgument);
  // More rows or columns than the allocations hold. x and y in one allocation (y first, x after it; then x
  // first, y at its end), so neither range reaches the other and the allocation's end is what is wrong.
  Buffer one(64 * 64 * 4 + 1024);
  CHECK_THROWS_WITH_AS(run(one.at(1024), one.at(0), 64, 4096, sum, DType::kFloat32),
                       doctest::Contains("reduce_rows x"), InvalidArgument);
  CHECK_THROWS_WITH_AS(run(one.at(0), one.at(64 * 64 * 4), 1024, 4, sum, DType::kFloat32),
                       doctest::Contains("reduce_rows y"), InvalidArgument);
  CHECK_THROWS_WITH_AS(run(one.at(0), one.at(64 * 64 * 4), 1024, 4, sum, DType::kFloat32),
                       doctest::Contains("check the element count"), InvalidArgument);
  CHECK_NOTHROW(run(one.at(0), one.at(64 * 64 * 4), 64, 64, sum, DType::kFloat32));  // what fits runs
  CHECK_THROWS_WITH_AS(run(x.at(0), x.at(64), 64, 64, sum, DType::kFloat32), doctest::Contains("overlaps"),
                       InvalidArgument);
  CHECK_THROWS_AS(run(x.at(0), y.at(0), -1, 64, sum, DType::kFloat32), InvalidArgument);
  CHECK_THROWS_AS(run(x.at(0), y.at(0), 64, 64, sum, DType::kInt32), InvalidArgument);
  CHECK_THROWS_AS(run(x.at(0), y.at(0), 64, 64, static_cast<ReduceOp>(7), DType::kFloat32), InvalidArgument);
  // The runtime still works.
  Case c(DType::kFloat32, ReduceOp::kSum, 64, 64, 9);
  reduce_rows(rt, c.x_ptr(), c.y_ptr(), 64, 64, ReduceOp::kSum, DType::kFloat32);
  JITUNE_CU_CHECK(cuCtxSynchronize());
  c.verify("after the errors");
}

}  // namespace jitune
