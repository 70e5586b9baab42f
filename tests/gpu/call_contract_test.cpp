// The one call contract on the GPU: every family's bad pointers (null, misaligned, host memory, an allocation too
// small for the buffer, an output overlapping an input) and a wrong buffer count get the same kind of error from
// the one check, naming the op and the buffer; a good call of each family still runs and writes its output.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <memory>

#include <jitune/jitune.hpp>

#include "gpu_util.hpp"
#include "templates/family.hpp"

namespace jitune::test {
namespace {

struct Probe {
  std::string family;
  CallArgs args;
};

// One small problem per family, packed as the public wrappers pack it.
std::vector<Probe> probes() {
  std::vector<Probe> out;
  out.push_back({"elementwise", {}});
  out.back().args.add(static_cast<std::int64_t>(DType::kFloat32)).add(1000).text("z = x * y");
  out.push_back({"permute", {}});
  const std::int64_t shape[] = {33, 65};
  const int perm[] = {1, 0};
  out.back().args.add(static_cast<std::int64_t>(DType::kFloat16)).add_list(shape).add_list(perm);
  UpsampleNearest2d up;
  up.n = 2, up.c = 3, up.in_h = 9, up.in_w = 7, up.scale_h = 2.0, up.scale_w = 2.0;
  out.push_back({"upsample_nearest2d", {}});
  upsample_nearest2d_call_args(out.back().args, up, false);
  out.push_back({"scatter_add", {}});
  out.back().args.add(0).add(static_cast<std::int64_t>(DType::kFloat32)).add(static_cast<std::int64_t>(DType::kInt32));
  out.back().args.add(17).add(50).add(50).add(3).scalar(1.0);
  Conv2dParams conv;
  conv.input = {1, 3, 10, 11};
  conv.weight = {4, 3, 3, 3};
  out.push_back({"conv2d", {}});
  conv2d_call_args(out.back().args, conv, DType::kFloat32, true);
  // With an epilogue that reads a residual (its buffer present); static: the call's text points into it.
  static const Conv2dParams fused = [&] {
    Conv2dParams f = conv;
    f.epilogue = "y = max(acc + r, 0.0f)";
    return f;
  }();
  out.push_back({"conv2d", {}});
  conv2d_call_args(out.back().args, fused, DType::kFloat32, true);
  if (find_family("reduce_rows")) {
    out.push_back({"reduce_rows", {}});
    out.back().args.add(static_cast<std::int64_t>(DType::kFloat32)).add(0).add(37).add(129);
  }
  return out;
}

// Device buffers exactly as large as the family's specs (plus a spare allocation per buffer for the offset
// cases), filled with valid data: small integers for index buffers, non-zero values otherwise.
struct Buffers {
  std::vector<BufferSpec> specs;
  std::vector<std::unique_ptr<driver::DeviceBuffer>> memory;
  std::vector<const void*> pointers;

  explicit Buffers(const Family& family, const Problem& problem) : specs(family.buffers(problem)) {
    for (const BufferSpec& spec : specs) {
      const std::uint64_t bytes = spec.extent_bytes();
      memory.push_back(std::make_unique<driver::DeviceBuffer>(std::max<std::uint64_t>(bytes, 16)));
      const std::size_t count = bytes / dtype_size(spec.dtype);
      if (spec.index_bound >= 0) {
        JITUNE_CU_CHECK(cuMemsetD8(memory.back()->get(), 0, memory.back()->bytes()));  // index 0: in range
      } else {
        const auto values = random_values(spec.dtype == DType::kInt64 ? DType::kFloat32 : spec.dtype, count, 7);
        if (!values.empty()) JITUNE_CU_CHECK(cuMemcpyHtoD(memory.back()->get(), values.data(), values.size()));
      }
      pointers.push_back(memory.back()->data());
    }
  }
};

void expect_invalid(const std::function<void()>& f, const std::string& op, const std::string& what) {
  try {
    f();
    FAIL("no error; expected one containing '" << what << "'");
  } catch (const InvalidArgument& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.rfind(op, 0) == 0);  // the message starts with the op's name
    CHECK(message.find(what) != std::string::npos);
  }
}

TEST_CASE("every family: one check, one kind of error for each bad pointer") {
  TempDir dir;
  Runtime rt(isolated_options(dir));
  for (const Probe& probe : probes()) {
    const Family& family = jitune::family(probe.family);
    const auto problem = family.problem_from_call(probe.args);
    const std::string op(family.op_name(*problem));
    INFO("family ", probe.family, " ", problem->signature());
    Buffers b(family, *problem);
    auto run = [&](const std::vector<const void*>& pointers) {
      call(rt, probe.family, probe.args, pointers, nullptr);
      JITUNE_CU_CHECK(cuCtxSynchronize());
    };
    run(b.pointers);  // the good call works
    for (std::size_t i = 0; i < b.specs.size(); ++i) {
      const BufferSpec& spec = b.specs[i];
      if (spec.optional && spec.extent_bytes() == 0) continue;  // absent (conv2d's residual without r): anything goes
      INFO("buffer ", spec.name);
      std::vector<const void*> bad = b.pointers;
      bad[i] = nullptr;
      expect_invalid([&] { run(bad); }, op, spec.name + " pointer is null");
      if (dtype_size(spec.dtype) > 1) {
        bad[i] = static_cast<const char*>(b.pointers[i]) + 1;
        expect_invalid([&] { run(bad); }, op, spec.name + " pointer is not aligned");
      }
      std::vector<std::byte> host(spec.extent_bytes() + 64);
      bad[i] = host.data() + 16;
      expect_invalid([&] { run(bad); }, op, "not device memory");
      // One element past the end of its allocation.
      bad[i] = static_cast<const char*>(b.pointers[i]) + dtype_size(spec.dtype);
      const std::uint64_t extent = spec.extent_bytes();
      if (extent + dtype_size(spec.dtype) > b.memory[i]->bytes())
        expect_invalid([&] { run(bad); }, op, "needs " + std::to_string(extent) + " bytes");
    }
    // An output on top of an input (the first input and first output).
    std::size_t in = b.specs.size(), out = b.specs.size();
    for (std::size_t i = 0; i < b.specs.size(); ++i) {
      if (b.specs[i].role == BufferRole::kIn && in == b.specs.size()) in = i;
      if (b.specs[i].role != BufferRole::kIn && out == b.specs.size()) out = i;
    }
    if (b.specs[out].extent_bytes() <= b.memory[in]->bytes() && !b.specs[out].in_place) {
      std::vector<const void*> overlapping = b.pointers;
      overlapping[out] = b.pointers[in];
      expect_invalid([&] { run(overlapping); }, op, "overlaps");
    }
    // A wrong number of buffers: the shape of the call does not match. Trailing buffers the problem leaves absent
    // (conv2d's residual without r) may be left out; one more missing is the error.
    std::size_t given = b.pointers.size();
    while (given > 0 && b.specs[given - 1].optional && b.specs[given - 1].extent_bytes() == 0) --given;
    if (given < b.pointers.size()) run(std::vector<const void*>(b.pointers.begin(), b.pointers.begin() + given));
    std::vector<const void*> fewer(b.pointers.begin(), b.pointers.begin() + (given - 1));
    expect_invalid([&] { run(fewer); }, op, "buffer(s)");
  }
}

TEST_CASE("the pointer check runs again when the pointers change, not on every call") {
  TempDir dir;
  Runtime rt(isolated_options(dir));
  const Probe probe = probes().front();  // elementwise
  const Family& family = jitune::family(probe.family);
  const auto problem = family.problem_from_call(probe.args);
  Buffers b(family, *problem);
  for (int i = 0; i < 3; ++i) call(rt, probe.family, probe.args, b.pointers, nullptr);
  driver::DeviceBuffer small(64);  // far too small for 1000 floats
  std::vector<const void*> bad = b.pointers;
  bad[2] = small.data();
  expect_invalid([&] { call(rt, probe.family, probe.args, bad, nullptr); }, "elementwise", "needs 4000 bytes");
  call(rt, probe.family, probe.args, b.pointers, nullptr);  // the good pointers still work
  JITUNE_CU_CHECK(cuCtxSynchronize());
}

}  // namespace
}  // namespace jitune::test

namespace jitune::test {
namespace {

// A tuning policy that "tunes" by returning a fixed decision, storing nothing (as when the store write fails).
class FixedPolicy final : public TuningPolicy {
 public:
  explicit FixedPolicy(std::string config) : config_(std::move(config)) {}
  std::optional<Explanation> tune(Runtime&, const Family& family, const Problem& problem) override {
    ++calls;
    Explanation x;
    x.family = std::string(family.name());
    x.signature = problem.signature();
    x.config = config_;
    x.level = MatchLevel::kExact;
    x.source = "tuned in this process (not stored)";
    x.notes.push_back("the store write failed");
    return x;
  }
  int calls = 0;

 private:
  std::string config_;
};

TEST_CASE("a tuning policy's decision is used at once, stored or not; an illegal one is a note") {
  TempDir dir;
  RuntimeOptions o = isolated_options(dir);
  o.use_user_cache = false;  // nothing can be stored
  auto policy = std::make_shared<FixedPolicy>("block=128,pack=2,unroll=2,waves=4");
  o.tuning = policy;
  Runtime rt(o);
  const std::string sig = elementwise_signature("z = x + y", 4097, DType::kFloat32);
  const Explanation x = rt.explain("elementwise", sig);
  CHECK(policy->calls == 1);
  CHECK(x.config == "block=128,pack=2,unroll=2,waves=4");
  CHECK(x.level == MatchLevel::kExact);
  CHECK(x.source == "tuned in this process (not stored)");
  CHECK(std::find(x.notes.begin(), x.notes.end(), "the store write failed") != x.notes.end());
  // The op runs that decision and computes the right thing.
  Buffer a(4097 * 4), b(4097 * 4), z(4097 * 4);
  const auto av = random_values(DType::kFloat32, 4097, 1), bv = random_values(DType::kFloat32, 4097, 2);
  a.upload(av, 0);
  b.upload(bv, 0);
  z.poison();
  elementwise(rt, "z = x + y", {a.at(0), b.at(0)}, z.at(0), 4097, DType::kFloat32);
  JITUNE_CU_CHECK(cuCtxSynchronize());
  const auto got = z.download(4097 * 4, 0);
  for (std::size_t i = 0; i < 4097; i += 97)
    CHECK(load_element(DType::kFloat32, got.data(), i) ==
          static_cast<float>(static_cast<float>(load_element(DType::kFloat32, av.data(), i)) +
                             static_cast<float>(load_element(DType::kFloat32, bv.data(), i))));
  CHECK(policy->calls == 1);  // decided once

  auto bad = std::make_shared<FixedPolicy>("block=128,pack=32,unroll=2,waves=4");  // outside the space
  o.tuning = bad;
  Runtime rt2(o);
  const Explanation y = rt2.explain("elementwise", sig);
  CHECK(y.level == MatchLevel::kHeuristic);
  bool noted = false;
  for (const std::string& n : y.notes) noted = noted || n.find("not legal here") != std::string::npos;
  CHECK(noted);
}

}  // namespace
}  // namespace jitune::test
