// Planning elementwise calls over views (templates/elementwise/views.hpp): broadcasting, merging, layout classes,
// the errors for bad views, and a randomized check that a plan reaches exactly the elements the views name.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include <jitune/error.hpp>

#include <jitune/ops/elementwise.hpp>

#include "runtime/compiler.hpp"
#include "templates/family.hpp"
#include "tuner/tuner.hpp"
#include "templates/elementwise/expression.hpp"
#include "templates/elementwise/views.hpp"
#include "templates/sources.hpp"
#include "templates/host_float.hpp"

namespace jitune {
namespace {

using templates::elementwise::dense_strides;
using templates::elementwise::parse_expression;
using templates::elementwise::view_extents;
using templates::elementwise::view_kernel;
using templates::elementwise::view_reference;
using templates::elementwise::view_source;
using templates::elementwise::ViewKernel;
using templates::elementwise::views_need_index64;
using templates::elementwise::LayoutClass;
using templates::elementwise::plan_views;
using templates::elementwise::View;
using templates::elementwise::ViewPlan;
using Dims = std::vector<std::int64_t>;

View dense(Dims shape) { return {shape, dense_strides(shape)}; }

// Every output element's offset mapped to the offsets of the inputs it reads, by walking the original views.
std::map<std::int64_t, Dims> walk_views(const std::vector<View>& inputs, const View& out) {
  std::map<std::int64_t, Dims> map;
  const std::size_t dims = out.shape.size();
  Dims index(dims, 0);
  std::int64_t total = 1;
  for (auto s : out.shape) total *= s;
  for (std::int64_t e = 0; e < total; ++e) {
    std::int64_t o = 0;
    for (std::size_t d = 0; d < dims; ++d) o += index[d] * out.strides[d];
    Dims reads;
    for (const View& v : inputs) {
      std::int64_t off = 0;
      for (std::size_t k = 0; k < v.shape.size(); ++k) {
        const std::size_t d = dims - v.shape.size() + k;
        off += (v.shape[k] == 1 ? 0 : index[d]) * v.strides[k];
      }
      reads.push_back(off);
    }
    REQUIRE(map.emplace(o, reads).second);  // an output element is written once
    for (std::size_t d = dims; d-- > 0;) {
      if (++index[d] < out.shape[d]) break;
      index[d] = 0;
    }
  }
  return map;
}

// The same map from a plan: its merged index space in row-major order.
std::map<std::int64_t, Dims> walk_plan(const ViewPlan& p) {
  std::map<std::int64_t, Dims> map;
  const std::size_t dims = p.shape.size();
  Dims index(dims, 0);
  for (std::int64_t e = 0; e < p.elements; ++e) {
    Dims offsets(p.strides.size(), 0);
    for (std::size_t i = 0; i < p.strides.size(); ++i)
      for (std::size_t d = 0; d < dims; ++d) offsets[i] += index[d] * p.strides[i][d];
    REQUIRE(map.emplace(offsets[0], Dims(offsets.begin() + 1, offsets.end())).second);
    for (std::size_t d = dims; d-- > 0;) {
      if (++index[d] < p.shape[d]) break;
      index[d] = 0;
    }
  }
  return map;
}

}  // namespace

TEST_CASE("same-shaped dense operands are one contiguous dim") {
  const std::vector<View> in = {dense({4, 5, 6}), dense({4, 5, 6})};
  const ViewPlan p = plan_views(in, dense({4, 5, 6}));
  CHECK(p.layout == LayoutClass::kContiguous);
  CHECK(p.shape == Dims{120});
  CHECK(p.strides == std::vector<Dims>{{1}, {1}, {1}});
  CHECK(p.key() == "layout=contiguous;shape=120;strides=1|1|1");
}

TEST_CASE("a bias row, a sliced view and a scalar are rows") {
  // x (8192, 1024) + b (1024,)
  ViewPlan p = plan_views(std::vector<View>{dense({8192, 1024}), dense({1024})}, dense({8192, 1024}));
  CHECK(p.layout == LayoutClass::kRows);
  CHECK(p.shape == Dims{8192, 1024});
  CHECK(p.strides == std::vector<Dims>{{1024, 1}, {1024, 1}, {0, 1}});
  // a[:, 1:] * b, a of (64, 129)
  p = plan_views(std::vector<View>{{{64, 128}, {129, 1}}, dense({64, 128})}, dense({64, 128}));
  CHECK(p.layout == LayoutClass::kRows);
  CHECK(p.strides[1] == Dims{129, 1});
  // x * 2-d scalar tensor of shape (): a stride-0 operand everywhere
  p = plan_views(std::vector<View>{dense({3, 7}), View{{}, {}}}, dense({3, 7}));
  CHECK(p.layout == LayoutClass::kContiguous);
  CHECK(p.strides == std::vector<Dims>{{1}, {1}, {0}});
}

TEST_CASE("a column broadcast, a permuted input and a strided output") {
  ViewPlan p = plan_views(std::vector<View>{dense({50, 70}), dense({50, 1})}, dense({50, 70}));
  CHECK(p.layout == LayoutClass::kBroadcastColumn);
  CHECK(p.strides[2] == Dims{1, 0});
  // x.permute(0, 2, 1) * s + b, x (64, 1024, 1024): inner transpose, nothing merges
  const View permuted{{64, 1024, 1024}, {1024 * 1024, 1, 1024}};
  p = plan_views(std::vector<View>{permuted, View{{}, {}}, dense({1024})}, dense({64, 1024, 1024}));
  CHECK(p.layout == LayoutClass::kInnerTranspose);
  CHECK(p.shape == Dims{64, 1024, 1024});
  CHECK(p.strides[1] == Dims{1024 * 1024, 1, 1024});
  // Both operands transposed the same way: reordered by the output, they are one dense dim
  const View t{{300, 200}, {1, 300}};
  p = plan_views(std::vector<View>{t}, t);
  CHECK(p.layout == LayoutClass::kContiguous);
  CHECK(p.shape == Dims{60000});
  // Writing every other element: general
  p = plan_views(std::vector<View>{dense({100})}, View{{100}, {2}});
  CHECK(p.layout == LayoutClass::kGeneral);
}

TEST_CASE("size-1 dims, one element and empty problems") {
  ViewPlan p = plan_views(std::vector<View>{View{{1, 5, 1}, {77, 1, 99}}}, dense({1, 5, 1}));
  CHECK(p.layout == LayoutClass::kContiguous);
  CHECK(p.shape == Dims{5});
  p = plan_views(std::vector<View>{View{{1, 1}, {3, 9}}}, dense({1, 1}));
  CHECK(p.elements == 1);
  CHECK(p.shape == Dims{1});
  p = plan_views(std::vector<View>{dense({4, 0, 3})}, dense({4, 0, 3}));
  CHECK(p.elements == 0);
}

TEST_CASE("bad views get errors that say what is wrong") {
  using doctest::Contains;
  CHECK_THROWS_WITH_AS(plan_views(std::vector<View>{dense({4, 5}), dense({3, 5})}, dense({4, 5})),
                       Contains("do not broadcast"), InvalidArgument);
  CHECK_THROWS_WITH_AS(plan_views(std::vector<View>{View{{4}, {-1}}}, dense({4})), Contains("negative strides"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(plan_views(std::vector<View>{dense({4, 5})}, View{{4, 5}, {0, 1}}), Contains("stride 0"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(plan_views(std::vector<View>{dense({2, 2})}, View{{2, 2}, {1, 1}}),
                       Contains("share memory"), InvalidArgument);
  CHECK_THROWS_WITH_AS(plan_views(std::vector<View>{dense({4, 5})}, dense({5})),
                       Contains("broadcast"), InvalidArgument);
  CHECK_THROWS_WITH_AS(plan_views(std::vector<View>{dense({2, 4, 5})}, dense({4, 5})),
                       Contains("broadcast to [2,4,5]"), InvalidArgument);
  // An input broadcast over a new leading dim is fine.
  CHECK(plan_views(std::vector<View>{dense({4, 5})}, dense({2, 4, 5})).layout == LayoutClass::kRows);
  CHECK_THROWS_WITH_AS(plan_views(std::vector<View>{View{{4, 5}, {5}}}, dense({4, 5})),
                       Contains("2 sizes but 1 strides"), InvalidArgument);
  CHECK_THROWS_WITH_AS(plan_views(std::vector<View>{View{{-4}, {1}}}, dense({4})), Contains("sizes are >= 0"),
                       InvalidArgument);
}

TEST_CASE("a plan reaches exactly the elements the views name (random views)") {
  std::mt19937 rng(20261125);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int classes[5] = {};
  for (int round = 0; round < 400; ++round) {
    const int dims = pick(1, 4);
    Dims shape;
    for (int d = 0; d < dims; ++d) shape.push_back(pick(1, 5));
    // The output: dense, or a permuted dense buffer, or a slice of a larger one.
    auto make_view = [&](const Dims& s, bool allow_broadcast) {
      Dims base = s;
      for (auto& b : base) b += pick(0, 1) * pick(0, 2);  // room for slicing
      std::vector<std::size_t> perm(s.size());
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      Dims permuted_base(s.size()), strides(s.size());
      for (std::size_t i = 0; i < s.size(); ++i) permuted_base[i] = base[perm[i]];
      const Dims dense_permuted = dense_strides(permuted_base);
      for (std::size_t i = 0; i < s.size(); ++i) strides[perm[i]] = dense_permuted[i];
      View v{s, strides};
      if (allow_broadcast)
        for (std::size_t d = 0; d < s.size(); ++d)
          if (pick(0, 3) == 0) v.shape[d] = 1;  // broadcast over this dim
      if (allow_broadcast && pick(0, 3) == 0 && !v.shape.empty()) {  // drop leading dims
        const auto drop = static_cast<std::size_t>(pick(0, static_cast<int>(v.shape.size())));
        v.shape.erase(v.shape.begin(), v.shape.begin() + static_cast<std::ptrdiff_t>(drop));
        v.strides.erase(v.strides.begin(), v.strides.begin() + static_cast<std::ptrdiff_t>(drop));
      }
      return v;
    };
    const View out = make_view(shape, false);
    std::vector<View> in;
    for (int i = pick(1, 3); i > 0; --i) in.push_back(make_view(shape, true));
    const ViewPlan p = plan_views(in, out);
    ++classes[static_cast<int>(p.layout)];
    CHECK(walk_plan(p) == walk_views(in, out));
    for (const auto& st : p.strides) CHECK(st.size() == p.shape.size());
  }
  MESSAGE("layout classes met: contiguous ", classes[0], ", rows ", classes[1], ", broadcast_column ", classes[2],
          ", inner_transpose ", classes[3], ", general ", classes[4]);
  for (int c : classes) CHECK(c > 0);  // the random views reach every class
}

TEST_CASE("buffer extents and the index width of a plan") {
  ViewPlan p = plan_views(std::vector<View>{{{64, 128}, {129, 1}}, dense({128})}, dense({64, 128}));
  CHECK(view_extents(p) == Dims{64 * 128, 63 * 129 + 128, 128});
  CHECK_FALSE(views_need_index64(p));
  // 2^31 elements read through a broadcast row: the index, not the buffers, needs 64 bits
  p = plan_views(std::vector<View>{dense({1 << 16})}, dense({1 << 15, 1 << 16}));
  CHECK(view_extents(p)[1] == (1 << 16));
  CHECK(views_need_index64(p));
  // a small output reading far into a strided input: the offset needs 64 bits
  p = plan_views(std::vector<View>{View{{4}, {std::int64_t{1} << 30}}}, dense({4}));
  CHECK(views_need_index64(p));
}

TEST_CASE("NVRTC compiles the view kernels for every layout class, dtype and sm_80 / sm_90") {
  Compiler compiler;
  struct Case {
    const char* what;
    std::vector<View> inputs;
    View output;
    ViewKernel kernel;
  };
  const std::vector<Case> cases = {
      {"bias row", {dense({300, 333}), dense({333})}, dense({300, 333}), ViewKernel::kRows},
      {"column", {dense({300, 333}), dense({300, 1})}, dense({300, 333}), ViewKernel::kRows},
      {"short rows", {dense({300, 77}), dense({77})}, dense({300, 77}), ViewKernel::kGather},
      {"transposed input", {View{{40, 50, 60}, {3000, 1, 50}}, View{{}, {}}}, dense({40, 50, 60}),
       ViewKernel::kTiled},
      {"scattered input", {View{{40, 50, 60}, {7, 3000, 50}}}, dense({40, 50, 60}), ViewKernel::kGather},
      {"strided output", {dense({99})}, View{{99}, {3}}, ViewKernel::kGather},
  };
  const auto expr = parse_expression("y = a * s + 1");
  for (const Case& c : cases) {
    std::vector<View> in = c.inputs;
    if (in.size() == 1) in.push_back(View{{}, {}});
    const ViewPlan plan = plan_views(in, c.output);
    REQUIRE(view_kernel(plan) == c.kernel);
    if (c.kernel == ViewKernel::kTiled) CHECK(templates::elementwise::view_transposed_dim(plan) == 1);
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
      for (const char* arch : {"sm_80", "sm_90"})
        for (std::int64_t flat : {0, 1}) {  // the rows kernel's plans also run the flat kernel
          if (flat == 1 && c.kernel != ViewKernel::kRows) continue;
          // the tiled case's 50 rows and 60 columns take pack 2 at most
          const std::int64_t pack =
              c.kernel == ViewKernel::kTiled ? 2 : 16 / static_cast<std::int64_t>(dtype_size(dtype));
          const Config config{{"block", 256}, {"unroll", 2},  {"pack", pack},
                              {"tile", 64},     {"group", 4}, {"minblocks", c.kernel == ViewKernel::kTiled ? 4 : 1},
                              {"flat", flat}};
          const KernelSource src = view_source(expr, dtype, plan, config);
          const CompiledProgram out = compiler.compile(src.program, {src.name_expression}, arch, true);
          INFO(c.what, " ", dtype_name(dtype), " ", arch, " ", src.name_expression, "\n", out.log);
          REQUIRE(out.ok);
          CHECK(out.resources.at(0).registers > 0);
          CHECK_FALSE(out.resources.at(0).spills());
        }
  }
}

TEST_CASE("the CPU reference over views: a bias add into a sliced output, in float16") {
  // out[:, :7] = x + b with out a (3, 9) buffer, x dense (3, 7), b (7,)
  const View out_view{{3, 7}, {9, 1}};
  const std::vector<View> in = {dense({3, 7}), dense({7})};
  const ViewPlan plan = plan_views(in, out_view);
  const Dims extents = view_extents(plan);
  std::vector<std::vector<std::byte>> bytes = {std::vector<std::byte>(static_cast<std::size_t>(extents[1]) * 2),
                                               std::vector<std::byte>(static_cast<std::size_t>(extents[2]) * 2)};
  for (std::size_t a = 0; a < 2; ++a)
    for (std::int64_t i = 0; i < extents[a + 1]; ++i)
      store_element(DType::kFloat16, bytes[a].data(), static_cast<std::uint64_t>(i), 0.25 * static_cast<double>(i) + a);
  std::vector<std::byte> out(static_cast<std::size_t>(3 * 9) * 2);
  for (std::uint64_t i = 0; i < 27; ++i) store_element(DType::kFloat16, out.data(), i, -7.0);  // poison
  const std::byte* pointers[] = {bytes[0].data(), bytes[1].data()};
  view_reference(parse_expression("y = x + b"), DType::kFloat16, plan, pointers, out);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 9; ++c) {
      const double got = load_element(DType::kFloat16, out.data(), static_cast<std::uint64_t>(r * 9 + c));
      INFO("row ", r, " col ", c);
      if (c >= 7) {
        CHECK(got == -7.0);  // outside the view: untouched
      } else {
        CHECK(got == 0.25 * (r * 7 + c) + (0.25 * c + 1));
      }
    }
}

TEST_CASE("the elementwise_view family: signatures from calls and options agree, and round trip") {
  const Family& f = family("elementwise_view");
  const std::int64_t shape[] = {8192, 1024}, row[] = {1024}, one[] = {1}, dense2[] = {1024, 1};
  const ViewOperand x{nullptr, shape, dense2}, b{nullptr, row, one}, y{nullptr, shape, dense2};
  const std::vector<ViewOperand> in = {x, b};
  const std::string sig = elementwise_view_signature("y = x + b", in, y, DType::kFloat16);
  CHECK(sig == "dtype=float16;expr=y = x + b;layout=rows;shape=8192,1024;strides=1024,1|1024,1|0,1");
  CHECK(f.parse_problem(sig)->signature() == sig);
  CHECK(f.make_problem({{"expr", "y = x + b"}, {"dtype", "float16"}, {"shape", "8192,1024"},
                        {"strides", "1024,1|1024,1|0,1"}})->signature() == sig);
  CHECK(f.parse_problem(sig)->group() == "float16|arity=2|layout=rows|dims=2");
  // 8192 x 1024 written, x read whole, b read once
  CHECK(f.parse_problem(sig)->bytes_moved() == 2.0 * (2 * 8192 * 1024 + 1024));
  using doctest::Contains;
  CHECK_THROWS_WITH_AS(f.make_problem({{"expr", "y = x + b"}, {"dtype", "float16"}, {"shape", "4,4"},
                                       {"strides", "4,1|4,1|0,1"}, {"layout", "general"}}),
                       Contains("the shape and strides give rows"), InvalidArgument);
  CHECK_THROWS_WITH_AS(f.make_problem({{"expr", "y = x + b"}, {"dtype", "float16"}, {"shape", "4,4"},
                                       {"strides", "4,1|4,1"}}),
                       Contains("reads 2 inputs but 1 were given"), InvalidArgument);
  CHECK_THROWS_WITH_AS(f.make_problem({{"expr", "y = x"}, {"dtype", "int32"}, {"shape", "4"}, {"strides", "1|1"}}),
                       Contains("not supported"), InvalidArgument);
  // The largest call: 8 inputs and the output, 8 dims each, fits the call's key values.
  const std::int64_t eight[] = {2, 1, 3, 1, 2, 1, 3, 5}, eight_strides[] = {90, 90, 30, 30, 15, 15, 5, 1};
  const ViewOperand wide{nullptr, eight, eight_strides};
  const std::vector<ViewOperand> eight_inputs(8, wide);
  CHECK(f.parse_problem(elementwise_view_signature("y = a + b + c + d + e + g + h + k", eight_inputs, wide,
                                                   DType::kFloat32))->group() == "float32|arity=8|layout=contiguous|dims=1");
  const std::int64_t nine[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const ViewOperand deep{nullptr, nine, nine};
  CHECK_THROWS_WITH_AS(elementwise_view_signature("y = x", std::vector<ViewOperand>{deep}, deep, DType::kFloat32),
                       Contains("at most 8"), InvalidArgument);
}

TEST_CASE("the elementwise_view family's default suite: the fused chains of issue 21, canonical, every layout class") {
  const Family& f = family("elementwise_view");
  std::set<std::string> names, layouts;
  for (const auto& [name, signature] : f.default_suite()) {
    names.insert(name);
    const auto p = f.parse_problem(signature);
    CHECK(p->signature() == signature);
    layouts.insert(signature.substr(signature.find("layout=") + 7,
                                    signature.find(';', signature.find("layout=")) - signature.find("layout=") - 7));
  }
  CHECK(names == std::set<std::string>{"view_permute_scale_bias_float16_64x1024x1024",
                                       "view_permute_scale_bias_contiguous_float16_64x1024x1024",
                                       "view_bias_add_float16_8192x1024", "view_slice_mul_float32_8192x1024",
                                       "view_broadcast3_float16_4096x4096"});
  CHECK(layouts == std::set<std::string>{"inner_transpose", "rows", "broadcast_column"});
}

TEST_CASE("the elementwise_view family: buffers, workload and reference agree; a strided output keeps its gaps") {
  const Family& f = family("elementwise_view");
  auto p = f.parse_problem("dtype=float32;expr=y = x * 2;layout=general;shape=50;strides=3|1");
  const auto specs = f.buffers(*p);
  REQUIRE(specs.size() == 2);
  CHECK(specs[0].extent_bytes() == 50 * 4);
  CHECK(specs[1].extent_bytes() == (49 * 3 + 1) * 4);
  const Workload w = f.workload(*p, 7);
  REQUIRE(w.inputs.size() == 1);
  CHECK(w.inputs[0].size() == specs[0].extent_bytes());
  REQUIRE(w.output_bytes.size() == 1);
  CHECK(w.output_bytes[0] == specs[1].extent_bytes());
  REQUIRE(w.initial_outputs.size() == 1);  // gaps between the written elements: known initial values
  const auto ref = f.reference(*p, w);
  for (std::uint64_t i = 0; i < 148; ++i) {
    const double got = load_element(DType::kFloat32, ref[0].data(), i);
    const double initial = load_element(DType::kFloat32, w.initial_outputs[0].data(), i);
    if (i % 3 == 0)
      CHECK(got == 2 * load_element(DType::kFloat32, w.inputs[0].data(), i / 3));
    else
      CHECK(got == initial);
  }
  // A dense output needs no initial values (every element is written; the tuner poisons it)
  CHECK(f.workload(*f.parse_problem("dtype=float16;expr=y = x + b;layout=rows;shape=30,7;strides=7,1|7,1|0,1"), 1)
            .initial_outputs.empty());
  // in place only where the output steps like an input
  auto same = f.parse_problem("dtype=float32;expr=x = x * y;layout=rows;shape=30,7;strides=9,1|9,1|0,1");
  CHECK(f.buffers(*same).back().in_place);
  auto other = f.parse_problem("dtype=float32;expr=x = x * y;layout=rows;shape=30,7;strides=7,1|9,1|0,1");
  CHECK_FALSE(f.buffers(*other).back().in_place);
}

TEST_CASE("the elementwise_view family: NVRTC compiles every legal config of a rows and a gather problem") {
  Compiler compiler;
  const Family& f = family("elementwise_view");
  for (const char* sig : {"dtype=bfloat16;expr=y = x * s + b;layout=rows;shape=300,333;strides=333,1|333,1|0,0|0,1",
                          "dtype=float16;expr=y = x + b;layout=inner_transpose;shape=6,50,40;strides=2000,40,1|"
                          "2000,1,50|0,0,1"})
    for (int cc : {80, 90}) {
      const auto p = f.parse_problem(sig);
      const auto r = tuner::dry_run(compiler, f, *p, nominal_device(cc), 0);
      INFO(sig, " sm_", cc);
      REQUIRE(!r.candidates.empty());
      for (const auto& c : r.candidates) {
        INFO(c.config.text(), "\n", c.reason);
        CHECK(c.status == "ok");
      }
    }
}

TEST_CASE("the elementwise_view family: scalar inputs are values of the call, not buffers") {
  const Family& f = family("elementwise_view");
  const std::int64_t shape[] = {8192, 1024}, row[] = {1024}, one[] = {1}, dense2[] = {1024, 1};
  const std::vector<ViewOperand> in = {{nullptr, shape, dense2}, ViewOperand::scalar(0.5), {nullptr, row, one}};
  const ViewOperand y{nullptr, shape, dense2};
  const std::string sig = elementwise_view_signature("y = x * s + b", in, y, DType::kFloat16);
  CHECK(sig == "dtype=float16;expr=y = x * s + b;layout=rows;scalars=2;shape=8192,1024;strides=1024,1|1024,1|0,0|0,1");
  const auto p = f.parse_problem(sig);
  CHECK(p->signature() == sig);
  CHECK(f.buffers(*p).size() == 3);  // x, b, y: no buffer for s
  CHECK(p->bytes_moved() == 2.0 * (2 * 8192 * 1024 + 1024));
  // Tuning and the reference use a default value for s: y = x * 1.625 + b
  const auto small = f.parse_problem("dtype=float32;expr=y = x * s + b;layout=rows;scalars=2;shape=3,5;"
                                     "strides=5,1|5,1|0,0|0,1");
  const Workload w = f.workload(*small, 5);
  REQUIRE(w.inputs.size() == 2);
  const auto ref = f.reference(*small, w);
  for (std::uint64_t i = 0; i < 15; ++i) {
    const double x = load_element(DType::kFloat32, w.inputs[0].data(), i);
    const double b = load_element(DType::kFloat32, w.inputs[1].data(), i % 5);
    CHECK(load_element(DType::kFloat32, ref[0].data(), i) == doctest::Approx(x * 1.625 + b).epsilon(1e-6));
  }
  using doctest::Contains;
  const std::vector<ViewOperand> five(5, ViewOperand::scalar(1.0));
  CHECK_THROWS_WITH_AS(elementwise_view_signature("y = a + b + c + d + e", five, y, DType::kFloat32),
                       Contains("at most 4"), InvalidArgument);
  CHECK_THROWS_WITH_AS(elementwise_view_signature("y = x", std::vector<ViewOperand>{{nullptr, shape, dense2}},
                                                  ViewOperand::scalar(1.0), DType::kFloat32),
                       Contains("output cannot be a scalar"), InvalidArgument);
  CHECK_THROWS_WITH_AS(f.parse_problem("dtype=float32;expr=y = x * s;layout=rows;scalars=2;shape=3,5;"
                                       "strides=5,1|5,1|0,1"),
                       Contains("scalar but its strides"), InvalidArgument);
  CHECK_THROWS_WITH_AS(f.parse_problem("dtype=float32;expr=y = x * s;scalars=4;shape=3,5;strides=5,1|5,1|0,0"),
                       Contains("does not have"), InvalidArgument);
  // A generic call whose scalar values do not match the mask is the caller's error.
  CallArgs args;
  args.add(0).add(1).add(1).text("y = s");
  args.add(1).add(4).add(1).add(1);  // output: 4 elements
  args.add(0).add(0);                // the scalar input, but no value among the call's scalars
  CHECK_THROWS_WITH_AS(f.problem_from_call(args), Contains("passes 0 scalar values"), InvalidArgument);
  // NVRTC builds the three kernels with a scalar input
  Compiler compiler;
  for (const char* s2 : {"dtype=float16;expr=y = x * s + b;layout=rows;scalars=2;shape=30,700;"
                         "strides=700,1|700,1|0,0|0,1",
                         "dtype=float16;expr=y = x * s;layout=inner_transpose;scalars=2;shape=6,50,40;"
                         "strides=2000,40,1|2000,1,50|0,0,0",
                         "dtype=float16;expr=y = x * s;layout=general;scalars=2;shape=50;strides=2|1|0"}) {
    const auto q = f.parse_problem(s2);
    const KernelSource src = f.source(*q, f.heuristic(*q, nominal_device(90)));
    const CompiledProgram out = compiler.compile(src.program, {src.name_expression}, "sm_90", true);
    INFO(s2, "\n", src.name_expression, "\n", out.log);
    CHECK(out.ok);
  }
}

}  // namespace jitune

namespace jitune {

TEST_CASE("the elementwise_view family: every kernel's launch is programmatic on sm_90 and later only") {
  const Family& f = family("elementwise_view");
  // One problem per kernel: gather (general), rows and flat (a bias row), tiled (inner_transpose).
  const char* sigs[] = {"dtype=float32;expr=y = a * b;layout=general;shape=8,96,65;strides=6240,65,1|12480,130,2|6240,65,1",
                        "dtype=float16;expr=y = x + b;layout=rows;shape=64,256;strides=256,1|256,1|0,1",
                        "dtype=float16;expr=y = x * s + b;layout=inner_transpose;shape=4,96,130;"
                        "strides=12480,130,1|12480,1,96|0,0,0|0,0,1"};
  for (const char* sig : sigs) {
    const auto p = f.parse_problem(sig);
    for (int cc : {80, 90}) {
      const DeviceInfo dev = nominal_device(cc);
      std::size_t pruned = 0;
      for (const Config& c : tuner::legal_candidates(f, *p, dev, pruned))
        CHECK_MESSAGE(f.launch_shape(*p, c, dev).programmatic == (cc >= 90), sig, " cc ", cc, " ", c.text());
    }
  }
  const std::string src = template_source("elementwise/views.cuh");
  std::size_t waits = 0;
  for (std::size_t at = src.find("wait_for_previous_kernel();"); at != std::string::npos;
       at = src.find("wait_for_previous_kernel();", at + 1))
    ++waits;
  CHECK(waits == 4);  // gather, rows, flat and tiled
}

TEST_CASE("the elementwise_view family: the tiled kernel's rules, default and per-call pack") {
  const Family& f = family("elementwise_view");
  const DeviceInfo dev = nominal_device(90);
  // x.permute(0, 2, 1) + b over (4, 64, 96) float16: rows 64 (kT = 1), columns 96
  const auto p = f.parse_problem("dtype=float16;expr=y = x + b;layout=inner_transpose;shape=4,64,96;"
                                 "strides=6144,96,1|6144,1,64|0,0,1");
  const Config def = f.heuristic(*p, dev);
  CHECK(def.at("pack") == 8);
  CHECK(def.at("tile") == 64);
  CHECK(f.check(*p, def, dev).empty());
  Config c = def;
  c.set("unroll", 2);
  CHECK(f.check(*p, c, dev).find("unroll") != std::string::npos);
  c = def;
  c.set("block", 1024);  // 8 lanes a row, 128 rows a pass: more than a 64-row tile
  CHECK(f.check(*p, c, dev).find("whole rows") != std::string::npos);
  c = def;
  c.set("pack", 1);
  c.set("tile", 128);
  c.set("block", 128);  // 128 tile rows per thread
  CHECK(f.check(*p, c, dev).find("at most 16") != std::string::npos);
  // Rows not a multiple of the pack: 66 rows take pack 2 at most, and the default says so
  const auto odd = f.parse_problem("dtype=float16;expr=y = x + b;layout=inner_transpose;shape=4,66,96;"
                                   "strides=6336,96,1|6336,1,66|0,0,1");
  CHECK(f.heuristic(*odd, dev).at("pack") == 2);
  c = f.heuristic(*odd, dev);
  c.set("pack", 4);
  CHECK(f.check(*odd, c, dev).find("multiples of it") != std::string::npos);
  // A transposed input whose column pitch is odd: no vectors along its rows
  const auto pitch = f.parse_problem("dtype=float32;expr=y = x + b;layout=inner_transpose;shape=4,64,96;"
                                     "strides=6144,96,1|7000,1,65|0,0,1");
  c = f.heuristic(*pitch, dev);
  CHECK(c.at("pack") == 1);  // the default narrows to what the pitches allow
  CHECK(f.check(*pitch, c, dev).empty());
  // (a view the GPU test met: pitches 33 and 627 in float32)
  const auto met = f.parse_problem("dtype=float32;expr=z = x * y - 0.5f;layout=inner_transpose;shape=32,38,18,16;"
                                   "strides=11232,288,16,1|1,528,20592,33|1,627,0,23826");
  CHECK(f.check(*met, f.heuristic(*met, dev), dev).empty());
  c.set("pack", 2);
  CHECK(f.check(*pitch, c, dev).find("pitches of input 0") != std::string::npos);
  // Shared memory: three transposed float32 inputs in 128 x 128 tiles need 3 x 128 x 128 x 4 bytes, over 48 KiB
  const auto three = f.parse_problem("dtype=float32;expr=y = a + b + c;layout=inner_transpose;shape=128,128;"
                                     "strides=128,1|1,128|1,128|1,128");
  c = f.heuristic(*three, dev);
  CHECK(f.check(*three, c, dev).empty());
  c.set("tile", 128);
  c.set("block", 1024);
  CHECK(f.check(*three, c, dev).find("shared memory") != std::string::npos);
  // Other layouts keep tile 32 and refuse another
  const auto rows = f.parse_problem("dtype=float16;expr=y = x + b;layout=rows;shape=30,700;strides=700,1|700,1|0,1");
  c = f.heuristic(*rows, dev);
  CHECK(f.check(*rows, c, dev).empty());
  c.set("tile", 64);
  CHECK(f.check(*rows, c, dev).find("tile, group and minblocks are for the tiled kernel") != std::string::npos);
  c = f.heuristic(*rows, dev);
  c.set("group", 4);
  CHECK(f.check(*rows, c, dev).find("takes tile 32, group 1, minblocks 1") != std::string::npos);
  c = f.heuristic(*rows, dev);
  c.set("minblocks", 4);
  CHECK(f.check(*rows, c, dev).find("minblocks 1") != std::string::npos);
  // flat runs the rows kernel's plans in packs that never cross a row and stay aligned with each row start
  c = f.heuristic(*rows, dev);
  c.set("flat", 1);
  c.set("pack", 4);
  CHECK(f.check(*rows, c, dev).empty());
  c.set("pack", 8);  // 700 elements a row is not whole packs of 8
  CHECK(f.check(*rows, c, dev).find("rows that are whole packs (700 elements is not)") != std::string::npos);
  const auto sliced = f.parse_problem("dtype=float32;expr=y = a * b;layout=rows;shape=64,1024;"
                                      "strides=1024,1|1025,1|1024,1");
  c = f.heuristic(*sliced, dev);
  c.set("flat", 1);
  CHECK(f.check(*sliced, c, dev).find("row pitches of input 0 to be multiples of it (1025 is not)") !=
        std::string::npos);
  c.set("pack", 1);
  CHECK(f.check(*sliced, c, dev).empty());
  c = f.heuristic(*three, dev);
  c.set("flat", 1);
  CHECK(f.check(*three, c, dev).find("flat is for the rows kernel") != std::string::npos);
  // minblocks bounds the registers of the tiled kernel; blocks x threads must fit an SM
  c = def;
  c.set("minblocks", 8);
  c.set("block", 256);
  CHECK(f.check(*p, c, dev).empty());
  c.set("block", 512);
  CHECK(f.check(*p, c, dev).find("threads an SM holds") != std::string::npos);

  // The rows kernel sweeps rows element by element where an input's pitch leaves its rows aligned unlike the
  // output's (a[:, 1:]), and only then carries that second sweep
  using templates::elementwise::plan_views;
  using templates::elementwise::View;
  using templates::elementwise::views_rows_mixed;
  const auto slice = plan_views(std::vector<View>{{{8, 1024}, {1025, 1}}, {{8, 1024}, {1024, 1}}}, {{8, 1024}, {1024, 1}});
  CHECK(views_rows_mixed(slice, 4));
  CHECK_FALSE(views_rows_mixed(slice, 1));
  const auto bias = plan_views(std::vector<View>{{{8, 1024}, {1024, 1}}, {{1024}, {1}}}, {{8, 1024}, {1024, 1}});
  CHECK_FALSE(views_rows_mixed(bias, 8));
  CHECK(view_source(parse_expression("y = a * b"), DType::kFloat32, slice, f.heuristic(*rows, dev))
            .name_expression.ends_with("true>"));

  // Per call: a pointer aligned to 4 bytes only narrows pack 8 to pack 2 (slot 1), the tile stays where it can
  alignas(16) static std::byte memory[64];
  const void* aligned[] = {memory, memory + 16, memory + 32};
  const void* off4[] = {memory + 4, memory + 16, memory + 32};
  std::uint8_t align16[] = {16, 16, 16}, align4[] = {4, 16, 16};
  Bindings b;
  b.pointers = aligned;
  b.alignment = align16;
  CHECK(f.variant(*p, def, b) == 3);
  b.pointers = off4;
  b.alignment = align4;
  const int slot = f.variant(*p, def, b);
  CHECK(slot == 1);
  const Config narrowed = f.variant_config(*p, def, slot, dev);
  CHECK(narrowed.at("pack") == 2);
  CHECK(f.check(*p, narrowed, dev).empty());
  CHECK(f.check(*p, f.variant_config(*p, def, 0, dev), dev).empty());
  // the broadcast row b is dense along the columns: its alignment counts too
  std::uint8_t align_b[] = {16, 2, 16};
  b.alignment = align_b;
  CHECK(f.variant(*p, def, b) == 0);
}

}  // namespace jitune
