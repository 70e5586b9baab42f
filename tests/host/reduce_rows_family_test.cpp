// The reduce_rows family without a GPU: call decoding and problem validation, the signature round trip,
// buffers and shortcuts, space constraints and the heuristic, kernel variants, workspace, kernel parameters
// and launch shapes, workload and CPU reference on hand-computed rows (NaN included), tolerances, and an
// NVRTC compile of every legal config of a few problems for sm_80 and sm_90.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include <jitune/jitune.hpp>

#include "runtime/compiler.hpp"
#include "templates/host_float.hpp"
#include "templates/reduce_rows/reduce_rows.hpp"
#include "templates/sources.hpp"
#include "tuner/compile_pool.hpp"
#include "tuner/tuner.hpp"

namespace jitune {
namespace {

using templates::reduce_rows::Params;
using templates::reduce_rows::ReduceRowsProblem;

const Family& fam() {
  return templates::reduce_rows::reduce_rows_family();
}

std::unique_ptr<Problem> problem(const std::string& dtype, const std::string& op, std::int64_t rows,
                                 std::int64_t cols) {
  return fam().make_problem(
      {{"dtype", dtype}, {"op", op}, {"rows", std::to_string(rows)}, {"cols", std::to_string(cols)}});
}

CallArgs call_args(DType dtype, std::int64_t op, std::int64_t rows, std::int64_t cols) {
  CallArgs args;
  args.add(static_cast<std::int64_t>(dtype)).add(op).add(rows).add(cols);
  return args;
}

Config heuristic(const std::unique_ptr<Problem>& p, const DeviceInfo& device) {
  return fam().heuristic(*p, device);
}

const ReduceRowsProblem& as_reduce(const std::unique_ptr<Problem>& p) {
  return static_cast<const ReduceRowsProblem&>(*p);
}

Config config(std::int64_t threads, std::int64_t pack, std::int64_t unroll, std::int64_t rows,
              std::int64_t split, std::int64_t cluster, std::int64_t peel = 0) {
  return Config{{"threads", threads}, {"pack", pack},   {"peel", peel},      {"unroll", unroll},
                {"rows", rows},       {"split", split}, {"cluster", cluster}};
}

// A workload of one dtype from float values, one row after the other.
Workload rows_of(DType dtype, const std::vector<float>& values) {
  Workload w;
  w.inputs.emplace_back(values.size() * dtype_size(dtype));
  for (std::size_t i = 0; i < values.size(); ++i) store_element(dtype, w.inputs[0].data(), i, values[i]);
  return w;
}

}  // namespace

TEST_CASE("reduce_rows is registered and its template is embedded") {
  CHECK(&family("reduce_rows") == &fam());
  CHECK(template_source("reduce_rows/reduce_rows.cuh").find("reduce_rows_cluster") != std::string::npos);
  CHECK(template_source("reduce_rows/reduce_rows_params.cuh").find("struct Params") != std::string::npos);
  CHECK(template_hash("reduce_rows/reduce_rows.cuh").size() == 16);
}

TEST_CASE("the call decodes dtype, op, rows, cols in that order; the signature parses back") {
  const auto p = fam().problem_from_call(call_args(DType::kFloat16, 1, 4096, 1000));
  CHECK(p->signature() == "cols=1000;dtype=float16;op=max;rows=4096");
  CHECK(fam().parse_problem(p->signature())->signature() == p->signature());
  CHECK(p->group() == "float16|op=max");
  CHECK(p->bytes_moved() == (4096.0 * 1000 + 4096) * 2);
  CHECK(p->features() == std::vector<double>{std::log2(4097.0), std::log2(1001.0)});
  // The public wrapper packs what the family reads.
  CHECK(reduce_rows_signature(8, 65536, ReduceOp::kSum, DType::kBFloat16) ==
        "cols=65536;dtype=bfloat16;op=sum;rows=8");
  CHECK(reduce_rows_signature(3, 7, ReduceOp::kMax, DType::kFloat32) ==
        problem("float32", "max", 3, 7)->signature());
  const auto& q = as_reduce(p);
  CHECK(q.op() == ReduceOp::kMax);
  CHECK(q.rows() == 4096);
  CHECK(q.cols() == 1000);
}

TEST_CASE("bad calls and bad problem options say what is wrong") {
  const auto from_call = [](DType dtype, std::int64_t op, std::int64_t rows, std::int64_t cols) {
    return fam().problem_from_call(call_args(dtype, op, rows, cols));
  };
  CHECK_THROWS_WITH_AS(from_call(DType::kFloat32, 0, -1, 5), "reduce_rows: rows is negative (-1)",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(from_call(DType::kFloat32, 0, 5, -2), "reduce_rows: cols is negative (-2)",
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(from_call(DType::kInt32, 0, 5, 5), doctest::Contains("int32 is not supported"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(from_call(DType::kFloat32, 2, 5, 5), doctest::Contains("op 2"), InvalidArgument);
  CHECK_THROWS_WITH_AS(from_call(DType::kFloat32, 1, 5, 0), doctest::Contains("max over rows of 0 elements"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(from_call(DType::kFloat32, 1, 0, 0), doctest::Contains("max over rows of 0 elements"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(from_call(DType::kFloat32, 0, 1, (std::int64_t{1} << 30) + 1),
                       doctest::Contains("exceeds 2^30"), InvalidArgument);
  CHECK_THROWS_WITH_AS(from_call(DType::kFloat32, 0, std::int64_t{1} << 31, 1),
                       doctest::Contains("exceeds 2^31 - 1"), InvalidArgument);
  CHECK_NOTHROW(from_call(DType::kFloat32, 0, 0, 0));  // an empty sum is legal
  CHECK_NOTHROW(from_call(DType::kBFloat16, 1, 0, 3));
  CHECK_THROWS_AS(reduce_rows_signature(2, 0, ReduceOp::kMax, DType::kFloat32), InvalidArgument);

  CHECK_THROWS_WITH_AS(fam().make_problem({{"dtype", "float32"}, {"op", "sum"}, {"rows", "4"}}),
                       doctest::Contains("missing 'cols'"), InvalidArgument);
  CHECK_THROWS_WITH_AS(problem("float32", "mean", 4, 4), doctest::Contains("op='mean'"), InvalidArgument);
  CHECK_THROWS_WITH_AS(problem("float32", "sum", 4, -4), doctest::Contains("cols='-4'"), InvalidArgument);
  CHECK_THROWS_WITH_AS(
      fam().make_problem({{"dtype", "float32"}, {"op", "sum"}, {"rows", "4x"}, {"cols", "4"}}),
      doctest::Contains("rows='4x'"), InvalidArgument);
  CHECK_THROWS_WITH_AS(
      fam().make_problem({{"dtype", "float32"}, {"op", "sum"}, {"rows", "4"}, {"cols", "4"}, {"dim", "1"}}),
      doctest::Contains("unknown option 'dim'"), InvalidArgument);
  CHECK_THROWS_AS(problem("float64", "sum", 4, 4), InvalidArgument);
  CHECK(problem("half", "sum", 4, 4)->signature() == "cols=4;dtype=float16;op=sum;rows=4");
}

TEST_CASE("buffers: x is rows x cols, y is rows; empty calls are shortcuts") {
  const auto p = problem("bfloat16", "sum", 37, 129);
  const auto specs = fam().buffers(*p);
  REQUIRE(specs.size() == 2);
  CHECK(specs[0].name == "x");
  CHECK(specs[0].role == BufferRole::kIn);
  CHECK(specs[0].extent_bytes() == 37 * 129 * 2);
  CHECK(specs[0].stride_alignment() == 2);  // rows of 258 bytes
  CHECK(specs[1].name == "y");
  CHECK(specs[1].role == BufferRole::kOut);
  CHECK(specs[1].extent_bytes() == 37 * 2);
  CHECK(fam().shortcut(*p).kind == Shortcut::Kind::kNone);

  CHECK(fam().shortcut(*problem("float32", "sum", 0, 100)).kind == Shortcut::Kind::kNothing);
  CHECK(fam().shortcut(*problem("float32", "max", 0, 100)).kind == Shortcut::Kind::kNothing);
  CHECK(fam().shortcut(*problem("float32", "sum", 0, 0)).kind == Shortcut::Kind::kNothing);
  const Shortcut zero = fam().shortcut(*problem("float16", "sum", 5, 0));
  CHECK(zero.kind == Shortcut::Kind::kZero);
  CHECK(zero.to == 1);
  CHECK(fam().buffers(*problem("float16", "sum", 5, 0))[0].extent_bytes() == 0);  // x is never touched
}

TEST_CASE("the heuristic is legal for every shape, dtype and device, and picks the kernel the shape needs") {
  for (int cc : {80, 90})
    for (const char* dtype : {"float32", "float16", "bfloat16"})
      for (const char* op : {"sum", "max"})
        for (std::int64_t rows : {1, 2, 3, 7, 100, 131, 132, 1000, 4096, 1 << 20})
          for (std::int64_t cols :
               {1, 2, 3, 7, 8, 31, 32, 64, 255, 256, 1000, 1024, 2048, 4097, 8192, 65536, 65537}) {
            const DeviceInfo dev = nominal_device(cc);
            const auto p = problem(dtype, op, rows, cols);
            const Config h = fam().heuristic(*p, dev);
            INFO("sm_", cc, " ", p->signature(), " ", h.text());
            CHECK(fam().validate(*p, h, dev).empty());
          }
  const DeviceInfo h100 = nominal_device(90), a100 = nominal_device(80);
  // Few long rows: one cluster of 8 blocks per row on sm_90, a workspace split on sm_80.
  CHECK(heuristic(problem("float32", "sum", 8, 65536), h100) == config(512, 4, 4, 1, 8, 1));
  CHECK(heuristic(problem("float32", "sum", 8, 65536), a100) == config(256, 4, 4, 1, 16, 0));
  // A block per row of 4096 floats, four 16-byte loads per thread.
  CHECK(heuristic(problem("float32", "max", 4096, 4096), h100) == config(256, 4, 4, 1, 1, 0));
  // A warp per row of 1024 floats, 8 loads in flight.
  CHECK(heuristic(problem("float32", "sum", 65536, 1024), h100) == config(32, 4, 8, 1, 1, 0));
  // Rows of 32 halves: a team of 4 threads per row, 4 rows per team.
  CHECK(heuristic(problem("float16", "max", 1 << 20, 32), h100) == config(4, 8, 1, 4, 1, 0));
  // Rows of any length read in 16-byte loads (each row's head and tail element by element).
  // Rows of odd lengths peel their heads and tails; a single row starts aligned and only has a tail.
  CHECK(heuristic(problem("float32", "sum", 1000, 4097), h100).at("pack") == 4);
  CHECK(heuristic(problem("float32", "sum", 1000, 4097), h100).at("peel") == 1);
  CHECK(heuristic(problem("float16", "sum", 4096, 50257), h100).at("peel") == 1);
  CHECK(heuristic(problem("float16", "sum", 4096, 50257), h100).at("pack") == 8);
  CHECK(heuristic(problem("float16", "sum", 1, 4097), h100).at("pack") == 8);
  CHECK(heuristic(problem("float16", "sum", 1, 4097), h100).at("peel") == 0);
  CHECK(heuristic(problem("float16", "sum", 4096, 4096), h100).at("peel") == 0);
}

TEST_CASE("constraints reject illegal and useless configs with a reason") {
  const DeviceInfo dev = nominal_device(90);
  const auto why = [&](const std::unique_ptr<Problem>& p, const Config& c, const DeviceInfo& d) {
    return fam().check(*p, c, d);
  };
  const auto few_long = problem("float32", "sum", 8, 65536);
  CHECK(why(few_long, config(256, 4, 4, 1, 8, 1), dev).empty());
  CHECK(why(few_long, config(256, 8, 1, 1, 1, 0), dev).find("16 bytes") != std::string::npos);
  CHECK(why(few_long, config(256, 4, 4, 1, 8, 1), nominal_device(80)).find("sm_90") != std::string::npos);
  CHECK(why(few_long, config(256, 4, 4, 1, 16, 1), dev).find("at most 8 blocks") != std::string::npos);
  CHECK(why(few_long, config(256, 4, 4, 1, 16, 0), dev).empty());  // the workspace split has no such limit
  CHECK(why(few_long, config(256, 4, 4, 1, 1, 1), dev).find("split >= 2") != std::string::npos);
  CHECK(why(few_long, config(1024, 4, 8, 1, 1, 0), dev).find("64 registers") != std::string::npos);
  CHECK(why(few_long, config(256, 4, 4, 2, 1, 0), dev).find("rows must be 1") != std::string::npos);
  CHECK(why(few_long, config(32, 4, 8, 1, 2, 0), dev).find("split must be 1") != std::string::npos);
  // A warp would make 512 passes over a row: the block kernels' job.
  CHECK(why(few_long, config(32, 4, 8, 1, 1, 0), dev).find("block kernels") != std::string::npos);
  CHECK(why(few_long, config(256, 2, 4, 1, 8, 1), dev).find("narrower ones only add passes") !=
        std::string::npos);
  DeviceInfo small = dev;
  small.max_threads_per_block = 512;
  CHECK(why(few_long, config(1024, 4, 4, 1, 1, 0), small).find("exceeds") != std::string::npos);
  // Many rows: splitting them buys nothing.
  CHECK(why(problem("float32", "sum", 4096, 65536), config(256, 4, 4, 1, 2, 0), dev).find("SMs") !=
        std::string::npos);
  // Rows of 4097 floats start at 4-byte steps: the widest pack reads them with peel 1 (never without), and a
  // narrower one only adds passes; aligned rows refuse peel 1 (the runtime's variant for a misaligned x).
  CHECK(why(problem("float32", "sum", 3, 4097), config(256, 4, 4, 1, 1, 0, 1), dev).empty());
  CHECK(why(problem("float32", "sum", 3, 4097), config(256, 4, 4, 1, 1, 0, 0), dev).find("need peel 1") !=
        std::string::npos);
  CHECK(why(problem("float32", "sum", 3, 4097), config(256, 2, 4, 1, 1, 0, 1), dev).find("narrower ones") !=
        std::string::npos);
  CHECK(why(problem("float32", "sum", 1, 4097), config(256, 4, 4, 1, 1, 0), dev).empty());
  CHECK(why(problem("float32", "sum", 1, 4097), config(256, 4, 4, 1, 1, 0, 1), dev).find("only adds work") !=
        std::string::npos);
  CHECK(why(problem("float32", "sum", 3, 4096), config(256, 4, 4, 1, 1, 0, 1), dev).find("only adds work") !=
        std::string::npos);
  CHECK(why(problem("float32", "sum", 3, 4097), config(256, 1, 4, 1, 1, 0, 1), dev).find("only adds work") !=
        std::string::npos);
  // Peeled teams: at most 4 rows at once; rows shorter than two packs take a narrower pack.
  CHECK(why(problem("float16", "sum", 1000, 33), config(8, 8, 1, 4, 1, 0, 1), dev).empty());
  CHECK(why(problem("float16", "sum", 1000, 33), config(8, 8, 1, 8, 1, 0, 1), dev).find("at most 4 rows") !=
        std::string::npos);
  CHECK(why(problem("float16", "sum", 1000, 15), config(2, 8, 1, 4, 1, 0, 1), dev).find("shorter than two") !=
        std::string::npos);
  CHECK(heuristic(problem("float16", "sum", 1000, 15), dev).at("pack") == 4);
  // Teams: no idle half, no redundant unroll, coalesced passes, rows at once only for one-pass rows.
  const auto short_rows = problem("float32", "sum", 1 << 20, 32);
  CHECK(why(short_rows, config(8, 4, 1, 4, 1, 0), dev).empty());
  CHECK(why(short_rows, config(16, 4, 1, 1, 1, 0), dev).find("half the team") != std::string::npos);
  CHECK(why(short_rows, config(8, 4, 2, 1, 1, 0), dev).find("at most 1 loads") != std::string::npos);
  CHECK(why(short_rows, config(1, 4, 8, 1, 1, 0), dev).find("coalesce") != std::string::npos);
  CHECK(why(short_rows, config(2, 4, 4, 1, 1, 0), dev).empty());  // 32-byte passes fill whole sectors
  CHECK(why(short_rows, config(4, 4, 2, 4, 1, 0), dev).empty());
  CHECK(why(short_rows, config(4, 4, 2, 8, 1, 0), dev).find("at most 8") != std::string::npos);
  CHECK(why(short_rows, config(4, 4, 1, 2, 1, 0), dev).find("one unrolled pass") != std::string::npos);
  CHECK(why(problem("float32", "sum", 3, 32), config(8, 4, 1, 8, 1, 0), dev).find("problem of 3 rows") !=
        std::string::npos);
  CHECK(why(short_rows, config(128, 4, 1, 1, 1, 0), dev).find("half the block") != std::string::npos);

  // The legal space: every config within 16-byte loads, the heuristic first, the count adds up.
  for (const auto& [name, signature] : fam().default_suite()) {
    const auto p = fam().parse_problem(signature);
    std::size_t pruned = 0;
    const auto legal = tuner::legal_candidates(fam(), *p, dev, pruned);
    INFO(name, " ", legal.size(), " legal");
    REQUIRE(!legal.empty());
    CHECK(legal.front() == fam().heuristic(*p, dev));
    CHECK(legal.size() + pruned == fam().space().size());
    CHECK(legal.size() < 200);  // a suite case tunes in seconds
    for (const Config& c : legal) CHECK(c.at("pack") * as_reduce(p).element_size() <= 16);
  }
}

TEST_CASE("default suite: 16 cases over both ops, every dtype, short to long rows, odd row lengths, views") {
  const auto suite = fam().default_suite();
  CHECK(suite.size() == 16);
  int ops[2] = {0, 0}, dtypes[3] = {0, 0, 0}, odd = 0, views = 0;
  for (const auto& [name, signature] : suite) {
    const auto p = fam().parse_problem(signature);
    CHECK(p->signature() == signature);
    CHECK(name.rfind("reduce_rows_", 0) == 0);
    ++ops[static_cast<int>(as_reduce(p).op())];
    ++dtypes[static_cast<int>(as_reduce(p).dtype())];
    odd += as_reduce(p).cols() % 2;
    // A view one element in: its class is the element size, named "_x+1".
    const bool view = name.ends_with("_x+1");
    views += view;
    CHECK(as_reduce(p).align() == (view ? as_reduce(p).element_size() : 16));
  }
  CHECK(views == 2);
  CHECK(odd == 2);
  CHECK(ops[0] > 0);
  CHECK(ops[1] > 0);
  for (int d : dtypes) CHECK(d > 0);
}

TEST_CASE("alignment classes: a view whose rows share its offset is a problem of its own; peel 1 reads it") {
  const DeviceInfo dev = nominal_device(90);
  const auto aligned = problem("float16", "sum", 4096, 4096);
  const auto refine = [&](const Problem& p, std::uint8_t x_class) {
    const std::uint8_t classes[] = {x_class, 2};
    return fam().with_alignment(p, classes);
  };
  CHECK(refine(*aligned, 16) == nullptr);  // aligned: the problem as it is
  const auto view = refine(*aligned, 2);
  REQUIRE(view != nullptr);
  CHECK(view->signature() == "align=2;cols=4096;dtype=float16;op=sum;rows=4096");
  CHECK(fam().parse_problem(view->signature())->signature() == view->signature());
  CHECK(view->group() == aligned->group());  // the guided search seeds from the aligned records
  CHECK(view->features() == aligned->features());  // the class is in the signature, not the distance
  CHECK(fam().buffers(*view)[0].placement == 2);  // the tuner places x 2 bytes past an aligned address
  CHECK(fam().buffers(*aligned)[0].placement == 16);
  CHECK(refine(*aligned, 8)->signature().starts_with("align=8;"));
  // Every legal config of the view reads rows off the pack: peel 1 wherever the pack is wider than the class,
  // and the default is legal.
  std::size_t pruned = 0;
  const auto legal = tuner::legal_candidates(fam(), *view, dev, pruned);
  REQUIRE(!legal.empty());
  CHECK(legal.front() == fam().heuristic(*view, dev));
  for (const Config& c : legal) CHECK(c.at("peel") == (c.at("pack") * 2 > 2 ? 1 : 0));
  CHECK(fam().check(*view, config(256, 8, 2, 1, 1, 0), dev).find("need peel 1") != std::string::npos);
  // Rows of a pitch off 16 bytes start everywhere whatever x's alignment: the aligned problem (peel 1) serves
  // them, so no refinement, and such a problem refuses a class.
  const auto odd = problem("float16", "sum", 4096, 50257);
  CHECK(refine(*odd, 2) == nullptr);
  CHECK_THROWS_WITH_AS(fam().make_problem({{"dtype", "float16"}, {"op", "sum"}, {"rows", "4096"},
                                           {"cols", "50257"}, {"align", "2"}}),
                       doctest::Contains("starts the rows at every offset"), InvalidArgument);
  // One row: its class is x's, whatever its length.
  const auto row = problem("float32", "max", 1, 1001);
  REQUIRE(refine(*row, 4) != nullptr);
  CHECK(refine(*row, 4)->signature() == "align=4;cols=1001;dtype=float32;op=max;rows=1");
  // Classes below the element size (a pointer the runtime refuses first) and empty problems are not refined;
  // bad classes are refused with the reason.
  CHECK(refine(*problem("float32", "sum", 8, 64), 2) == nullptr);
  CHECK(refine(*problem("float32", "sum", 0, 64), 4) == nullptr);
  for (const char* bad : {"3", "32", "x"})
    CHECK_THROWS_AS(fam().make_problem({{"dtype", "float32"}, {"op", "sum"}, {"rows", "8"}, {"cols", "64"},
                                        {"align", bad}}),
                    InvalidArgument);
  CHECK_THROWS_WITH_AS(fam().make_problem({{"dtype", "float32"}, {"op", "sum"}, {"rows", "8"}, {"cols", "64"},
                                           {"align", "2"}}),
                       doctest::Contains("align 2 is not an alignment class of float32"), InvalidArgument);
}

TEST_CASE("variants: an x off the pack's alignment runs the tuned config with peel 1") {
  const auto p = problem("float16", "sum", 4096, 4096);
  const Config tuned = config(256, 8, 2, 1, 1, 0);
  const void* pointers[] = {reinterpret_cast<const void*>(0x1002), reinterpret_cast<const void*>(0x2000)};
  const auto slot_for = [&](const Config& c, std::uint8_t alignment) {
    const std::uint8_t classes[] = {alignment, 2};
    return fam().variant(*p, c, Bindings{pointers, classes, nullptr, {}});
  };
  CHECK(slot_for(tuned, 16) == 0);
  CHECK(slot_for(tuned, 8) == 1);
  CHECK(slot_for(tuned, 2) == 1);
  CHECK(slot_for(config(256, 4, 2, 1, 1, 0), 8) == 0);  // 8-byte packs of an 8-byte aligned x
  CHECK(slot_for(config(256, 4, 2, 1, 1, 0), 4) == 1);
  CHECK(slot_for(config(256, 8, 2, 1, 1, 0, 1), 2) == 0);  // a tuned peel already reads any row
  const Config peeled = fam().variant_config(*p, tuned, 1, nominal_device(90));
  CHECK(peeled == config(256, 8, 2, 1, 1, 0, 1));
  CHECK(fam().variant_config(*p, tuned, 0, nominal_device(90)) == tuned);
}

TEST_CASE("workspace, kernel parameters and launch shapes") {
  const DeviceInfo h100 = nominal_device(90), a100 = nominal_device(80);
  const auto p = problem("float32", "sum", 8, 65536);
  int x_mem = 0, y_mem = 0;
  char workspace[1024];
  const void* pointers[] = {&x_mem, &y_mem};
  const std::uint8_t classes[] = {16, 4};
  const Bindings b{pointers, classes, workspace, {}};
  const auto params_of = [&](const Config& c) {
    KernelArgs args;
    fam().kernel_args(*p, c, b, args);
    REQUIRE(args.count() == 1);
    Params out;
    std::memcpy(&out, args.pointers()[0], sizeof out);
    return out;
  };

  SUBCASE("workspace split: partials then zeroed counters; a grid-stride grid") {
    const Config c = config(256, 4, 4, 1, 16, 0);
    const LaunchPrep prep = fam().prep(*p, c);
    CHECK(prep.workspace_bytes == 8 * 16 * 4 + 8 * 4);
    CHECK(prep.zero_begin == 8 * 16 * 4);
    CHECK(prep.zero_end == prep.workspace_bytes);
    const Params params = params_of(c);
    CHECK(params.x == reinterpret_cast<std::uintptr_t>(&x_mem));
    CHECK(params.y == reinterpret_cast<std::uintptr_t>(&y_mem));
    CHECK(params.partials == reinterpret_cast<std::uintptr_t>(workspace));
    CHECK(params.arrivals == reinterpret_cast<std::uintptr_t>(workspace) + 8 * 16 * 4);
    CHECK(params.rows == 8);
    CHECK(params.cols == 65536);
    CHECK(params.split == 16);
    const LaunchShape s = fam().launch_shape(*p, c, a100);
    CHECK(s.grid.x == 8 * 16);
    CHECK(s.block.x == 256);
    CHECK_FALSE(s.programmatic);
    CHECK(fam().source(*p, c).name_expression ==
          "jitune::templates::reduce_rows::reduce_rows_block<0, float, 256, 4, false, 4, true>");
  }
  SUBCASE("cluster: no workspace, one block per (row, slice), programmatic launch on sm_90") {
    const Config c = config(512, 4, 4, 1, 8, 1);
    CHECK(fam().prep(*p, c).workspace_bytes == 0);
    const Params params = params_of(c);
    CHECK(params.partials == 0);
    CHECK(params.arrivals == 0);
    CHECK(params.split == 8);
    const LaunchShape s = fam().launch_shape(*p, c, h100);
    CHECK(s.grid.x == 64);
    CHECK(s.block.x == 512);
    CHECK(s.programmatic);
    CHECK(fam().source(*p, c).name_expression ==
          "jitune::templates::reduce_rows::reduce_rows_cluster<0, float, 512, 4, false, 4, 8>");
  }
  SUBCASE("teams: 256-thread blocks over rows, capped at 16 waves") {
    const auto q = problem("bfloat16", "max", 1 << 20, 32);
    const Config c = config(4, 8, 1, 4, 1, 0);
    CHECK(fam().prep(*q, c).workspace_bytes == 0);
    const LaunchShape s = fam().launch_shape(*q, c, h100);
    CHECK(s.block.x == 256);
    CHECK(s.grid.x == std::min<unsigned>((1u << 20) / (64 * 4), 132 * 8 * 16));
    CHECK(fam().source(*q, c).name_expression ==
          "jitune::templates::reduce_rows::reduce_rows_group<1, __nv_bfloat16, 4, 8, false, 1, 4>");
    const auto r = problem("float16", "sum", 3, 5);
    CHECK(fam().launch_shape(*r, config(8, 1, 1, 1, 1, 0), h100).grid.x == 1);
  }
}

TEST_CASE("workload: random, never zero, one row after the other") {
  const auto p = problem("float16", "sum", 33, 65);
  const Workload w = fam().workload(*p, 7);
  REQUIRE(w.inputs.size() == 1);
  CHECK(w.inputs[0].size() == 33 * 65 * 2);
  CHECK(w.output_bytes == std::vector<std::size_t>{33 * 2});
  const auto specs = fam().buffers(*p);  // what the tuner's harness binds is what the runtime checks
  CHECK(w.inputs[0].size() == specs[0].extent_bytes());
  CHECK(w.output_bytes[0] == specs[1].extent_bytes());
  for (std::size_t i = 0; i < 33 * 65; ++i)
    REQUIRE(load_element(DType::kFloat16, w.inputs[0].data(), i) != 0.0);
  CHECK(fam().workload(*p, 8).inputs[0] != w.inputs[0]);
}

TEST_CASE("reference: hand-computed rows, NaN and infinities as torch has them") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {1,    2,    3.5f,   // sum 6.5, max 3.5
                                -1,   -2,   -0.5f,  // sum -3.5, max -0.5
                                4,    nan,  9,      // NaN either way
                                inf,  1,    -inf,   // sum NaN, max inf
                                -inf, -inf, -8};    // sum -inf, max -8
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    INFO(dtype_name(dtype));
    const std::string name(dtype_name(dtype));
    const Workload w = rows_of(dtype, x);
    const auto sum = fam().reference(*problem(name, "sum", 5, 3), w)[0];
    const auto max = fam().reference(*problem(name, "max", 5, 3), w)[0];
    REQUIRE(sum.size() == 5 * dtype_size(dtype));
    CHECK(load_element(dtype, sum.data(), 0) == 6.5);
    CHECK(load_element(dtype, sum.data(), 1) == -3.5);
    CHECK(std::isnan(load_element(dtype, sum.data(), 2)));
    CHECK(std::isnan(load_element(dtype, sum.data(), 3)));
    CHECK(load_element(dtype, sum.data(), 4) == -inf);
    CHECK(load_element(dtype, max.data(), 0) == 3.5);
    CHECK(load_element(dtype, max.data(), 1) == -0.5);
    CHECK(std::isnan(load_element(dtype, max.data(), 2)));
    CHECK(load_element(dtype, max.data(), 3) == inf);
    CHECK(load_element(dtype, max.data(), 4) == -8);
  }
  // NaN first or last in a row: max still gives NaN.
  const Workload w = rows_of(DType::kFloat32, {nan, 1, 2, 1, 2, nan});
  const auto max = fam().reference(*problem("float32", "max", 2, 3), w)[0];
  CHECK(std::isnan(load_element(DType::kFloat32, max.data(), 0)));
  CHECK(std::isnan(load_element(DType::kFloat32, max.data(), 1)));
  // A half sum is rounded once, from the exact sum: 2048 + 1 + 1 is 2050 (2048 + 1 alone rounds to 2048).
  const auto half =
      fam().reference(*problem("float16", "sum", 1, 3), rows_of(DType::kFloat16, {2048, 1, 1}))[0];
  CHECK(load_element(DType::kFloat16, half.data(), 0) == 2050);
}

TEST_CASE("tolerances: max is exact; a sum tolerates reordering but not one element lost") {
  const auto p = problem("float32", "sum", 64, 65536);
  const Workload w = fam().workload(*p, 11);
  const auto expected = fam().reference(*p, w)[0];
  const OutputCheck check = fam().output_check(*p, 0);
  CHECK(check.dtype == DType::kFloat32);
  // The sums in float, row by row in another order (pairs of halves): within the tolerance.
  std::vector<std::byte> reordered(expected.size()), missing(expected.size());
  for (std::uint64_t r = 0; r < 64; ++r) {
    float halves[2] = {0, 0};
    for (std::uint64_t c = 0; c < 65536; ++c)
      halves[c % 2] += static_cast<float>(load_element(DType::kFloat32, w.inputs[0].data(), r * 65536 + c));
    store_element(DType::kFloat32, reordered.data(), r, halves[0] + halves[1]);
    const double first = load_element(DType::kFloat32, w.inputs[0].data(), r * 65536);
    store_element(DType::kFloat32, missing.data(), r,
                  load_element(DType::kFloat32, expected.data(), r) - first);
  }
  CHECK(compare_host(check, reordered.data(), expected.data(), 64).ok());
  CHECK(compare_host(check, missing.data(), expected.data(), 64).mismatches == 64);
  const OutputCheck exact = fam().output_check(*problem("bfloat16", "max", 4, 4), 0);
  CHECK(exact.dtype == DType::kBFloat16);
  CHECK(exact.rtol == 0);
  CHECK(exact.atol == 0);
  CHECK(fam().output_check(*problem("float16", "sum", 4, 4), 0).dtype == DType::kFloat16);
}

TEST_CASE("NVRTC compiles every legal config for sm_80 and sm_90, without spills") {
  Compiler compiler;
  const char* const problems[] = {
      "cols=65536;dtype=float32;op=sum;rows=8",     // blocks, workspace and cluster splits
      "cols=32;dtype=float16;op=max;rows=1048576",  // teams, several rows at once
      "cols=4097;dtype=bfloat16;op=max;rows=3",     // odd rows: heads and tails, every kind
      "cols=1000;dtype=float16;op=sum;rows=1",      // one row: a partial last pack
  };
  for (int cc : {80, 90})
    for (const char* signature : problems) {
      const auto p = fam().parse_problem(signature);
      const auto r = tuner::dry_run(compiler, fam(), *p, nominal_device(cc), 2);
      INFO("sm_", cc, " ", signature);
      REQUIRE(!r.candidates.empty());
      for (const auto& c : r.candidates) {
        INFO(c.config.text(), "\n", c.reason);
        CHECK(c.status == "ok");
        CHECK(c.resources.registers > 0);
        CHECK_FALSE(c.resources.spills());
      }
    }
  // The runtime's peel variants of aligned problems' configs (an x off its alignment): compiled the same way.
  for (const char* signature : {"cols=4096;dtype=float32;op=sum;rows=8", "cols=32;dtype=float16;op=max;rows=1048576",
                                "cols=1024;dtype=bfloat16;op=sum;rows=65536"}) {
    const auto p = fam().parse_problem(signature);
    std::size_t pruned = 0;
    std::vector<Config> peeled;
    for (const Config& c : tuner::legal_candidates(fam(), *p, nominal_device(90), pruned))
      if (c.at("pack") > 1) peeled.push_back(fam().variant_config(*p, c, 1, nominal_device(90)));
    REQUIRE(!peeled.empty());
    tuner::CompilePool pool(compiler, fam(), *p, peeled, "sm_90", 0, true);
    std::size_t compiled = 0;
    while (auto batch = pool.next())
      for (std::size_t b = 0; b < batch->candidates.size(); ++b) {
        INFO(signature, " ", peeled[batch->candidates[b]].text(), "\n", batch->output->log);
        REQUIRE(batch->output->ok);
        const auto& res = batch->output->resources.at(batch->unit[b]);
        CHECK(res.registers > 0);
        CHECK_FALSE(res.spills());
        ++compiled;
      }
    CHECK(compiled == peeled.size());
  }
}

}  // namespace jitune
