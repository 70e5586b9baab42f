// The family contract without a GPU: buffer extents and alignment classes, call values read back, every family's
// call path agreeing with its signature path, its buffers matching its workload, and the kernel variants the
// pointers' alignment selects.
#include <doctest/doctest.h>

#include <algorithm>

#include <jitune/jitune.hpp>

#include "templates/family.hpp"

namespace jitune {
namespace {

const void* address(std::uintptr_t a) { return reinterpret_cast<const void*>(a); }

TEST_CASE("buffer extents and alignment classes") {
  BufferSpec flat{"x", BufferRole::kIn, DType::kFloat16, {1000}, {}};
  CHECK(flat.extent_bytes() == 2000);
  CHECK(flat.stride_alignment() == 16);
  BufferSpec rows{"x", BufferRole::kIn, DType::kFloat32, {7, 9}, {}};  // rows of 36 bytes
  CHECK(rows.extent_bytes() == 7 * 9 * 4);
  CHECK(rows.stride_alignment() == 4);
  BufferSpec one_row{"x", BufferRole::kIn, DType::kFloat32, {1, 9}, {}};  // a size-1 dim's stride never matters
  CHECK(one_row.stride_alignment() == 16);
  BufferSpec strided{"x", BufferRole::kIn, DType::kFloat32, {3, 4}, {10, 2}};  // a view: last element at 2*10+3*2
  CHECK(strided.extent_bytes() == (2 * 10 + 3 * 2 + 1) * 4);
  CHECK(strided.stride_alignment() == 8);
  BufferSpec empty{"bias", BufferRole::kIn, DType::kFloat32, {0}, {}, true};
  CHECK(empty.extent_bytes() == 0);

  CHECK(alignment_class(address(0x1000), 16) == 16);
  CHECK(alignment_class(address(0x1008), 16) == 8);
  CHECK(alignment_class(address(0x1002), 16) == 2);
  CHECK(alignment_class(address(0x1001), 16) == 1);
  CHECK(alignment_class(address(0x1000), 4) == 4);  // the row pitch limits it as much as the pointer
}

TEST_CASE("call values read back in order; too few values or a bad dtype code is the caller's error") {
  CallArgs args;
  const std::int64_t shape[] = {2, 3, 4};
  args.add(5).add_double(0.25).add_list(shape).text("z = x").scalar(2.5);
  CallReader in(args);
  CHECK(in.next() == 5);
  CHECK(in.next_double() == 0.25);
  CHECK(in.next_list() == std::vector<std::int64_t>{2, 3, 4});
  CHECK(in.text() == "z = x");
  CHECK(args.scalars().size() == 1);
  CHECK_THROWS_WITH_AS(in.next(), doctest::Contains("fewer than its family reads"), InvalidArgument);

  CallArgs codes;
  codes.add(8).add(9).add(-1).add(3);
  CallReader dtypes(codes);
  CHECK(dtypes.next_dtype() == DType::kInt64);
  CHECK_THROWS_WITH_AS(dtypes.next_dtype(), doctest::Contains("dtype code 9"), InvalidArgument);
  CHECK_THROWS_WITH_AS(dtypes.next_dtype(), doctest::Contains("dtype code -1"), InvalidArgument);
  CHECK_THROWS_WITH_AS(dtypes.next_list(), doctest::Contains("list of 3"), InvalidArgument);
}

// The call path (what the public wrappers pack) and the signature path (tuning, explain) build the same problem.
TEST_CASE("every family: call_signature matches the problem the options describe") {
  CHECK(elementwise_signature("z = x * y", 1000, DType::kFloat16) ==
        family("elementwise").make_problem({{"expr", "z = x * y"}, {"dtype", "float16"}, {"n", "1000"}})->signature());
  CHECK(permute_signature(std::vector<std::int64_t>{4, 5, 6}, std::vector<int>{2, 0, 1}, DType::kFloat32) ==
        "dtype=float32;perm=2,0,1;shape=4x5x6");
  CHECK(dot_signature(99, DType::kBFloat16) == "dtype=bfloat16;n=99;op=dot");
  CHECK(index_add_signature(10, 20, 3, DType::kFloat16, DType::kInt32) ==
        "count=20;dtype=float16;index=int32;op=index_add;row_length=3;rows=10");
  Conv2dParams conv;
  conv.input = {1, 3, 8, 8};
  conv.weight = {4, 3, 3, 3};
  const std::string sig = conv2d_signature(conv, DType::kFloat32, true);
  CHECK(family("conv2d").parse_problem(sig)->signature() == sig);
  UpsampleNearest2d up;
  up.n = 1, up.c = 2, up.in_h = 3, up.in_w = 4, up.scale_h = 2.0, up.scale_w = 2.0;
  const std::string usig = upsample_nearest2d_signature(up, true);
  CHECK(usig.find("direction=backward") != std::string::npos);
  CHECK(family("upsample_nearest2d").parse_problem(usig)->signature() == usig);
  // Validation happens on the call path too, with the op's own words.
  CHECK_THROWS_WITH_AS(index_add_signature(-1, 2, 3, DType::kFloat16, DType::kInt64), "index_add: dst_rows is negative (-1)",
                       InvalidArgument);
  CHECK_THROWS_AS(permute_signature(std::vector<std::int64_t>{4, 5}, std::vector<int>{0, 0}, DType::kFloat32),
                  InvalidArgument);
}

// For each family and a small problem: the workload's inputs and outputs are exactly the buffers' kIn and
// kOut / kInOut roles, in order and size, so the tuner's harness binds what the runtime binds.
TEST_CASE("every family: buffers match the workload the tuner binds") {
  const std::pair<const char*, const char*> cases[] = {
      {"elementwise", "dtype=float32;expr=out = a * b + c;n=1000"},
      {"elementwise_view", "dtype=float16;expr=y = x * s + b;layout=rows;shape=30,7;strides=9,1|7,1|0,0|0,1"},
      {"elementwise_view", "dtype=float32;expr=y = x * s + b;layout=rows;scalars=2;shape=30,7;"
                           "strides=9,1|7,1|0,0|0,1"},
      {"permute", "dtype=float16;perm=1,0;shape=33x65"},
      {"upsample_nearest2d",
       "c=3;direction=backward;dtype=float32;in_h=5;in_w=6;layout=nhwc;mode=nearest;n=2;out_h=11;out_w=13"},
      {"scatter_add", "count=50;dtype=float16;index=int64;op=index_add;row_length=3;rows=17"},
      {"scatter_add", "dtype=float32;n=999;op=dot"},
      {"conv2d", "bias=0;c=3;dilation_h=1;dilation_w=1;dtype=float32;h=10;k=4;layout=nchw;n=1;pad_h=1;pad_w=1;r=3;s=3;"
                 "stride_h=1;stride_w=1;w=11"},
  };
  for (const auto& [name, signature] : cases) {
    INFO(name, " ", signature);
    const Family& f = family(name);
    const auto problem = f.parse_problem(signature);
    const Workload w = f.workload(*problem, 3);
    std::size_t in = 0, out = 0;
    for (const BufferSpec& spec : f.buffers(*problem)) {
      if (spec.optional && spec.extent_bytes() == 0) continue;
      if (spec.role == BufferRole::kIn) {
        REQUIRE(in < w.inputs.size());
        CHECK(w.inputs[in++].size() == spec.extent_bytes());
      } else {
        REQUIRE(out < w.output_bytes.size());
        CHECK(w.output_bytes[out++] == spec.extent_bytes());
      }
    }
    CHECK(in == w.inputs.size());
    CHECK(out == w.output_bytes.size());
  }
}

TEST_CASE("shortcuts: empty calls do nothing, identities copy, an empty dot writes zero") {
  const Family& pm = family("permute");
  CHECK(pm.shortcut(*pm.parse_problem("dtype=float32;perm=0,2,1;shape=4x1x5")).kind == Shortcut::Kind::kCopy);
  CHECK(pm.shortcut(*pm.parse_problem("dtype=float32;perm=0,2,1;shape=4x0x5")).kind == Shortcut::Kind::kNothing);
  CHECK(pm.shortcut(*pm.parse_problem("dtype=float32;perm=1,0;shape=4x5")).kind == Shortcut::Kind::kNone);
  const Family& sa = family("scatter_add");
  const Shortcut zero = sa.shortcut(*sa.parse_problem("dtype=float16;n=0;op=dot"));
  CHECK(zero.kind == Shortcut::Kind::kZero);
  CHECK(zero.to == 2);
  CallArgs empty_add;
  empty_add.add(0).add(static_cast<std::int64_t>(DType::kFloat16)).add(static_cast<std::int64_t>(DType::kInt64));
  empty_add.add(0).add(4).add(4).add(3);  // no destination rows
  const auto p = sa.problem_from_call(empty_add);
  CHECK(sa.shortcut(*p).kind == Shortcut::Kind::kNothing);
  CHECK(sa.buffers(*p)[1].index_bound == 0);  // with check_indices, every index is out of range
  const Family& ew = family("elementwise");
  CHECK(ew.shortcut(*ew.parse_problem("dtype=float32;expr=z = x;n=0")).kind == Shortcut::Kind::kNothing);
}

TEST_CASE("variants: elementwise keeps its tuned pack for any alignment; permute narrows to the pointers") {
  const Family& ew = family("elementwise");
  const auto p = ew.parse_problem("dtype=float16;expr=z = x * y;n=4096");
  const Config tuned{{"pack", 8}, {"block", 256}, {"unroll", 1}, {"waves", 4}};
  auto slot_for = [&](std::uintptr_t x, std::uintptr_t y, std::uintptr_t z) {
    const void* pointers[] = {address(x), address(y), address(z)};
    const std::uint8_t alignment[] = {16, 16, 16};
    return ew.variant(*p, tuned, Bindings{pointers, alignment, nullptr, {}});
  };
  // One kernel for every alignment: a shared misalignment is peeled, a mixed one realigned in registers.
  CHECK(slot_for(0x1000, 0x2000, 0x3000) == 0);
  CHECK(slot_for(0x1002, 0x2002, 0x3002) == 0);
  CHECK(slot_for(0x1002, 0x2000, 0x3000) == 0);
  CHECK(slot_for(0x1004, 0x2000, 0x3008) == 0);

  const Family& pm = family("permute");
  const auto q = pm.parse_problem("dtype=float32;perm=1,0;shape=64x64");
  const void* pointers[] = {address(0x1000), address(0x2004)};
  const std::uint8_t alignment[] = {16, 4};
  CHECK(pm.variant(*q, pm.heuristic(*q, DeviceInfo{}), Bindings{pointers, alignment, nullptr, {}}) == 2);
}

}  // namespace
// A record's template hash is its config's entry template's (Family::template_of): the program of that config must
// include exactly that template, or a record would stay current while the code it runs changed.
TEST_CASE("every family: a config's program includes its own entry template, one of the family's templates") {
  const DeviceInfo device = nominal_device(90);
  for (const Family* f : families()) {
    const std::vector<std::string> hashes = template_hashes(*f);
    const std::vector<std::string_view> names = f->templates();
    REQUIRE(names.size() == hashes.size());
    CHECK(std::find(names.begin(), names.end(), f->template_name()) != names.end());
    for (const auto& [case_name, signature] : f->default_suite()) {
      INFO(f->name(), " ", case_name);
      const auto problem = f->parse_problem(signature);
      const Config config = f->heuristic(*problem, device);
      const std::string_view entry = f->template_of(config);
      CHECK(std::find(names.begin(), names.end(), entry) != names.end());
      const std::string program = f->source(*problem, config).program;
      CHECK(program.find("#include \"" + std::string(entry) + "\"") != std::string::npos);
      CHECK(std::find(hashes.begin(), hashes.end(), config_template_hash(*f, config)) != hashes.end());
      CHECK(record_current(*f, config_template_hash(*f, config), config.text()));
      CHECK_FALSE(record_current(*f, "0123456789abcdef", config.text()));
    }
  }
}

}  // namespace jitune
