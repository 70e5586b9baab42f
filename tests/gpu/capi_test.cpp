// GPU tests of the C ABI (libjitune.so): every op through its C function and through jitune_call, on the
// family's random inputs with poisoned outputs, against the CPU reference (twice: the warm path too); NULL,
// misaligned and host pointers and out-of-range indices rejected with the argument named; device facts and
// cache warnings; explain; tune with a small budget, then explain says exact; tuning on first use from the
// options; the cache's export / import round trip into a second runtime; ops on a non-blocking stream.
#include <doctest/doctest.h>

#include <jitune/jitune.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include <jitune/ops.hpp>

#include "c_runtime.hpp"
#include "gpu_util.hpp"
#include "templates/family.hpp"

namespace jitune::test {
namespace {

using nlohmann::json;

#define CHECK_OK(call)                                                                                       \
  do {                                                                                                       \
    const jitune_status status_ = (call);                                                                    \
    CHECK_MESSAGE(status_ == JITUNE_OK, #call, ": ", jitune_status_name(status_), " ", jitune_last_error()); \
  } while (0)

// A text through the caller-buffer protocol: a size query, then a buffer of that size.
std::string text_of(const std::function<jitune_status(char*, size_t, size_t*)>& write) {
  size_t required = 0;
  const jitune_status probe = write(nullptr, 0, &required);
  REQUIRE_MESSAGE(probe == JITUNE_ERROR_BUFFER_TOO_SMALL, jitune_status_name(probe), " ",
                  jitune_last_error());
  std::string text(required, '\0');
  const jitune_status status = write(text.data(), text.size(), &required);
  REQUIRE_MESSAGE(status == JITUNE_OK, jitune_status_name(status), " ", jitune_last_error());
  text.resize(required - 1);
  return text;
}

json explain(jitune_runtime* rt, const char* family, const std::string& signature) {
  return json::parse(text_of([&](char* out, size_t size, size_t* required) {
    return jitune_explain(rt, family, signature.c_str(), out, size, required);
  }));
}

void synchronize() {
  JITUNE_CU_CHECK(cuCtxSynchronize());
}

constexpr std::size_t kGuard = 64;

// One problem's device buffers in the family's buffer order: inputs from the family's random (never zero)
// workload, outputs poisoned with 0xFF or holding their initial values (accumulating ops), each buffer
// `offset` bytes into its allocation and followed by kGuard poisoned bytes.
class Workspace {
 public:
  Workspace(std::string_view family_name, const std::string& signature, std::size_t offset = 0,
            std::uint64_t seed = 7)
      : family_(family(family_name)),
        problem_(family_.parse_problem(signature)),
        work_(family_.workload(*problem_, seed)),
        expected_(family_.reference(*problem_, work_)),
        specs_(family_.buffers(*problem_)),
        offset_(offset) {
    for (const BufferSpec& spec : specs_) {
      const std::uint64_t extent = spec.extent_bytes();
      if (spec.optional && extent == 0) {
        buffers_.push_back(nullptr);
        pointers_.push_back(nullptr);
        continue;
      }
      buffers_.push_back(std::make_unique<Buffer>(offset + extent + kGuard, 0));
      pointers_.push_back(buffers_.back()->at(offset));
    }
    reset();
  }

  // Inputs uploaded, outputs poisoned or set to their initial values, guards poisoned.
  void reset() const {
    std::size_t in = 0, out = 0;
    for (std::size_t i = 0; i < specs_.size(); ++i) {
      if (!buffers_[i]) continue;
      buffers_[i]->poison();
      if (specs_[i].role == BufferRole::kIn) {
        buffers_[i]->upload(work_.inputs.at(in++), offset_);
      } else {
        if (out < work_.initial_outputs.size() && !work_.initial_outputs[out].empty())
          buffers_[i]->upload(work_.initial_outputs[out], offset_);
        ++out;
      }
    }
  }

  // Every output against the reference (the family's tolerance), its guard bytes still poisoned.
  // Synchronizes.
  void verify(const std::string& what) const {
    synchronize();
    std::size_t out = 0;
    for (std::size_t i = 0; i < specs_.size(); ++i) {
      if (specs_[i].role == BufferRole::kIn || !buffers_[i]) continue;
      const std::vector<std::byte>& expected = expected_.at(out);
      const OutputCheck check = family_.output_check(*problem_, out);
      ++out;
      const std::uint64_t count = expected.size() / dtype_size(check.dtype);
      const std::vector<std::byte> got = buffers_[i]->download(expected.size(), offset_);
      const CompareResult r = compare_host(check, got.data(), expected.data(), count);
      INFO(what, ": ", family_.name(), " ", problem_->signature(), " output '", specs_[i].name, "'");
      CHECK_MESSAGE(r.ok(), r.describe(count, check));
      const std::uint64_t end = offset_ + specs_[i].extent_bytes();
      for (std::byte b : buffers_[i]->download(kGuard, end)) REQUIRE(b == std::byte{0xFF});
    }
  }

  const void* const* pointers() const { return pointers_.data(); }
  std::size_t size() const { return pointers_.size(); }
  void* at(std::size_t i) const { return const_cast<void*>(pointers_.at(i)); }
  const Workload& workload() const { return work_; }
  const std::vector<std::byte>& expected(std::size_t output) const { return expected_.at(output); }
  Buffer& buffer(std::size_t i) const { return *buffers_.at(i); }
  std::size_t offset() const { return offset_; }

 private:
  const Family& family_;
  std::unique_ptr<Problem> problem_;
  Workload work_;
  std::vector<std::vector<std::byte>> expected_;
  std::vector<BufferSpec> specs_;
  std::size_t offset_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  std::vector<const void*> pointers_;
};

// Runs `op` on a fresh workspace twice (the first call and the warm path), verifying each time.
void run_twice(const Workspace& w, const std::function<jitune_status()>& op, const std::string& what) {
  for (int round = 0; round < 2; ++round) {
    w.reset();
    const jitune_status status = op();
    REQUIRE_MESSAGE(status == JITUNE_OK, what, ": ", jitune_status_name(status), " ", jitune_last_error());
    w.verify(what + (round ? " (warm)" : " (first)"));
  }
}

jitune_upsample_nearest2d_shape upsample(std::int64_t n, std::int64_t c, std::int64_t in_h, std::int64_t in_w,
                                         double scale_h, double scale_w, jitune_image_layout layout,
                                         jitune_nearest_mode mode, jitune_dtype dtype) {
  jitune_upsample_nearest2d_shape s{};
  s.struct_size = sizeof s;
  s.n = n;
  s.c = c;
  s.in_h = in_h;
  s.in_w = in_w;
  s.scale_h = scale_h;
  s.scale_w = scale_w;
  s.layout = layout;
  s.mode = mode;
  s.dtype = dtype;
  return s;
}

jitune_conv2d_params conv2d(std::initializer_list<std::int64_t> input,
                            std::initializer_list<std::int64_t> weight, std::int64_t stride,
                            std::int64_t padding, std::int64_t dilation) {
  jitune_conv2d_params p{};
  p.struct_size = sizeof p;
  std::copy(input.begin(), input.end(), p.input);
  std::copy(weight.begin(), weight.end(), p.weight);
  p.stride[0] = p.stride[1] = stride;
  p.padding[0] = p.padding[1] = padding;
  p.dilation[0] = p.dilation[1] = dilation;
  return p;
}

}  // namespace

TEST_CASE("every op through its C function matches the CPU reference") {
  TempDir dir;
  CRuntime crt(dir);
  jitune_runtime* rt = crt.get();

  SUBCASE("elementwise") {
    struct Case {
      const char* expression;
      std::int64_t n;
      jitune_dtype dtype;
      std::size_t inputs;
    };
    for (const Case& c : {Case{"z = x * y + 1", 1000003, JITUNE_FLOAT32, 2},
                          Case{"y = x > 0 ? x : 0.1f * x", 4097, JITUNE_FLOAT16, 1},
                          Case{"out = a * b + c", 777, JITUNE_BFLOAT16, 3}}) {
      const std::string sig = text_of([&](char* o, size_t s, size_t* r) {
        return jitune_elementwise_signature(c.expression, c.n, c.dtype, o, s, r);
      });
      // Aligned, and one element off (the narrowed vector width).
      for (std::size_t offset : {std::size_t{0}, dtype_size(static_cast<DType>(c.dtype))}) {
        const Workspace w("elementwise", sig, offset);
        run_twice(
            w,
            [&] {
              return jitune_elementwise(rt, c.expression, w.pointers(), c.inputs, w.at(c.inputs), c.n,
                                        c.dtype, nullptr);
            },
            sig);
      }
    }
  }
  SUBCASE("permute") {
    struct Case {
      std::vector<std::int64_t> shape;
      std::vector<std::int32_t> perm;
      jitune_dtype dtype;
    };
    for (const Case& c :
         {Case{{3, 5, 7}, {2, 0, 1}, JITUNE_FLOAT32}, Case{{64, 33, 17}, {0, 2, 1}, JITUNE_FLOAT16},
          Case{{2, 3, 4, 5}, {3, 2, 1, 0}, JITUNE_FLOAT64}, Case{{7, 9, 11}, {1, 2, 0}, JITUNE_INT8}}) {
      const std::string sig = text_of([&](char* o, size_t s, size_t* r) {
        return jitune_permute_signature(c.shape.data(), c.perm.data(), c.shape.size(), c.dtype, o, s, r);
      });
      const Workspace w("permute", sig);
      run_twice(
          w,
          [&] {
            return jitune_permute(rt, w.pointers()[0], w.at(1), c.shape.data(), c.perm.data(), c.shape.size(),
                                  c.dtype, nullptr);
          },
          sig);
    }
  }
  SUBCASE("upsample_nearest2d forward and backward") {
    for (const jitune_upsample_nearest2d_shape& s :
         {upsample(2, 3, 9, 7, 2, 2, JITUNE_NCHW, JITUNE_NEAREST, JITUNE_FLOAT32),
          upsample(2, 8, 10, 6, 1.5, 2.5, JITUNE_NHWC, JITUNE_NEAREST_EXACT, JITUNE_FLOAT16),
          upsample(1, 5, 16, 16, 0.5, 0.75, JITUNE_NCHW, JITUNE_NEAREST, JITUNE_BFLOAT16)}) {
      for (int backward = 0; backward < 2; ++backward) {
        const std::string sig = text_of([&](char* o, size_t sz, size_t* r) {
          return jitune_upsample_nearest2d_signature(&s, backward, o, sz, r);
        });
        const Workspace w("upsample_nearest2d", sig);
        run_twice(
            w,
            [&] {
              return backward ? jitune_upsample_nearest2d_backward(rt, &s, w.pointers()[0], w.at(1), nullptr)
                              : jitune_upsample_nearest2d(rt, &s, w.pointers()[0], w.at(1), nullptr);
            },
            sig);
      }
    }
  }
  SUBCASE("index_add, scatter_add, dot") {
    for (jitune_dtype dtype : {JITUNE_FLOAT32, JITUNE_FLOAT16, JITUNE_BFLOAT16}) {
      for (jitune_dtype index_dtype : {JITUNE_INT32, JITUNE_INT64}) {
        const std::string sig = text_of([&](char* o, size_t s, size_t* r) {
          return jitune_index_add_signature(100, 300, 37, dtype, index_dtype, o, s, r);
        });
        const Workspace w("scatter_add", sig);
        run_twice(
            w,
            [&] {
              return jitune_index_add(rt, w.at(0), 100, w.pointers()[1], 300, index_dtype, w.pointers()[2],
                                      300, 37, dtype, 1.0f, 0, nullptr);
            },
            sig);
      }
      const std::string scatter = text_of([&](char* o, size_t s, size_t* r) {
        return jitune_scatter_add_signature(1000, 5000, 5000, dtype, JITUNE_INT64, o, s, r);
      });
      const Workspace ws("scatter_add", scatter);
      run_twice(
          ws,
          [&] {
            return jitune_scatter_add(rt, ws.at(0), 1000, ws.pointers()[1], 5000, JITUNE_INT64,
                                      ws.pointers()[2], 5000, dtype, 1.0f, 1, nullptr);
          },
          scatter);
      const std::string dot =
          text_of([&](char* o, size_t s, size_t* r) { return jitune_dot_signature(100001, dtype, o, s, r); });
      const Workspace wd("scatter_add", dot);
      run_twice(
          wd,
          [&] {
            return jitune_dot(rt, wd.pointers()[0], wd.pointers()[1], 100001, wd.at(2), dtype, nullptr);
          },
          dot);
    }
  }
  SUBCASE("index_add's alpha reaches the kernel") {
    const std::string sig = text_of([&](char* o, size_t s, size_t* r) {
      return jitune_index_add_signature(64, 200, 33, JITUNE_FLOAT32, JITUNE_INT64, o, s, r);
    });
    const Workspace w("scatter_add", sig);
    w.reset();
    CHECK_OK(jitune_index_add(rt, w.at(0), 64, w.pointers()[1], 200, JITUNE_INT64, w.pointers()[2], 200, 33,
                              JITUNE_FLOAT32, 0.5f, 0, nullptr));
    synchronize();
    const std::vector<std::byte>& initial = w.workload().initial_outputs.at(0);
    const std::vector<std::byte>& full = w.expected(0);  // initial + the sum of the rows (alpha 1)
    const std::vector<std::byte> got = w.buffer(0).download(full.size(), 0);
    for (std::uint64_t i = 0; i < full.size() / 4; ++i) {
      const double before = load_element(DType::kFloat32, initial.data(), i);
      const double expected = before + 0.5 * (load_element(DType::kFloat32, full.data(), i) - before);
      REQUIRE(load_element(DType::kFloat32, got.data(), i) == doctest::Approx(expected).epsilon(1e-5));
    }
  }
  SUBCASE("conv2d with and without bias") {
    for (jitune_dtype dtype : {JITUNE_FLOAT32, JITUNE_FLOAT16}) {
      for (const jitune_conv2d_params& p :
           {conv2d({2, 3, 17, 19}, {5, 3, 3, 3}, 2, 1, 1), conv2d({1, 8, 12, 12}, {4, 8, 3, 3}, 1, 2, 2)}) {
        for (int bias = 0; bias < 2; ++bias) {
          const std::string sig = text_of([&](char* o, size_t s, size_t* r) {
            return jitune_conv2d_signature(&p, dtype, bias, o, s, r);
          });
          const Workspace w("conv2d", sig);
          run_twice(
              w,
              [&] {
                return jitune_conv2d(rt, w.pointers()[0], w.pointers()[1], bias ? w.pointers()[2] : nullptr,
                                     w.at(3), &p, dtype, nullptr);
              },
              sig);
        }
      }
    }
  }
  SUBCASE("conv2d with a fused epilogue (jitune_conv2d_fused's residual; jitune_conv2d's relu)") {
    for (jitune_dtype dtype : {JITUNE_FLOAT32, JITUNE_FLOAT16}) {
      for (auto [epilogue, residual] : {std::pair{"y = max(acc + r, 0.0f)", true}, {"y = acc > 0 ? acc : 0.1f * acc", false}}) {
        jitune_conv2d_params p = conv2d({2, 8, 13, 11}, {16, 8, 3, 3}, 1, 1, 1);
        p.epilogue = epilogue;
        const std::string sig = text_of([&](char* o, size_t s, size_t* r) {
          return jitune_conv2d_signature(&p, dtype, 1, o, s, r);
        });
        CHECK(sig.find("epilogue=") != std::string::npos);
        const Workspace w("conv2d", sig);
        run_twice(
            w,
            [&] {
              return residual ? jitune_conv2d_fused(rt, w.pointers()[0], w.pointers()[1], w.pointers()[2],
                                                    w.pointers()[4], w.at(3), &p, dtype, nullptr)
                              : jitune_conv2d(rt, w.pointers()[0], w.pointers()[1], w.pointers()[2], w.at(3), &p,
                                              dtype, nullptr);
            },
            sig);
        if (residual) {  // the residual left out: a clear error, not a read of null
          CHECK(jitune_conv2d(rt, w.pointers()[0], w.pointers()[1], w.pointers()[2], w.at(3), &p, dtype, nullptr) ==
                JITUNE_ERROR_INVALID_ARGUMENT);
          CHECK(std::string(jitune_last_error()).find("residual") != std::string::npos);
        }
      }
    }
  }
  SUBCASE("reduce_rows") {
    for (jitune_reduce_op op : {JITUNE_REDUCE_SUM, JITUNE_REDUCE_MAX}) {
      for (jitune_dtype dtype : {JITUNE_FLOAT32, JITUNE_FLOAT16, JITUNE_BFLOAT16}) {
        const std::string sig = text_of([&](char* o, size_t s, size_t* r) {
          return jitune_reduce_rows_signature(33, 4097, op, dtype, o, s, r);
        });
        const Workspace w("reduce_rows", sig, dtype_size(static_cast<DType>(dtype)));  // one element off
        run_twice(
            w, [&] { return jitune_reduce_rows(rt, w.pointers()[0], w.at(1), 33, 4097, op, dtype, nullptr); },
            sig);
      }
    }
  }
}

TEST_CASE("every family through jitune_call matches the CPU reference") {
  TempDir dir;
  CRuntime crt(dir);
  std::vector<std::pair<std::string, CallArgs>> calls;
  calls.push_back({"elementwise", {}});
  calls.back().second.add(static_cast<std::int64_t>(DType::kFloat16)).add(3001).text("z = x * y - 2");
  calls.push_back({"permute", {}});
  const std::int64_t shape[] = {33, 65, 3};
  const int perm[] = {1, 0, 2};
  calls.back().second.add(static_cast<std::int64_t>(DType::kFloat32)).add_list(shape).add_list(perm);
  UpsampleNearest2d up;
  up.n = 2, up.c = 3, up.in_h = 9, up.in_w = 7, up.scale_h = 2.0, up.scale_w = 3.0;
  calls.push_back({"upsample_nearest2d", {}});
  upsample_nearest2d_call_args(calls.back().second, up, true);
  calls.push_back({"scatter_add", {}});
  calls.back().second.add(0).add(static_cast<std::int64_t>(DType::kBFloat16));
  calls.back()
      .second.add(static_cast<std::int64_t>(DType::kInt32))
      .add(17)
      .add(50)
      .add(50)
      .add(3)
      .scalar(1.0);
  Conv2dParams conv;
  conv.input = {1, 4, 9, 9};
  conv.weight = {6, 4, 3, 3};
  calls.push_back({"conv2d", {}});
  conv2d_call_args(calls.back().second, conv, DType::kFloat32, true);
  calls.push_back({"reduce_rows", {}});
  calls.back().second.add(static_cast<std::int64_t>(DType::kFloat16)).add(0).add(5).add(1000);

  for (const auto& [family_name, args] : calls) {
    const std::string text(args.text());
    const char* text_arg = text.empty() ? nullptr : text.c_str();
    const std::string sig = text_of([&](char* o, size_t s, size_t* r) {
      return jitune_call_signature(family_name.c_str(), args.values().data(), args.values().size(), text_arg,
                                   o, s, r);
    });
    CHECK(sig == call_signature(family_name, args));
    const Workspace w(family_name, sig);
    run_twice(
        w,
        [&] {
          return jitune_call(crt.get(), family_name.c_str(), args.values().data(), args.values().size(),
                             text_arg, args.scalars().data(), args.scalars().size(), w.pointers(), w.size(),
                             nullptr);
        },
        family_name + " " + sig);
    // A wrong buffer count is the call contract's message (conv2d's last buffer, the residual, is optional and may
    // be left out where the epilogue reads none; one more missing is an error).
    if (family_name == "conv2d")
      CHECK(jitune_call(crt.get(), family_name.c_str(), args.values().data(), args.values().size(), text_arg,
                        args.scalars().data(), args.scalars().size(), w.pointers(), w.size() - 1, nullptr) == JITUNE_OK);
    const std::size_t fewer = w.size() - (family_name == "conv2d" ? 2 : 1);
    CHECK(jitune_call(crt.get(), family_name.c_str(), args.values().data(), args.values().size(), text_arg,
                      args.scalars().data(), args.scalars().size(), w.pointers(), fewer,
                      nullptr) == JITUNE_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(jitune_last_error()).find("buffer(s)") != std::string::npos);
  }
}

TEST_CASE("bad pointers and indices are InvalidArgument naming the argument") {
  TempDir dir;
  CRuntime crt(dir);
  jitune_runtime* rt = crt.get();
  auto rejects = [](jitune_status status, const std::string& what, std::initializer_list<const char*> words) {
    const std::string message = jitune_last_error();
    INFO(what, ": ", std::string(jitune_status_name(status)), " ", message);
    CHECK(status == JITUNE_ERROR_INVALID_ARGUMENT);
    for (const char* word : words) CHECK(message.find(word) != std::string::npos);
  };

  const std::string rows = text_of([&](char* o, size_t s, size_t* r) {
    return jitune_reduce_rows_signature(8, 1024, JITUNE_REDUCE_SUM, JITUNE_FLOAT32, o, s, r);
  });
  const Workspace w("reduce_rows", rows, 16);
  const void* misaligned = static_cast<const char*>(w.pointers()[0]) + 1;
  rejects(jitune_reduce_rows(rt, misaligned, w.at(1), 8, 1024, JITUNE_REDUCE_SUM, JITUNE_FLOAT32, nullptr),
          "misaligned x", {"x pointer", "aligned"});
  rejects(
      jitune_reduce_rows(rt, w.pointers()[0], nullptr, 8, 1024, JITUNE_REDUCE_SUM, JITUNE_FLOAT32, nullptr),
      "NULL y", {"y pointer", "null"});
  std::vector<float> host(8 * 1024, 1.0f);
  rejects(jitune_reduce_rows(rt, host.data(), w.at(1), 8, 1024, JITUNE_REDUCE_SUM, JITUNE_FLOAT32, nullptr),
          "host x", {"reduce_rows x", "device memory"});
  rejects(jitune_reduce_rows(rt, w.pointers()[0], w.at(1), 8, 1024, static_cast<jitune_reduce_op>(5),
                             JITUNE_FLOAT32, nullptr),
          "bad op code", {"'op'"});
  // The same pointers, good, still run after the rejections.
  run_twice(
      w,
      [&] {
        return jitune_reduce_rows(rt, w.pointers()[0], w.at(1), 8, 1024, JITUNE_REDUCE_SUM, JITUNE_FLOAT32,
                                  nullptr);
      },
      rows);

  const std::int64_t shape[] = {31, 17};
  const std::int32_t perm[] = {1, 0};
  const std::string psig = text_of([&](char* o, size_t s, size_t* r) {
    return jitune_permute_signature(shape, perm, 2, JITUNE_FLOAT16, o, s, r);
  });
  const Workspace wp("permute", psig);
  rejects(jitune_permute(rt, wp.pointers()[0], nullptr, shape, perm, 2, JITUNE_FLOAT16, nullptr), "NULL dst",
          {"dst pointer"});
  rejects(jitune_permute(rt, wp.pointers()[0], wp.at(0), shape, perm, 2, JITUNE_FLOAT16, nullptr),
          "dst is src", {"overlaps"});
  rejects(jitune_permute(rt, wp.pointers()[0], wp.at(1), shape, nullptr, 2, JITUNE_FLOAT16, nullptr),
          "NULL perm", {"jitune_permute", "'perm'"});

  // Out-of-range indices, caught by check_indices before anything is written.
  const std::string isig = text_of([&](char* o, size_t s, size_t* r) {
    return jitune_index_add_signature(10, 20, 4, JITUNE_FLOAT32, JITUNE_INT64, o, s, r);
  });
  const Workspace wi("scatter_add", isig);
  std::vector<std::byte> index = wi.workload().inputs.at(0);
  const std::int64_t bad = 10;
  std::memcpy(index.data() + 5 * sizeof bad, &bad, sizeof bad);
  wi.buffer(1).upload(index, 0);
  rejects(jitune_index_add(rt, wi.at(0), 10, wi.pointers()[1], 20, JITUNE_INT64, wi.pointers()[2], 20, 4,
                           JITUNE_FLOAT32, 1.0f, 1, nullptr),
          "index out of range", {"index"});

  const char* expr = "y = x + 1";
  const void* host_inputs[] = {host.data()};
  rejects(jitune_elementwise(rt, expr, host_inputs, 1, w.at(1), 8, JITUNE_FLOAT32, nullptr), "host input",
          {"device memory"});
  rejects(jitune_elementwise(rt, "y = ", w.pointers(), 1, w.at(1), 8, JITUNE_FLOAT32, nullptr),
          "bad expression", {});
}

TEST_CASE("device facts, cache warnings, struct sizes") {
  TempDir dir;
  CRuntime crt(dir);
  jitune_device_info info{};
  info.struct_size = sizeof info;
  REQUIRE(jitune_runtime_device(crt.get(), &info) == JITUNE_OK);
  CHECK(info.struct_size == sizeof info);
  CHECK(info.ordinal == 0);
  CHECK(std::strlen(info.name) > 0);
  CHECK(info.cc_major >= 7);
  CHECK(info.sm_count > 0);
  CHECK(info.l2_bytes > 0);
  CHECK(info.global_memory_bytes > 0);
  CHECK(info.max_shared_per_block_optin >= 48 * 1024);
  CHECK(info.driver_version >= 12000);
  CHECK(std::strlen(info.nvrtc_version) > 0);
  MESSAGE("device: ", info.name, " sm_", info.cc_major, info.cc_minor, ", ", info.sm_count, " SMs, NVRTC ",
          info.nvrtc_version);
  jitune_device_info small{};
  small.struct_size = offsetof(jitune_device_info, name);
  CHECK(jitune_runtime_device(crt.get(), &small) == JITUNE_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(jitune_last_error()).find("info->struct_size") != std::string::npos);

  CHECK(text_of([&](char* o, size_t s, size_t* r) {
          return jitune_runtime_warnings(crt.get(), o, s, r);
        }).empty());
  // A user cache that cannot be created: a warning, not an error.
  std::ofstream(dir.path / "a_file") << "x";
  CRuntime blocked(dir, (dir.path / "a_file" / "tuning.sqlite").string());
  const std::string warnings =
      text_of([&](char* o, size_t s, size_t* r) { return jitune_runtime_warnings(blocked.get(), o, s, r); });
  CHECK(warnings.find("a_file") != std::string::npos);
  CHECK(warnings.back() == '\n');

  jitune_runtime_options o{};
  o.struct_size = sizeof o;
  o.device = 999;
  jitune_runtime* none = nullptr;
  CHECK(jitune_runtime_create(&o, &none) == JITUNE_ERROR_NO_DEVICE);
  CHECK(none == nullptr);
  CHECK(std::string(jitune_last_error()).find("999") != std::string::npos);
}

TEST_CASE("explain, tune with a small budget, explain says exact; export / import into a second runtime") {
  TempDir dir;
  CRuntime crt(dir);
  jitune_runtime* rt = crt.get();
  const std::string sig = text_of([&](char* o, size_t s, size_t* r) {
    return jitune_reduce_rows_signature(64, 3001, JITUNE_REDUCE_SUM, JITUNE_FLOAT16, o, s, r);
  });
  const Workspace w("reduce_rows", sig);
  auto run = [&] {
    return jitune_reduce_rows(rt, w.pointers()[0], w.at(1), 64, 3001, JITUNE_REDUCE_SUM, JITUNE_FLOAT16,
                              nullptr);
  };
  run_twice(w, run, "before tuning");

  jitune_device_info info{};
  info.struct_size = sizeof info;
  REQUIRE(jitune_runtime_device(rt, &info) == JITUNE_OK);
  const json before = explain(rt, "reduce_rows", sig);
  CHECK(before["family"] == "reduce_rows");
  CHECK(before["signature"] == sig);
  CHECK(before["level"] == "heuristic");
  CHECK(before["config"] == before["heuristic_config"]);
  CHECK(before["device"] == info.name);
  CHECK(before["notes"].is_array());
  size_t required = 0;
  char small[8];
  CHECK(jitune_explain(rt, "reduce_rows", sig.c_str(), small, sizeof small, &required) ==
        JITUNE_ERROR_BUFFER_TOO_SMALL);
  CHECK(required > sizeof small);
  CHECK(jitune_explain(rt, "reduce_rows", "rows=banana", small, sizeof small, &required) ==
        JITUNE_ERROR_INVALID_ARGUMENT);

  jitune_tune_result tiny{};
  tiny.struct_size = 8;
  CHECK(jitune_tune(rt, "reduce_rows", sig.c_str(), 4, &tiny) == JITUNE_ERROR_INVALID_ARGUMENT);
  CHECK(jitune_tune(rt, "no_such_family", sig.c_str(), 4, nullptr) == JITUNE_ERROR_INVALID_ARGUMENT);

  jitune_tune_result result{};
  result.struct_size = sizeof result;
  const jitune_status tuned = jitune_tune(rt, "reduce_rows", sig.c_str(), 4, &result);
  REQUIRE_MESSAGE(tuned == JITUNE_OK, jitune_status_name(tuned), " ", jitune_last_error());
  MESSAGE("tuned ", sig, ": ", result.config, " ", result.best_us, " us (default ", result.heuristic_config,
          " ", result.default_us, " us), ", result.candidates, " candidates, ", result.wall_s, " s");
  CHECK(result.stored == 1);
  CHECK(result.candidates >= 1);
  CHECK(result.candidates <= 5);
  CHECK(result.failed < result.candidates);
  CHECK(result.best_us > 0);
  CHECK(result.default_us > 0);
  CHECK(std::strlen(result.config) > 0);
  CHECK(std::string(result.heuristic_config) == before["heuristic_config"].get<std::string>());

  const json after = explain(rt, "reduce_rows", sig);
  CHECK(after["level"] == "exact");
  CHECK(after["config"] == result.config);
  CHECK(after["time_us"].get<double>() > 0);
  run_twice(w, run, "after tuning");  // the tuned config runs, correctly

  // Export the user cache, import it into another, and a second runtime on that one serves the record
  // exactly.
  const std::string exported = (dir.path / "exported.jsonl").string();
  std::uint64_t n = 0;
  REQUIRE_MESSAGE(
      jitune_cache_export((dir.path / "tuning.sqlite").c_str(), exported.c_str(), &n) == JITUNE_OK,
      jitune_last_error());
  CHECK(n == 1);
  TempDir other;
  const std::string other_cache = (other.path / "tuning.sqlite").string();
  jitune_import_report report{};
  report.struct_size = sizeof report;
  REQUIRE_MESSAGE(jitune_cache_import(other_cache.c_str(), exported.c_str(), &report) == JITUNE_OK,
                  jitune_last_error());
  CHECK(report.added == 1);
  CRuntime second(other);
  const json imported = explain(second.get(), "reduce_rows", sig);
  CHECK(imported["level"] == "exact");
  CHECK(imported["config"] == result.config);
  // Importing into the first runtime's own cache keeps its record; reload picks the cache up again.
  REQUIRE(jitune_cache_import((dir.path / "tuning.sqlite").c_str(), exported.c_str(), &report) == JITUNE_OK);
  CHECK(report.kept == 1);
  CHECK_OK(jitune_runtime_reload(rt));
  CHECK(explain(rt, "reduce_rows", sig)["level"] == "exact");
}

TEST_CASE("tuning on first use, switched on in the options") {
  TempDir dir;
  CRuntime crt(dir, {}, true);
  const std::string sig = text_of(
      [&](char* o, size_t s, size_t* r) { return jitune_dot_signature(70001, JITUNE_FLOAT32, o, s, r); });
  const Workspace w("scatter_add", sig);
  run_twice(
      w,
      [&] {
        return jitune_dot(crt.get(), w.pointers()[0], w.pointers()[1], 70001, w.at(2), JITUNE_FLOAT32,
                          nullptr);
      },
      sig);
  const json x = explain(crt.get(), "scatter_add", sig);
  CHECK(x["level"] == "exact");
  std::uint64_t n = 0;
  REQUIRE(jitune_cache_export((dir.path / "tuning.sqlite").c_str(), (dir.path / "e.jsonl").c_str(), &n) ==
          JITUNE_OK);
  CHECK(n == 1);
}

TEST_CASE("ops on a non-blocking stream") {
  TempDir dir;
  CRuntime crt(dir);
  driver::StreamHandle stream;
  void* s = stream.get();
  const std::string sig = text_of([&](char* o, size_t sz, size_t* r) {
    return jitune_elementwise_signature("z = x * y", 1 << 22, JITUNE_FLOAT32, o, sz, r);
  });
  const Workspace w("elementwise", sig);
  run_twice(
      w,
      [&] {
        const jitune_status status =
            jitune_elementwise(crt.get(), "z = x * y", w.pointers(), 2, w.at(2), 1 << 22, JITUNE_FLOAT32, s);
        JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
        return status;
      },
      "elementwise on a stream");

  const jitune_upsample_nearest2d_shape up =
      upsample(4, 16, 32, 32, 2, 2, JITUNE_NHWC, JITUNE_NEAREST, JITUNE_FLOAT16);
  const std::string usig = text_of(
      [&](char* o, size_t sz, size_t* r) { return jitune_upsample_nearest2d_signature(&up, 0, o, sz, r); });
  const Workspace wu("upsample_nearest2d", usig);
  run_twice(
      wu,
      [&] {
        const jitune_status status = jitune_upsample_nearest2d(crt.get(), &up, wu.pointers()[0], wu.at(1), s);
        JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
        return status;
      },
      "upsample on a stream");
}

TEST_CASE("a warm call through the C ABI costs what the C++ op costs") {
  TempDir dir;
  CRuntime crt(dir);
  Runtime cpp(isolated_options(dir));  // this executable's own copy of the C++ library
  const std::string sig = text_of([&](char* o, size_t s, size_t* r) {
    return jitune_reduce_rows_signature(64, 256, JITUNE_REDUCE_SUM, JITUNE_FLOAT32, o, s, r);
  });
  const Workspace w("reduce_rows", sig);
  driver::StreamHandle stream;
  auto c_call = [&] {
    return jitune_reduce_rows(crt.get(), w.pointers()[0], w.at(1), 64, 256, JITUNE_REDUCE_SUM, JITUNE_FLOAT32,
                              stream.get());
  };
  auto cpp_call = [&] {
    reduce_rows(cpp, w.pointers()[0], w.at(1), 64, 256, ReduceOp::kSum, DType::kFloat32, stream.get());
  };
  REQUIRE(c_call() == JITUNE_OK);
  cpp_call();
  // Host microseconds per call, 10000 calls a round, rounds interleaved so both see the same drift.
  auto per_call = [&](const std::function<void()>& f) {
    JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 10000; ++i) f();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
    return us / 10000;
  };
  std::vector<double> c_us, cpp_us;
  int failures = 0;
  for (int round = 0; round < 7; ++round) {
    c_us.push_back(per_call([&] { failures += c_call() != JITUNE_OK; }));
    cpp_us.push_back(per_call(cpp_call));
  }
  CHECK(failures == 0);
  std::sort(c_us.begin(), c_us.end());
  std::sort(cpp_us.begin(), cpp_us.end());
  MESSAGE("warm reduce_rows call, host time: C ABI ", c_us[3], " us, C++ op ", cpp_us[3],
          " us (medians of 7 x 10000)");
  CHECK(c_us[3] < cpp_us[3] + 0.5);
  w.verify("after the timed calls");
}

}  // namespace jitune::test
