// GPU tests of jitune::elementwise_view (issue 21): every layout class and dtype against the CPU reference, on
// random inputs, misaligned first elements, outputs whose gaps must stay as they were, the fused chains,
// tuning a view problem, and the errors for bad views.
#include <jitune/jitune.hpp>

#include <algorithm>
#include <numeric>
#include <random>

#include "gpu_util.hpp"
#include "runtime/runtime_impl.hpp"
#include "templates/elementwise/expression.hpp"
#include "templates/elementwise/views.hpp"
#include "tuner/tuner.hpp"

namespace jitune {
namespace {

using templates::elementwise::LayoutClass;
using templates::elementwise::View;
using test::Buffer;
using test::TempDir;
using Dims = std::vector<std::int64_t>;

struct Operand {
  Dims shape, strides;
  std::size_t offset = 0;  // elements between the buffer's start and the view's first element (misalignment)
};

Dims dense(const Dims& shape) { return templates::elementwise::dense_strides(shape); }

// Runs `expr` over the views and checks every element of the output buffer against the family's reference: the
// view's elements computed, every other element (and the bytes around) as they were. Returns the layout class.
LayoutClass check_views(Runtime& rt, const std::string& expr, DType dtype, const std::vector<Operand>& inputs,
                        const Operand& output, std::uint64_t seed) {
  const Family& f = family("elementwise_view");
  std::vector<View> views;
  for (const Operand& o : inputs) views.push_back({o.shape, o.strides});
  const auto plan = templates::elementwise::plan_views(views, View{output.shape, output.strides});
  std::string sig_strides;
  for (std::size_t i = 0; i < plan.strides.size(); ++i) {
    sig_strides += i ? "|" : "";
    for (std::size_t d = 0; d < plan.strides[i].size(); ++d)
      sig_strides += (d ? "," : "") + std::to_string(plan.strides[i][d]);
  }
  std::string sig_shape;
  for (std::size_t d = 0; d < plan.shape.size(); ++d) sig_shape += (d ? "," : "") + std::to_string(plan.shape[d]);
  const auto problem = f.make_problem({{"expr", expr}, {"dtype", std::string(dtype_name(dtype))},
                                       {"shape", sig_shape}, {"strides", sig_strides}});
  const Workload w = f.workload(*problem, seed);
  const auto expected = f.reference(*problem, w)[0];
  const std::size_t es = dtype_size(dtype);

  std::vector<std::unique_ptr<Buffer>> in_buffers;
  std::vector<ViewOperand> in_ops;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    in_buffers.push_back(std::make_unique<Buffer>(w.inputs[i].size() + inputs[i].offset * es + 64));
    in_buffers.back()->upload(w.inputs[i], inputs[i].offset * es);
    in_ops.push_back({in_buffers.back()->at(inputs[i].offset * es), inputs[i].shape, inputs[i].strides});
  }
  const std::size_t out_bytes = w.output_bytes[0];
  Buffer out(out_bytes + output.offset * es + 64);
  out.poison();
  if (!w.initial_outputs.empty()) out.upload(w.initial_outputs[0], output.offset * es);
  elementwise_view(rt, expr, in_ops, ViewOperand{out.at(output.offset * es), output.shape, output.strides}, dtype);
  JITUNE_CU_CHECK(cuCtxSynchronize());
  const auto got = out.download(out_bytes, output.offset * es);
  const OutputCheck check = f.output_check(*problem, 0);
  const std::uint64_t count = out_bytes / es;
  const CompareResult r = compare_host(check, got.data(), expected.data(), count);
  INFO(expr, " ", dtype_name(dtype), " ", problem->signature());
  CHECK_MESSAGE(r.ok(), r.describe(count, check));
  for (std::byte b : out.download(output.offset * es, 0)) REQUIRE(b == std::byte{0xFF});  // before the view
  for (std::byte b : out.download(64, output.offset * es + out_bytes)) REQUIRE(b == std::byte{0xFF});  // after
  return plan.layout;
}

}  // namespace

TEST_CASE("elementwise_view matches the CPU reference for every layout class and dtype") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  std::uint64_t seed = 11;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (std::size_t off : {std::size_t{0}, std::size_t{1}}) {
      INFO("dtype ", dtype_name(dtype), ", first elements ", off, " element(s) into their buffers");
      // bias row over (1000, 333): rows
      CHECK(check_views(rt, "y = x + b", dtype, {{{1000, 333}, dense({1000, 333}), off}, {{333}, {1}, off}},
                        {{1000, 333}, dense({1000, 333}), off}, ++seed) == LayoutClass::kRows);
      // a[:, 1:] * b with a of (257, 130): rows whose starts are not all aligned
      CHECK(check_views(rt, "y = a * b", dtype, {{{257, 129}, {130, 1}, 1 + off}, {{257, 129}, dense({257, 129}), off}},
                        {{257, 129}, dense({257, 129}), off}, ++seed) == LayoutClass::kRows);
      // x * column: broadcast_column
      CHECK(check_views(rt, "y = x * c", dtype, {{{300, 1001}, dense({300, 1001}), off}, {{300, 1}, {1, 1}, off}},
                        {{300, 1001}, dense({300, 1001}), off}, ++seed) == LayoutClass::kBroadcastColumn);
      // x.permute(0, 2, 1) * s + b: inner_transpose (the gather kernel until the transpose-in-load one lands)
      CHECK(check_views(rt, "y = x * s + b", dtype,
                        {{{8, 300, 200}, {60000, 1, 300}, off}, {{}, {}, off}, {{200}, {1}, off}},
                        {{8, 300, 200}, dense({8, 300, 200}), off}, ++seed) == LayoutClass::kInnerTranspose);
      // every other element of the output: general, the gaps keep their values
      CHECK(check_views(rt, "y = x * 2", dtype, {{{100003}, {1}, off}}, {{100003}, {2}, off}, ++seed) ==
            LayoutClass::kGeneral);
      // a 4-d broadcast of three inputs
      CHECK(check_views(rt, "y = a * b + c", dtype,
                        {{{2, 1, 5, 7}, dense({2, 1, 5, 7}), off}, {{3, 1, 1}, {1, 1, 1}, off}, {{7}, {1}, off}},
                        {{2, 3, 5, 7}, dense({2, 3, 5, 7}), off}, ++seed) != LayoutClass::kContiguous);
    }
}

TEST_CASE("elementwise_view: random views of every class against the CPU reference") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  std::mt19937 rng(42);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int seen[5] = {};
  for (int round = 0; round < 60; ++round) {
    Dims shape;
    for (int d = pick(1, 4); d > 0; --d) shape.push_back(pick(1, 40));
    auto view_of = [&](bool broadcast) {
      Operand o{shape, {}, static_cast<std::size_t>(pick(0, 3))};
      std::vector<std::size_t> perm(shape.size());
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      Dims base(shape.size());
      for (std::size_t i = 0; i < shape.size(); ++i) base[i] = shape[perm[i]] + pick(0, 1);
      const Dims st = dense(base);
      o.strides.resize(shape.size());
      for (std::size_t i = 0; i < shape.size(); ++i) o.strides[perm[i]] = st[i];
      if (broadcast)
        for (std::size_t d = 0; d < shape.size(); ++d)
          if (pick(0, 3) == 0) o.shape[d] = 1;
      return o;
    };
    const Operand out = view_of(false);
    std::vector<Operand> in = {view_of(true), view_of(true)};
    ++seen[static_cast<int>(check_views(rt, "z = x * y - 0.5f", DType::kFloat32, in, out, 1000 + round))];
  }
  MESSAGE("classes: contiguous ", seen[0], ", rows ", seen[1], ", broadcast_column ", seen[2], ", inner_transpose ",
          seen[3], ", general ", seen[4]);
}

TEST_CASE("elementwise_view: scalar inputs passed by value, several values with one kernel") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const Family& f = family("elementwise_view");
  const auto p = f.parse_problem("dtype=float16;expr=y = x * s + b;layout=rows;scalars=2;shape=999,333;"
                                 "strides=333,1|333,1|0,0|0,1");
  const Workload w = f.workload(*p, 5);
  Buffer x(w.inputs[0].size()), b(w.inputs[1].size()), y(999 * 333 * 2);
  x.upload(w.inputs[0], 0);
  b.upload(w.inputs[1], 0);
  const Dims shape = {999, 333}, st = {333, 1}, row = {333}, one = {1};
  const auto plan = templates::elementwise::plan_views(
      std::vector<View>{{shape, st}, {{}, {}}, {row, one}}, View{shape, st});
  const std::size_t compiled = internal::impl(rt).compiler.compile_count();
  for (double s : {0.5, -3.25, 1e-3}) {
    y.poison();
    elementwise_view(rt, "y = x * s + b",
                     std::vector<ViewOperand>{{x.at(0), shape, st}, ViewOperand::scalar(s), {b.at(0), row, one}},
                     ViewOperand{y.at(0), shape, st}, DType::kFloat16);
    JITUNE_CU_CHECK(cuCtxSynchronize());
    std::vector<std::byte> expected(999 * 333 * 2);
    const std::byte* ins[] = {w.inputs[0].data(), nullptr, w.inputs[1].data()};
    const double values[] = {0, s, 0};
    templates::elementwise::view_reference(templates::elementwise::parse_expression("y = x * s + b"),
                                           DType::kFloat16, plan, ins, expected, 2u, values);
    const auto got = y.download(expected.size(), 0);
    const OutputCheck check = f.output_check(*p, 0);
    const CompareResult r = compare_host(check, got.data(), expected.data(), 999 * 333);
    INFO("s = ", s);
    CHECK_MESSAGE(r.ok(), r.describe(999 * 333, check));
  }
  CHECK(internal::impl(rt).compiler.compile_count() - compiled <= 1);  // one kernel for every value
}

TEST_CASE("elementwise_view tunes a view problem and stores it under its layout") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const Family& f = family("elementwise_view");
  const auto p = f.parse_problem("dtype=float16;expr=y = x + b;layout=rows;shape=4096,1024;strides=1024,1|1024,1|0,1");
  tuner::TuneOptions opt;
  opt.strategy = tuner::Strategy::kRandom;
  opt.budget = 8;
  const tuner::TuneReport r = tuner::tune(rt, f, *p, opt);
  CHECK(r.best_us > 0);
  CHECK(r.stored);
  rt.reload();
  const Explanation e = rt.explain("elementwise_view", p->signature());
  CHECK(e.level == MatchLevel::kExact);
  CHECK(e.config == r.best.text());
}

TEST_CASE("elementwise_view: every config of the tiled kernel (inner_transpose) matches the CPU reference") {
  // Exhaustive tuning verifies each candidate against the reference: tile edges, packs and blocks over partial
  // tiles, two transposed inputs beside a dense one, a broadcast column and a scalar, batch dims on both sides.
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const Family& f = family("elementwise_view");
  for (const char* sig :
       {"dtype=float16;expr=y = x * s + w - b * z;layout=inner_transpose;scalars=2;shape=3,72,40;"
        "strides=2880,40,1|2880,1,72|0,0,0|3000,1,72|2880,40,1|0,1,0",
        "dtype=float32;expr=y = x + 0.5f * b;layout=inner_transpose;shape=5,3,136,24;"
        "strides=9792,3264,24,1|9792,136,1,408|0,0,0,1",
        "dtype=bfloat16;expr=y = x * x;layout=inner_transpose;shape=33,70;strides=70,1|1,33"}) {
    const auto p = f.parse_problem(sig);
    tuner::TuneOptions opt;
    opt.strategy = tuner::Strategy::kExhaustive;
    const tuner::TuneReport r = tuner::tune(rt, f, *p, opt);
    INFO(sig, tuner::status_counts(r.candidates));
    int ok = 0, tight = 0;
    for (const auto& c : r.candidates) {
      INFO(c.config.text(), ": ", c.status, " ", c.reason);
      // A register bound (minblocks > 1) may make ptxas spill: the tuner rejects that candidate, nothing else.
      const bool spilled = c.status == "resources_exceeded" && c.reason.find("spills") != std::string::npos &&
                           c.config.at("minblocks") > 1;
      CHECK((c.status == "ok" || c.status == "cut" || spilled));
      ok += c.status == "ok";
      tight += c.status == "ok" && c.config.at("minblocks") > 1;
    }
    CHECK(ok > 10);
    CHECK(tight > 0);  // some register-bounded configs ran and matched the reference
  }
}

TEST_CASE("elementwise_view: every config of the rows and flat kernels matches the CPU reference") {
  // A bias per row (broadcast_column, as PyTorch lays out x.permute(0, 2, 1) * s + b), a row and a column, rows of
  // 130 elements (a whole number of packs of 2 only: wider packs go element by element), a sliced input whose rows
  // start at every alignment (kMixed; flat only with pack 1), an output with gaps after each row and plane
  // (pitches 264 and 2000: the elements between stay as they were).
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const Family& f = family("elementwise_view");
  for (const char* sig :
       {"dtype=float16;expr=y = x * s + b;layout=broadcast_column;scalars=2;shape=5,97,128;"
        "strides=12416,128,1|12416,128,1|0,0,0|0,1,0",
        "dtype=float32;expr=y = x * r + c;layout=broadcast_column;shape=123,200;strides=200,1|200,1|0,1|1,0",
        "dtype=float16;expr=y = x + b;layout=broadcast_column;shape=301,130;strides=130,1|130,1|1,0",
        "dtype=bfloat16;expr=y = a * b;layout=rows;shape=77,136;strides=136,1|137,1|136,1",
        "dtype=float32;expr=y = x - b;layout=rows;shape=6,7,256;strides=2000,264,1|1792,256,1|0,0,1"}) {
    const auto p = f.parse_problem(sig);
    tuner::TuneOptions opt;
    opt.strategy = tuner::Strategy::kExhaustive;
    const tuner::TuneReport r = tuner::tune(rt, f, *p, opt);
    INFO(sig, tuner::status_counts(r.candidates));
    int ok = 0, several = 0, flat = 0;
    for (const auto& c : r.candidates) {
      INFO(c.config.text(), ": ", c.status, " ", c.reason);
      // Many packs in flight in a wide block may make ptxas spill: the tuner rejects that candidate, nothing else.
      const bool spilled = c.status == "resources_exceeded" && c.reason.find("spills") != std::string::npos;
      CHECK((c.status == "ok" || c.status == "cut" || spilled));
      ok += c.status == "ok";
      several += c.status == "ok" && c.config.at("unroll") > 1 && c.config.at("pack") > 1;
      flat += c.status == "ok" && c.config.at("flat") == 1;
    }
    CHECK(ok > 10);
    CHECK(several > 0);  // packs are the rows kernel's (the gather kernel takes pack 1)
    CHECK(flat > 0);     // and the flat kernel ran the same plans
  }
}

TEST_CASE("elementwise_view: the flat kernel through the public call, aligned and with pointers off its packs") {
  // A bias per row in PyTorch's layout of x.permute(0, 2, 1) * s + b, with the flat kernel stored as the tuned
  // config: aligned buffers move 16-byte packs; an input and the output off 16 bytes go element by element.
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const Family& f = family("elementwise_view");
  const auto p = f.parse_problem("dtype=float16;expr=y = x * s + b;layout=broadcast_column;shape=5,97,128;"
                                 "strides=12416,128,1|12416,128,1|0,0,0|0,1,0");
  cache::Record rec;
  rec.config = "block=128,flat=1,group=1,minblocks=1,pack=8,tile=32,unroll=2,waves=32";
  rec.key = internal::impl(rt).record_key(f, *p, Config::parse(rec.config));
  rec.group = p->group();
  rec.features = p->features();
  REQUIRE(f.check(*p, Config::parse(rec.config), rt.device()).empty());
  rec.time_us = 1;
  rec.reps = 1;
  rec.created_at = "2026-11-27T00:00:00Z";
  internal::impl(rt).user_store->put(rec);
  rt.reload();
  REQUIRE(rt.explain("elementwise_view", p->signature()).config == rec.config);
  const Dims shape = {5, 97, 128};
  for (std::size_t off : {0, 1, 3})
    CHECK(check_views(rt, "y = x * s + b", DType::kFloat16,
                      {{shape, dense(shape), off}, {{}, {}, 0}, {{97, 1}, {1, 0}, off}}, {shape, dense(shape), off},
                      40 + off) == LayoutClass::kBroadcastColumn);
}

TEST_CASE(
    "an elementwise_view call right behind the kernel that writes its input sees the finished input (programmatic "
    "launch) [sm_90]") {
  test::PdlCase pdl;
  Runtime& rt = pdl.rt;
  const CUstream s = pdl.s;
  // y = x.permute(0, 2, 1) * s + b over x of (6, 96, 130) float16 (s a 0-d tensor, b per row of the result), into
  // a contiguous result (inner_transpose: the tiled kernel), into x's memory order (broadcast_column: rows or
  // flat), and over every other column of x (general: gather).
  const Dims shape = {6, 96, 130};
  const std::int64_t elements = 6 * 96 * 130;
  const std::size_t bytes = static_cast<std::size_t>(elements) * 2;
  const Dims permuted = {6, 130, 96}, x_strides = {96 * 130, 1, 130}, bias_strides = {0, 0, 1};
  const Dims kept_strides = {96 * 130, 1, 130}, half_shape = {6, 96, 65}, half_strides = {96 * 130, 130, 2};
  struct Case {
    const char* name;
    Dims x_shape, x_strides, out_shape, out_strides, b_shape, b_strides;
  };
  for (const Case& c : {Case{"inner_transpose", permuted, x_strides, permuted, dense(permuted), {96}, {1}},
                        Case{"broadcast_column", permuted, x_strides, permuted, kept_strides, {96}, {1}},
                        Case{"general", half_shape, half_strides, half_shape, dense(half_shape), {65}, {1}}}) {
    INFO(c.name);
    const auto fresh = test::random_values(DType::kFloat16, elements, 42),
               stale = test::random_values(DType::kFloat16, elements, 41);
    Buffer x(bytes), scale(2), bias(96 * 2), out(bytes), next(bytes), saved(bytes);
    scale.upload(test::random_values(DType::kFloat16, 1, 44), 0);
    bias.upload(test::random_values(DType::kFloat16, 96, 45), 0);
    next.upload(fresh, 0);
    const Dims none;
    const ViewOperand ins[] = {{x.at(0), c.x_shape, c.x_strides}, {scale.at(0), none, none},
                               {bias.at(0), c.b_shape, c.b_strides}};
    const ViewOperand result{out.at(0), c.out_shape, c.out_strides};
    auto call = [&] {
      elementwise_view(rt, "y = x * s + b", ins, result, DType::kFloat16, reinterpret_cast<Stream>(s));
    };
    x.upload(fresh, 0);
    out.poison();
    call();
    JITUNE_CU_CHECK(cuStreamSynchronize(s));
    const auto expected = out.download(bytes, 0);
    pdl.producer.expect_waits(s, next, x, stale, out, saved, expected, call, "the view kernel");
  }
}

TEST_CASE("elementwise_view refuses bad views with clear errors") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  Buffer a(1 << 16), b(1 << 16);
  const Dims shape = {16, 16}, st = {16, 1}, overlapping = {1, 1}, bad = {3, 16};
  const std::vector<ViewOperand> in = {{a.at(0), shape, st}};
  using doctest::Contains;
  CHECK_THROWS_WITH_AS(elementwise_view(rt, "y = x", in, ViewOperand{b.at(0), shape, overlapping}, DType::kFloat32),
                       Contains("share memory"), InvalidArgument);
  CHECK_THROWS_WITH_AS(elementwise_view(rt, "y = x", std::vector<ViewOperand>{{a.at(0), bad, st}},
                                        ViewOperand{b.at(0), shape, st}, DType::kFloat32),
                       Contains("do not broadcast"), InvalidArgument);
  // the output over the input, shifted by one element: a partial overlap
  CHECK_THROWS_AS(elementwise_view(rt, "y = x", in, ViewOperand{a.at(4), shape, st}, DType::kFloat32),
                  InvalidArgument);
  // in place where the output steps like the input is fine
  elementwise_view(rt, "x = x * 2", in, ViewOperand{a.at(0), shape, st}, DType::kFloat32);
  JITUNE_CU_CHECK(cuCtxSynchronize());
}

}  // namespace jitune
