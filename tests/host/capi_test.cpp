// Tests of the C ABI (libjitune.so, include/jitune/jitune.h) that need no GPU: the header as C99 (capi_c.c)
// with the same struct layouts as C++, status names, runtime creation without a device, NULL handles and
// pointers named in the message of every entry point, per-thread messages, each op's signature against the
// C++ *_signature functions (per op and through jitune_call_signature), text buffers too small, struct sizes
// too small or unknown, bad enum codes, and the cache's export / import round trip.
#include <doctest/doctest.h>

#include <jitune/jitune.h>

#include <unistd.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <jitune/ops.hpp>

#include "capi_c.h"

namespace {

namespace fs = std::filesystem;

// A fresh folder under the system temp folder, removed at the end of the test.
class TempDir {
 public:
  TempDir()
      : path_(fs::temp_directory_path() / ("jitune_capi_test_" + std::to_string(::getpid()) + "_" +
                                           std::to_string(std::random_device{}()))) {
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code error;
    fs::remove_all(path_, error);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string last_error() {
  return jitune_last_error();
}

// A signature function's text, through a buffer of exactly the size it asks for.
std::string text_of(const std::function<jitune_status(char*, size_t, size_t*)>& write) {
  size_t required = 0;
  const jitune_status probe = write(nullptr, 0, &required);
  if (probe != JITUNE_ERROR_BUFFER_TOO_SMALL) {
    FAIL_CHECK("size query: ", jitune_status_name(probe), " ", last_error());
    return {};
  }
  std::string text(required, '\0');
  const jitune_status status = write(text.data(), text.size(), &required);
  CHECK_MESSAGE(status == JITUNE_OK, jitune_status_name(status), " ", last_error());
  CHECK(required == text.size());
  CHECK(text.back() == '\0');
  text.pop_back();
  CHECK(text.size() == std::strlen(text.c_str()));
  return text;
}

// jitune_call_signature over the values a C++ op packs.
std::string call_signature_of(const char* family, const jitune::CallArgs& args) {
  const std::string text(args.text());
  return text_of([&](char* out, size_t size, size_t* required) {
    return jitune_call_signature(family, args.values().data(), args.values().size(),
                                 args.text().empty() ? nullptr : text.c_str(), out, size, required);
  });
}

jitune_upsample_nearest2d_shape upsample_shape(const jitune::UpsampleNearest2d& s) {
  jitune_upsample_nearest2d_shape c{};
  c.struct_size = sizeof c;
  c.n = s.n;
  c.c = s.c;
  c.in_h = s.in_h;
  c.in_w = s.in_w;
  c.out_h = s.out_h;
  c.out_w = s.out_w;
  c.scale_h = s.scale_h.value_or(0);
  c.scale_w = s.scale_w.value_or(0);
  c.layout = static_cast<jitune_image_layout>(s.layout);
  c.mode = static_cast<jitune_nearest_mode>(s.mode);
  c.dtype = static_cast<jitune_dtype>(s.dtype);
  return c;
}

jitune_conv2d_params conv2d_params(const jitune::Conv2dParams& p) {
  jitune_conv2d_params c{};
  c.struct_size = sizeof c;
  std::copy(p.input.begin(), p.input.end(), c.input);
  std::copy(p.weight.begin(), p.weight.end(), c.weight);
  std::copy(p.stride.begin(), p.stride.end(), c.stride);
  std::copy(p.padding.begin(), p.padding.end(), c.padding);
  std::copy(p.dilation.begin(), p.dilation.end(), c.dilation);
  return c;
}

jitune_runtime_options quiet_options() {
  jitune_runtime_options o{};
  o.struct_size = sizeof o;
  o.disable_user_cache = 1;
  o.disable_builtin_shipped_caches = 1;
  o.quiet = 1;
  return o;
}

// Checks a failed call: its status, and a message that names the function and the argument.
void check_rejects(jitune_status status, jitune_status expected, const std::string& function,
                   const std::string& argument) {
  INFO(function, " ", argument, ": ", jitune_status_name(status), " ", last_error());
  CHECK(status == expected);
  CHECK(last_error().find(function) != std::string::npos);
  CHECK(last_error().find("'" + argument + "'") != std::string::npos);
}

std::size_t lines_in(const fs::path& file) {
  std::ifstream in(file);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

const fs::path kShippedJsonl = fs::path(JITUNE_SOURCE_DIR) / "cache/shipped/nvidia-h100-80gb-hbm3.jsonl";

}  // namespace

TEST_CASE("the header is C99, and C and C++ lay the structs out alike") {
  char failure[1024] = "";
  char dot[256] = "";
  std::int64_t conv[4] = {};
  REQUIRE_MESSAGE(capi_c_run(failure, sizeof failure, dot, sizeof dot, conv) == 0, failure);
  CHECK(std::string(dot) == jitune::dot_signature(1000, jitune::DType::kFloat16));
  jitune::Conv2dParams p;
  p.input = {2, 3, 17, 19};
  p.weight = {5, 3, 3, 3};
  p.stride = {2, 1};
  p.padding = {1, 0};
  p.dilation = {1, 2};
  const std::array<std::int64_t, 4> cpp_shape = jitune::conv2d_output_shape(p);
  CHECK(std::vector<std::int64_t>(conv, conv + 4) ==
        std::vector<std::int64_t>(cpp_shape.begin(), cpp_shape.end()));

  const std::size_t sizes[] = {
      sizeof(jitune_runtime_options), sizeof(jitune_device_info), sizeof(jitune_upsample_nearest2d_shape),
      sizeof(jitune_conv2d_params),   sizeof(jitune_tune_result), sizeof(jitune_import_report)};
  const std::size_t last[] = {
      offsetof(jitune_runtime_options, tune_min_time_ms), offsetof(jitune_device_info, memory_clock_mhz),
      offsetof(jitune_upsample_nearest2d_shape, dtype),   offsetof(jitune_conv2d_params, dilation),
      offsetof(jitune_tune_result, heuristic_config),     offsetof(jitune_import_report, rejected)};
  for (int i = 0; i < CAPI_C_STRUCTS; ++i) {
    INFO("struct ", i);
    CHECK(capi_c_sizeof(i) == sizes[i]);
    CHECK(capi_c_offsetof_last(i) == last[i]);
  }
}

TEST_CASE("status names, version, device count") {
  const std::pair<int, const char*> names[] = {
      {JITUNE_OK, "JITUNE_OK"},
      {JITUNE_ERROR_INVALID_ARGUMENT, "JITUNE_ERROR_INVALID_ARGUMENT"},
      {JITUNE_ERROR_NO_DEVICE, "JITUNE_ERROR_NO_DEVICE"},
      {JITUNE_ERROR_CUDA, "JITUNE_ERROR_CUDA"},
      {JITUNE_ERROR_COMPILE, "JITUNE_ERROR_COMPILE"},
      {JITUNE_ERROR_STORE, "JITUNE_ERROR_STORE"},
      {JITUNE_ERROR_OTHER, "JITUNE_ERROR_OTHER"},
      {JITUNE_ERROR_OUT_OF_MEMORY, "JITUNE_ERROR_OUT_OF_MEMORY"},
      {JITUNE_ERROR_BUFFER_TOO_SMALL, "JITUNE_ERROR_BUFFER_TOO_SMALL"},
      {JITUNE_ERROR_UNKNOWN, "JITUNE_ERROR_UNKNOWN"},
  };
  for (int i = 0; i < static_cast<int>(std::size(names)); ++i) {
    CHECK(names[i].first == i);  // the values never change
    CHECK(std::string(jitune_status_name(names[i].first)) == names[i].second);
  }
  CHECK(std::string(jitune_status_name(10)) == "JITUNE_UNKNOWN_STATUS");
  CHECK(std::string(jitune_status_name(-1)) == "JITUNE_UNKNOWN_STATUS");
  CHECK(std::regex_match(jitune_version(), std::regex("[0-9]+\\.[0-9]+\\.[0-9]+")));

  int count = -1;
  REQUIRE(jitune_device_count(&count) == JITUNE_OK);
  CHECK(count == jitune::device_count());
  CHECK(last_error().empty());
}

TEST_CASE("a runtime without a device: NO_DEVICE with the reason, no handle") {
  if (jitune::device_count() > 0) {
    const jitune_runtime_options o = quiet_options();
    jitune_runtime* rt = nullptr;
    REQUIRE(jitune_runtime_create(&o, &rt) == JITUNE_OK);
    CHECK(rt != nullptr);
    CHECK(jitune_runtime_destroy(rt) == JITUNE_OK);
    return;
  }
  jitune_runtime* rt = reinterpret_cast<jitune_runtime*>(0x1);
  const jitune_runtime_options o = quiet_options();
  CHECK(jitune_runtime_create(&o, &rt) == JITUNE_ERROR_NO_DEVICE);
  CHECK(rt == nullptr);
  CHECK(!last_error().empty());
  CHECK(last_error() == jitune::device_unavailable_reason());
  rt = reinterpret_cast<jitune_runtime*>(0x1);
  CHECK(jitune_runtime_create(nullptr, &rt) == JITUNE_ERROR_NO_DEVICE);  // NULL options: every default
  CHECK(rt == nullptr);
  CHECK(jitune_runtime_destroy(nullptr) == JITUNE_OK);  // as free(NULL)
  CHECK(last_error().empty());
}

TEST_CASE("every entry point rejects a NULL handle or pointer, naming it") {
  char buf[64];
  size_t required = 0;
  const std::int64_t shape[] = {2, 3};
  const std::int32_t perm[] = {1, 0};
  const std::int64_t values[] = {0, 16};
  std::int64_t shape_out[4];
  int dummy = 0;
  void* p = &dummy;
  const void* inputs[] = {p};
  jitune_device_info info{};
  info.struct_size = sizeof info;
  const jitune_upsample_nearest2d_shape up = upsample_shape({});
  jitune::Conv2dParams cp;
  cp.input = {1, 1, 4, 4};
  cp.weight = {1, 1, 3, 3};
  const jitune_conv2d_params conv = conv2d_params(cp);
  constexpr jitune_status kBad = JITUNE_ERROR_INVALID_ARGUMENT;

  // The runtime handle, first argument of every call on a runtime.
  const std::pair<const char*, std::function<jitune_status()>> on_runtime[] = {
      {"jitune_runtime_device", [&] { return jitune_runtime_device(nullptr, &info); }},
      {"jitune_runtime_warnings",
       [&] { return jitune_runtime_warnings(nullptr, buf, sizeof buf, &required); }},
      {"jitune_runtime_reload", [&] { return jitune_runtime_reload(nullptr); }},
      {"jitune_elementwise",
       [&] { return jitune_elementwise(nullptr, "y = x", inputs, 1, p, 1, JITUNE_FLOAT32, nullptr); }},
      {"jitune_permute",
       [&] { return jitune_permute(nullptr, p, p, shape, perm, 2, JITUNE_FLOAT32, nullptr); }},
      {"jitune_upsample_nearest2d", [&] { return jitune_upsample_nearest2d(nullptr, &up, p, p, nullptr); }},
      {"jitune_upsample_nearest2d_backward",
       [&] { return jitune_upsample_nearest2d_backward(nullptr, &up, p, p, nullptr); }},
      {"jitune_index_add",
       [&] {
         return jitune_index_add(nullptr, p, 1, p, 1, JITUNE_INT64, p, 1, 1, JITUNE_FLOAT32, 1.0f, 0,
                                 nullptr);
       }},
      {"jitune_scatter_add",
       [&] {
         return jitune_scatter_add(nullptr, p, 1, p, 1, JITUNE_INT64, p, 1, JITUNE_FLOAT32, 1.0f, 0, nullptr);
       }},
      {"jitune_dot", [&] { return jitune_dot(nullptr, p, p, 1, p, JITUNE_FLOAT32, nullptr); }},
      {"jitune_conv2d",
       [&] { return jitune_conv2d(nullptr, p, p, nullptr, p, &conv, JITUNE_FLOAT32, nullptr); }},
      {"jitune_conv2d_fused",
       [&] { return jitune_conv2d_fused(nullptr, p, p, nullptr, p, p, &conv, JITUNE_FLOAT32, nullptr); }},
      {"jitune_reduce_rows",
       [&] { return jitune_reduce_rows(nullptr, p, p, 1, 1, JITUNE_REDUCE_SUM, JITUNE_FLOAT32, nullptr); }},
      {"jitune_call",
       [&] { return jitune_call(nullptr, "dot", values, 2, nullptr, nullptr, 0, inputs, 1, nullptr); }},
      {"jitune_explain",
       [&] { return jitune_explain(nullptr, "scatter_add", "dtype=float32", buf, sizeof buf, &required); }},
      {"jitune_tune", [&] { return jitune_tune(nullptr, "scatter_add", "dtype=float32", 4, nullptr); }},
  };
  for (const auto& [function, call] : on_runtime) check_rejects(call(), kBad, function, "runtime");

  // Every other required pointer.
  struct Case {
    const char* function;
    const char* argument;
    std::function<jitune_status()> call;
  };
  const Case cases[] = {
      {"jitune_device_count", "count", [&] { return jitune_device_count(nullptr); }},
      {"jitune_runtime_create", "runtime", [&] { return jitune_runtime_create(nullptr, nullptr); }},
      {"jitune_elementwise_signature", "expression",
       [&] { return jitune_elementwise_signature(nullptr, 1, JITUNE_FLOAT32, buf, sizeof buf, &required); }},
      {"jitune_elementwise_signature", "out",
       [&] { return jitune_elementwise_signature("y = x", 1, JITUNE_FLOAT32, nullptr, 64, &required); }},
      {"jitune_permute_signature", "shape",
       [&] {
         return jitune_permute_signature(nullptr, perm, 2, JITUNE_FLOAT32, buf, sizeof buf, &required);
       }},
      {"jitune_permute_signature", "perm",
       [&] {
         return jitune_permute_signature(shape, nullptr, 2, JITUNE_FLOAT32, buf, sizeof buf, &required);
       }},
      {"jitune_upsample_nearest2d_signature", "shape",
       [&] { return jitune_upsample_nearest2d_signature(nullptr, 0, buf, sizeof buf, &required); }},
      {"jitune_conv2d_signature", "params",
       [&] { return jitune_conv2d_signature(nullptr, JITUNE_FLOAT32, 0, buf, sizeof buf, &required); }},
      {"jitune_conv2d_output_shape", "params",
       [&] { return jitune_conv2d_output_shape(nullptr, shape_out); }},
      {"jitune_conv2d_output_shape", "output_shape",
       [&] { return jitune_conv2d_output_shape(&conv, nullptr); }},
      {"jitune_call_signature", "family",
       [&] { return jitune_call_signature(nullptr, values, 2, nullptr, buf, sizeof buf, &required); }},
      {"jitune_call_signature", "values",
       [&] { return jitune_call_signature("scatter_add", nullptr, 2, nullptr, buf, sizeof buf, &required); }},
      {"jitune_cache_export", "file", [&] { return jitune_cache_export(nullptr, nullptr, nullptr); }},
      {"jitune_cache_import", "file", [&] { return jitune_cache_import(nullptr, nullptr, nullptr); }},
  };
  for (const Case& c : cases) check_rejects(c.call(), kBad, c.function, c.argument);

  // A NULL array with a count of zero is an empty array (the family then finds too few values).
  CHECK(jitune_call_signature("scatter_add", nullptr, 0, nullptr, buf, sizeof buf, &required) != JITUNE_OK);
  CHECK(last_error().find("'values'") == std::string::npos);
}

TEST_CASE("the last error is per thread, and a success clears it") {
  char buf[8];
  size_t required = 0;
  REQUIRE(jitune_dot_signature(-5, static_cast<jitune_dtype>(42), buf, sizeof buf, &required) ==
          JITUNE_ERROR_INVALID_ARGUMENT);
  const std::string mine = last_error();
  CHECK(mine.find("'dtype'") != std::string::npos);

  std::string theirs_before, theirs_after;
  std::thread other([&] {
    theirs_before = last_error();  // nothing failed on this thread yet
    CHECK(jitune_device_count(nullptr) == JITUNE_ERROR_INVALID_ARGUMENT);
    theirs_after = last_error();
  });
  other.join();
  CHECK(theirs_before.empty());
  CHECK(theirs_after.find("'count'") != std::string::npos);
  CHECK(last_error() == mine);  // untouched by the other thread

  // Many threads failing at once each read their own message.
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([t, &ok] {
      for (int i = 0; i < 200; ++i) {
        char b[4];
        size_t need = 0;
        const std::int64_t n = 1000 + t;
        if (jitune_dot_signature(n, JITUNE_FLOAT32, b, sizeof b, &need) != JITUNE_ERROR_BUFFER_TOO_SMALL)
          return;
        if (std::string(jitune_last_error()).find("needs " + std::to_string(need) + " bytes") ==
            std::string::npos)
          return;
      }
      ok[t] = 1;
    });
  for (auto& t : threads) t.join();
  CHECK(ok == std::vector<int>(8, 1));

  int count = 0;
  CHECK(jitune_device_count(&count) == JITUNE_OK);
  CHECK(last_error().empty());
}

TEST_CASE("each op's signature matches the C++ *_signature, per op and through jitune_call_signature") {
  using jitune::DType;
  SUBCASE("elementwise") {
    const char* expr = "z = x * y + 1";
    const std::string cpp = jitune::elementwise_signature(expr, 4097, DType::kFloat16);
    CHECK(text_of([&](char* o, size_t s, size_t* r) {
            return jitune_elementwise_signature(expr, 4097, JITUNE_FLOAT16, o, s, r);
          }) == cpp);
    jitune::CallArgs args;
    args.add(static_cast<std::int64_t>(DType::kFloat16)).add(4097).text(expr);
    CHECK(call_signature_of("elementwise", args) == cpp);
  }
  SUBCASE("permute") {
    const std::int64_t shape[] = {64, 1, 33, 17};
    const std::int32_t perm[] = {0, 3, 1, 2};
    const std::string cpp = jitune::permute_signature(shape, std::span<const int>(perm), DType::kBFloat16);
    CHECK(text_of([&](char* o, size_t s, size_t* r) {
            return jitune_permute_signature(shape, perm, 4, JITUNE_BFLOAT16, o, s, r);
          }) == cpp);
    jitune::CallArgs args;
    args.add(static_cast<std::int64_t>(DType::kBFloat16))
        .add_list(shape)
        .add_list(std::span<const int>(perm));
    CHECK(call_signature_of("permute", args) == cpp);
  }
  SUBCASE("upsample_nearest2d forward and backward") {
    jitune::UpsampleNearest2d u;
    u.n = 2;
    u.c = 3;
    u.in_h = 10;
    u.in_w = 7;
    u.scale_h = 2.0;
    u.scale_w = 1.5;
    u.layout = jitune::ImageLayout::kNHWC;
    u.mode = jitune::NearestMode::kNearestExact;
    u.dtype = DType::kFloat16;
    const jitune_upsample_nearest2d_shape c = upsample_shape(u);
    for (int backward = 0; backward < 2; ++backward) {
      const std::string cpp = jitune::upsample_nearest2d_signature(u, backward != 0);
      CHECK(text_of([&](char* o, size_t s, size_t* r) {
              return jitune_upsample_nearest2d_signature(&c, backward, o, s, r);
            }) == cpp);
      jitune::CallArgs args;
      jitune::upsample_nearest2d_call_args(args, u, backward != 0);
      CHECK(call_signature_of("upsample_nearest2d", args) == cpp);
    }
    // A zero scale is PyTorch's None: the size alone.
    jitune::UpsampleNearest2d sized = u;
    sized.scale_h.reset();
    sized.scale_w.reset();
    sized.out_h = 21;
    sized.out_w = 9;
    const jitune_upsample_nearest2d_shape cs = upsample_shape(sized);
    CHECK(text_of([&](char* o, size_t s, size_t* r) {
            return jitune_upsample_nearest2d_signature(&cs, 0, o, s, r);
          }) == jitune::upsample_nearest2d_signature(sized));
  }
  SUBCASE("index_add, scatter_add, dot") {
    const std::string cpp = jitune::index_add_signature(1000, 300, 37, DType::kFloat16, DType::kInt32);
    CHECK(text_of([&](char* o, size_t s, size_t* r) {
            return jitune_index_add_signature(1000, 300, 37, JITUNE_FLOAT16, JITUNE_INT32, o, s, r);
          }) == cpp);
    const std::string dot = jitune::dot_signature(100001, DType::kBFloat16);
    CHECK(text_of([&](char* o, size_t s, size_t* r) {
            return jitune_dot_signature(100001, JITUNE_BFLOAT16, o, s, r);
          }) == dot);
    jitune::CallArgs dot_args;
    dot_args.add(2).add(static_cast<std::int64_t>(DType::kBFloat16)).add(100001);
    CHECK(call_signature_of("scatter_add", dot_args) == dot);
    // scatter_add has no C++ *_signature: the family's decoding of the values scatter_add packs.
    jitune::CallArgs scatter;
    scatter.add(1)
        .add(static_cast<std::int64_t>(DType::kFloat32))
        .add(static_cast<std::int64_t>(DType::kInt64));
    scatter.add(500).add(2000).add(2500);
    const std::string sc = call_signature_of("scatter_add", scatter);
    CHECK(text_of([&](char* o, size_t s, size_t* r) {
            return jitune_scatter_add_signature(500, 2000, 2500, JITUNE_FLOAT32, JITUNE_INT64, o, s, r);
          }) == sc);
    CHECK(sc != cpp);
    CHECK(sc.find("float32") != std::string::npos);
    CHECK(sc.find("2000") != std::string::npos);
  }
  SUBCASE("conv2d") {
    jitune::Conv2dParams p;
    p.input = {2, 16, 33, 31};
    p.weight = {24, 16, 3, 5};
    p.stride = {2, 1};
    p.padding = {1, 2};
    p.dilation = {1, 2};
    const jitune_conv2d_params c = conv2d_params(p);
    for (int bias = 0; bias < 2; ++bias) {
      const std::string cpp = jitune::conv2d_signature(p, DType::kFloat32, bias != 0);
      CHECK(text_of([&](char* o, size_t s, size_t* r) {
              return jitune_conv2d_signature(&c, JITUNE_FLOAT32, bias, o, s, r);
            }) == cpp);
      jitune::CallArgs args;
      jitune::conv2d_call_args(args, p, DType::kFloat32, bias != 0);
      CHECK(call_signature_of("conv2d", args) == cpp);
    }
    // An epilogue is part of the signature, the same through the C struct and the C++ call.
    p.epilogue = "y = max(acc + r, 0.0f)";
    jitune_conv2d_params fused = c;
    fused.epilogue = "y=max(acc+r,0.0f)";
    const std::string cpp_fused = jitune::conv2d_signature(p, DType::kFloat32, true);
    CHECK(cpp_fused.find(";epilogue=y = max ( acc + r , 0.0f );") != std::string::npos);
    CHECK(text_of([&](char* o, size_t s, size_t* r) { return jitune_conv2d_signature(&fused, JITUNE_FLOAT32, 1, o, s, r); }) ==
          cpp_fused);
    fused.epilogue = "y = acc + b";
    char small[8];
    size_t needed = 0;
    CHECK(jitune_conv2d_signature(&fused, JITUNE_FLOAT32, 1, small, sizeof small, &needed) == JITUNE_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(jitune_last_error()).find("reads 'b'") != std::string::npos);
    std::int64_t out[4] = {};
    REQUIRE(jitune_conv2d_output_shape(&c, out) == JITUNE_OK);
    const auto cpp_shape = jitune::conv2d_output_shape(p);
    CHECK(std::vector<std::int64_t>(out, out + 4) ==
          std::vector<std::int64_t>(cpp_shape.begin(), cpp_shape.end()));
  }
  SUBCASE("reduce_rows") {
    const std::string cpp =
        jitune::reduce_rows_signature(4096, 4097, jitune::ReduceOp::kMax, DType::kFloat16);
    CHECK(text_of([&](char* o, size_t s, size_t* r) {
            return jitune_reduce_rows_signature(4096, 4097, JITUNE_REDUCE_MAX, JITUNE_FLOAT16, o, s, r);
          }) == cpp);
    jitune::CallArgs args;
    args.add(static_cast<std::int64_t>(DType::kFloat16))
        .add(static_cast<std::int64_t>(jitune::ReduceOp::kMax));
    args.add(4096).add(4097);
    CHECK(call_signature_of("reduce_rows", args) == cpp);
  }
}

TEST_CASE("C++ exceptions become statuses with their messages") {
  char buf[512];
  size_t required = 0;
  // A problem the family rejects: the C++ message, unchanged.
  const std::int64_t shape[] = {4, 5};
  const std::int32_t perm[] = {0, 0};
  CHECK(jitune_permute_signature(shape, perm, 2, JITUNE_FLOAT32, buf, sizeof buf, &required) ==
        JITUNE_ERROR_INVALID_ARGUMENT);
  try {
    (void)jitune::permute_signature(shape, std::span<const int>(perm), jitune::DType::kFloat32);
    FAIL("the C++ permute_signature accepted a repeated dim");
  } catch (const jitune::InvalidArgument& e) {
    CHECK(last_error() == e.what());
  }
  // An unknown family lists the known ones.
  CHECK(jitune_call_signature("softmax", nullptr, 0, nullptr, buf, sizeof buf, &required) ==
        JITUNE_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("softmax") != std::string::npos);
  CHECK(last_error().find("reduce_rows") != std::string::npos);
  // More values than a call holds.
  const std::vector<std::int64_t> many(169, 1);  // CallArgs holds 168
  CHECK(jitune_call_signature("permute", many.data(), many.size(), nullptr, buf, sizeof buf, &required) ==
        JITUNE_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("n_values") != std::string::npos);
  // Codes outside their enums name the argument.
  CHECK(jitune_reduce_rows_signature(4, 4, static_cast<jitune_reduce_op>(2), JITUNE_FLOAT32, buf, sizeof buf,
                                     &required) == JITUNE_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("'op'") != std::string::npos);
  CHECK(jitune_dot_signature(8, static_cast<jitune_dtype>(256), buf, sizeof buf, &required) ==
        JITUNE_ERROR_INVALID_ARGUMENT);  // not dtype 0 by truncation
  CHECK(last_error().find("'dtype'") != std::string::npos);
  // The generic call's values come from the caller: too few of them, a dtype code outside the enum or a list
  // longer than what follows it is the caller's error, not an internal one.
  const std::int64_t reduce_short[] = {0, 0, 16};  // dtype, op, rows; cols missing
  CHECK(jitune_call_signature("reduce_rows", reduce_short, 3, nullptr, buf, sizeof buf, &required) ==
        JITUNE_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("fewer than its family reads") != std::string::npos);
  const std::int64_t reduce_bad_dtype[] = {256, 0, 16, 16};
  CHECK(jitune_call_signature("reduce_rows", reduce_bad_dtype, 4, nullptr, buf, sizeof buf, &required) ==
        JITUNE_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("dtype code 256") != std::string::npos);
  const std::int64_t permute_long_list[] = {0, 9, 4, 5};
  CHECK(jitune_call_signature("permute", permute_long_list, 4, nullptr, buf, sizeof buf, &required) ==
        JITUNE_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("list of 9") != std::string::npos);
  jitune_upsample_nearest2d_shape up = upsample_shape({});
  up.layout = static_cast<jitune_image_layout>(-1);
  CHECK(jitune_upsample_nearest2d_signature(&up, 0, buf, sizeof buf, &required) ==
        JITUNE_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("'shape->layout'") != std::string::npos);
}

TEST_CASE("a text buffer too small is reported with the size it needs, and left untouched") {
  const std::string full = jitune::dot_signature(12345, jitune::DType::kFloat32);
  std::string buf(full.size(), '#');  // one byte short: no room for the NUL
  size_t required = 0;
  CHECK(jitune_dot_signature(12345, JITUNE_FLOAT32, buf.data(), buf.size(), &required) ==
        JITUNE_ERROR_BUFFER_TOO_SMALL);
  CHECK(required == full.size() + 1);
  CHECK(buf == std::string(full.size(), '#'));
  CHECK(last_error().find(std::to_string(full.size() + 1)) != std::string::npos);
  // `required` may be NULL when the buffer is large enough.
  buf.assign(full.size() + 1, '#');
  CHECK(jitune_dot_signature(12345, JITUNE_FLOAT32, buf.data(), buf.size(), nullptr) == JITUNE_OK);
  CHECK(std::string(buf.c_str()) == full);
}

TEST_CASE("struct_size: too small is rejected; larger is accepted only with the unknown bytes zero") {
  char buf[512];
  size_t required = 0;

  jitune_runtime_options o = quiet_options();
  o.struct_size = sizeof(size_t);
  jitune_runtime* rt = nullptr;
  CHECK(jitune_runtime_create(&o, &rt) == JITUNE_ERROR_INVALID_ARGUMENT);  // before any device is touched
  CHECK(rt == nullptr);
  CHECK(last_error().find("options->struct_size") != std::string::npos);

  jitune::Conv2dParams p;
  p.input = {1, 2, 8, 8};
  p.weight = {3, 2, 3, 3};
  jitune_conv2d_params c = conv2d_params(p);
  c.struct_size = offsetof(jitune_conv2d_params, dilation);
  CHECK(jitune_conv2d_signature(&c, JITUNE_FLOAT32, 0, buf, sizeof buf, &required) ==
        JITUNE_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("params->struct_size") != std::string::npos);

  jitune_upsample_nearest2d_shape u{};
  CHECK(jitune_upsample_nearest2d_signature(&u, 0, buf, sizeof buf, &required) ==
        JITUNE_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("shape->struct_size is 0") != std::string::npos);

  // A newer caller's larger struct: fine while the fields this library does not know are zero.
  struct Newer {
    jitune_conv2d_params params;
    std::int64_t future_field;
  } newer{conv2d_params(p), 0};
  newer.params.struct_size = sizeof newer;
  CHECK(jitune_conv2d_signature(&newer.params, JITUNE_FLOAT32, 0, buf, sizeof buf, &required) == JITUNE_OK);
  CHECK(std::string(buf) == jitune::conv2d_signature(p, jitune::DType::kFloat32, false));
  newer.future_field = 7;
  CHECK(jitune_conv2d_signature(&newer.params, JITUNE_FLOAT32, 0, buf, sizeof buf, &required) ==
        JITUNE_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("does not know") != std::string::npos);

  TempDir dir;
  jitune_import_report report{};
  report.struct_size = 4;
  CHECK(jitune_cache_import((dir.path() / "t.sqlite").c_str(), kShippedJsonl.c_str(), &report) ==
        JITUNE_ERROR_INVALID_ARGUMENT);
  CHECK(last_error().find("report->struct_size") != std::string::npos);
  CHECK(!fs::exists(dir.path() / "t.sqlite"));  // rejected before anything was written
}

TEST_CASE("cache export / import round trip without a GPU") {
  TempDir dir;
  const std::string first = (dir.path() / "first.sqlite").string();
  const std::string second = (dir.path() / "second.sqlite").string();
  const std::string exported = (dir.path() / "exported.jsonl").string();
  const std::size_t shipped = lines_in(kShippedJsonl);
  REQUIRE(shipped > 0);

  jitune_import_report r{};
  r.struct_size = sizeof r;
  REQUIRE_MESSAGE(jitune_cache_import(first.c_str(), kShippedJsonl.c_str(), &r) == JITUNE_OK, last_error());
  CHECK(r.added == shipped);
  CHECK(r.replaced + r.kept + r.rejected == 0);
  CHECK(r.struct_size == sizeof r);

  std::uint64_t n = 0;
  REQUIRE_MESSAGE(jitune_cache_export(first.c_str(), exported.c_str(), &n) == JITUNE_OK, last_error());
  CHECK(n == shipped);
  CHECK(lines_in(exported) == shipped);

  REQUIRE(jitune_cache_import(second.c_str(), exported.c_str(), &r) == JITUNE_OK);
  CHECK(r.added == shipped);
  REQUIRE(jitune_cache_import(second.c_str(), exported.c_str(), nullptr) == JITUNE_OK);  // report may be NULL
  REQUIRE(jitune_cache_import(second.c_str(), exported.c_str(), &r) == JITUNE_OK);
  CHECK(r.added == 0);
  CHECK(r.kept == shipped);
  const std::string again = (dir.path() / "again.jsonl").string();
  REQUIRE(jitune_cache_export(second.c_str(), again.c_str(), nullptr) == JITUNE_OK);
  std::ifstream a(exported), b(again);
  CHECK(std::string(std::istreambuf_iterator<char>(a), {}) ==
        std::string(std::istreambuf_iterator<char>(b), {}));

  // Rejected lines: an error naming them, the valid records imported all the same.
  const fs::path mixed = dir.path() / "mixed.jsonl";
  {
    std::ifstream in(kShippedJsonl);
    std::string line;
    std::getline(in, line);
    std::ofstream out(mixed);
    out << line << "\n{\"family\": \"no_such_family\"}\nnot json\n";
  }
  const std::string third = (dir.path() / "third.sqlite").string();
  CHECK(jitune_cache_import(third.c_str(), mixed.c_str(), &r) == JITUNE_ERROR_INVALID_ARGUMENT);
  CHECK(r.added == 1);
  CHECK(r.rejected == 2);
  CHECK(last_error().find("2 record(s)") != std::string::npos);
  CHECK(last_error().find("line 2") != std::string::npos);
  CHECK(last_error().find("line 3") != std::string::npos);

  // A cache that does not exist cannot be exported; a file that does not exist cannot be imported.
  CHECK(jitune_cache_export((dir.path() / "missing.sqlite").c_str(), again.c_str(), &n) ==
        JITUNE_ERROR_STORE);
  CHECK(last_error().find("missing.sqlite") != std::string::npos);
  const jitune_status missing = jitune_cache_import(first.c_str(), (dir.path() / "none.jsonl").c_str(), &r);
  CHECK(missing != JITUNE_OK);
  CHECK(last_error().find("none.jsonl") != std::string::npos);
}
