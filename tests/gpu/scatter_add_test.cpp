// GPU tests of the scatter_add family: every atomic strategy against a double CPU reference (random values
// with tolerances from the contributions per element, and integer values whose sums are exact, so a single
// lost update fails), collision-free, random, sorted-run and hot-spot index patterns, odd row lengths and odd
// destination offsets with guard elements that must stay untouched, the public ops (alpha, index checking,
// bad input, zero sizes, streams), dot, and the tuner's verification of every config. The "memcheck" case is
// the one to run under compute-sanitizer: exact-size allocations whose last element is the odd-length edge of
// the fast path.
#include <jitune/jitune.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "gpu_util.hpp"
#include "templates/scatter_add/scatter_add.hpp"
#include "tuner/tuner.hpp"

namespace jitune {
namespace {

using test::Buffer;
using test::TempDir;

const Family& fam() {
  return templates::scatter_add::scatter_add_family();
}

enum class Pattern { kUnique, kRandom, kSortedRuns, kHotSpots, kSkewed };

std::vector<std::int64_t> make_indices(Pattern pattern, std::int64_t rows, std::int64_t count,
                                       std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(count));
  switch (pattern) {
    case Pattern::kUnique: {  // no two sources share a row (count <= rows)
      std::vector<std::int64_t> perm(static_cast<std::size_t>(rows));
      for (std::int64_t r = 0; r < rows; ++r) perm[r] = r;
      std::shuffle(perm.begin(), perm.end(), rng);
      for (std::int64_t i = 0; i < count; ++i) idx[i] = perm[i];
      break;
    }
    case Pattern::kRandom:
      for (auto& v : idx) v = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rows));
      break;
    case Pattern::kSortedRuns:  // consecutive sources share a row: whole warps add to one element
      for (std::int64_t i = 0; i < count; ++i) idx[i] = i * rows / count;
      break;
    case Pattern::kHotSpots:  // three rows take everything, interleaved: three groups in every warp
      for (std::int64_t i = 0; i < count; ++i) idx[i] = (i % 3) * (rows - 1) / 2;
      break;
    case Pattern::kSkewed:  // half the sources on one row near the middle, the rest uniform
      for (auto& v : idx)
        v = (rng() & 1) ? rows / 2 + 1 : static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rows));
      break;
  }
  return idx;
}

std::vector<std::byte> encode_indices(const std::vector<std::int64_t>& idx, DType index_dtype) {
  std::vector<std::byte> out(idx.size() * dtype_size(index_dtype));
  for (std::size_t i = 0; i < idx.size(); ++i) {
    if (index_dtype == DType::kInt32) {
      const auto v = static_cast<std::int32_t>(idx[i]);
      std::memcpy(out.data() + i * 4, &v, 4);
    } else {
      std::memcpy(out.data() + i * 8, &idx[i], 8);
    }
  }
  return out;
}

// Non-zero integers in [-4, 4]: every partial sum is exact in float16 below 2048 and in bfloat16 below 256.
std::vector<std::byte> integer_values(DType dtype, std::size_t n, std::uint64_t seed) {
  std::vector<std::byte> out(n * dtype_size(dtype));
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i < n; ++i) {
    const int v = static_cast<int>(rng() % 4) + 1;
    store_element(dtype, out.data(), i, (rng() & 1) ? -v : v);
  }
  return out;
}

struct Case {
  DType dtype = DType::kFloat16;
  DType index_dtype = DType::kInt64;
  std::int64_t rows = 1, count = 0, row_length = 1;
  std::size_t dst_offset = 0, src_offset = 0;  // elements
  Pattern pattern = Pattern::kRandom;
  bool integers = false;  // exact sums expected
  float alpha = 1.0f;
};

constexpr std::size_t kGuard = 8;  // guard elements each side of the destination

struct Prepared {
  std::unique_ptr<Buffer> dst, index, src;
  std::vector<std::int64_t> idx;
  std::vector<std::byte> initial, src_host;
  std::size_t es = 2;
  void* dst_ptr() const { return dst->at((kGuard + dst_offset) * es); }
  std::size_t dst_offset = 0;
};

Prepared prepare(const Case& c, std::uint64_t seed) {
  Prepared p;
  p.es = dtype_size(c.dtype);
  p.dst_offset = c.dst_offset;
  const auto numel = static_cast<std::size_t>(c.rows * c.row_length);
  p.idx = make_indices(c.pattern, c.rows, c.count, seed);
  const std::size_t src_n = static_cast<std::size_t>(c.count * c.row_length);
  p.src_host =
      c.integers ? integer_values(c.dtype, src_n, seed + 1) : test::random_values(c.dtype, src_n, seed + 1);
  p.initial =
      c.integers ? integer_values(c.dtype, numel, seed + 2) : test::random_values(c.dtype, numel, seed + 2);
  p.dst = std::make_unique<Buffer>((numel + 2 * kGuard + 2) * p.es, 0);
  p.dst->poison();  // guards: 0xFFFF NaN; an atomic that touched one would leave a canonical NaN behind
  p.dst->upload(p.initial, (kGuard + c.dst_offset) * p.es);
  const auto index_bytes = encode_indices(p.idx, c.index_dtype);
  p.index = std::make_unique<Buffer>(index_bytes.size() + 16, 0);
  p.index->upload(index_bytes, 0);
  p.src = std::make_unique<Buffer>((src_n + 2) * p.es, 0);
  p.src->upload(p.src_host, c.src_offset * p.es);
  return p;
}

// Compares the destination with the double reference and checks the guards. `float_accumulation`: the config
// accumulates in float (float32 or the workspace), which tightens the tolerance.
void verify(const Case& c, const Prepared& p, bool float_accumulation, const std::string& what) {
  const auto numel = static_cast<std::size_t>(c.rows * c.row_length);
  std::vector<double> ref(numel);
  std::vector<std::int64_t> contributions(numel, 1);
  for (std::size_t e = 0; e < numel; ++e) ref[e] = load_element(c.dtype, p.initial.data(), e);
  for (std::int64_t i = 0; i < c.count; ++i)
    for (std::int64_t col = 0; col < c.row_length; ++col) {
      const auto e = static_cast<std::size_t>(p.idx[i] * c.row_length + col);
      ref[e] += static_cast<double>(c.alpha) *
                load_element(c.dtype, p.src_host.data(), static_cast<std::uint64_t>(i * c.row_length + col));
      ++contributions[e];
    }
  std::vector<std::byte> expected(numel * p.es);
  for (std::size_t e = 0; e < numel; ++e) store_element(c.dtype, expected.data(), e, ref[e]);
  const std::int64_t most = numel ? *std::max_element(contributions.begin(), contributions.end()) : 1;
  OutputCheck check = templates::scatter_add::accumulation_check(c.dtype, float_accumulation ? DType::kFloat32 : c.dtype, most,
                                             2.39 * std::max(1.0, std::fabs(static_cast<double>(c.alpha))));
  if (c.integers) check.rtol = check.atol = 0;  // every partial sum is exact
  const auto got = p.dst->download(numel * p.es, (kGuard + c.dst_offset) * p.es);
  const CompareResult r = compare_host(check, got.data(), expected.data(), numel);
  INFO(what, " ", dtype_name(c.dtype), " ", dtype_name(c.index_dtype), " rows=", c.rows, " count=", c.count,
       " row_length=", c.row_length, " dst_offset=", c.dst_offset, " src_offset=", c.src_offset,
       " pattern=", static_cast<int>(c.pattern), " integers=", c.integers, " most=", most);
  CHECK_MESSAGE(r.ok(), r.describe(numel, check));
  const auto before = p.dst->download((kGuard + c.dst_offset) * p.es, 0);
  for (std::byte b : before) REQUIRE(b == std::byte{0xFF});
  const std::size_t end = (kGuard + c.dst_offset + numel) * p.es;
  for (std::byte b : p.dst->download(p.dst->bytes - end, end)) REQUIRE(b == std::byte{0xFF});
}

// Counts the configs run_config ran and the ones it left out as illegal here: a test case checks that it ran
// some and says how many it left out (never a silent pass).
struct Coverage {
  int ran = 0, illegal = 0;
  void report(const char* what) const {
    MESSAGE(what, ": ", ran, " config runs, ", illegal, " left out as illegal on this device");
    CHECK(ran > 0);
  }
};
Coverage coverage;

// Runs one config directly (bypassing the dispatcher) so every strategy is exercised on this device; a config
// the family rules out here (counted in `coverage`) is left out.
// A vector config (vec > 1) is narrowed to the pointers' alignment as the dispatcher does (Family::variant), and
// `vector_units` counts the runs that kept vec > 1.
int vector_units = 0;
int partitioned = 0;  // runs of the partition strategy
void run_config(Runtime& rt, const Case& c, const Config& tuned, std::uint64_t seed) {
  auto problem = std::make_unique<templates::scatter_add::ScatterAddProblem>(
      templates::scatter_add::ScatterAddProblem::index_add(c.dtype, c.index_dtype, c.rows, c.count, c.row_length));
  if (!fam().validate(*problem, tuned, rt.device()).empty()) {
    ++coverage.illegal;
    return;
  }
  ++coverage.ran;
  Prepared p = prepare(c, seed);
  const void* dst_src[] = {p.dst_ptr(), nullptr, p.src->at(c.src_offset * p.es)};
  const std::uint8_t any_alignment[] = {1, 1, 1};
  const int slot = fam().variant(*problem, tuned, Bindings{dst_src, any_alignment, nullptr, {}});
  const Config config = fam().variant_config(*problem, tuned, slot, rt.device());
  REQUIRE(fam().validate(*problem, config, rt.device()).empty());
  if (config.at("vec") > 1) ++vector_units;
  // The workspace as the runtime prepares it: only prep's range zeroed (the rest poisoned).
  const LaunchPrep prep = fam().prep(*problem, config);
  driver::DeviceBuffer ws(std::max<std::size_t>(prep.workspace_bytes, 4));
  JITUNE_CU_CHECK(cuMemsetD8(ws.get(), 0xFF, ws.bytes()));
  if (prep.zero_end > prep.zero_begin)
    JITUNE_CU_CHECK(cuMemsetD8(ws.get() + prep.zero_begin, 0, prep.zero_end - prep.zero_begin));
  if (config.at("partition")) ++partitioned;
  Runtime::Impl& impl = internal::impl(rt);
  const Kernel& k = impl.kernel(fam(), *problem, config);
  KernelArgs args;
  const void* pointers[] = {p.dst_ptr(), p.index->at(0), p.src->at(c.src_offset * p.es)};
  const std::uint8_t alignment[] = {16, 16, 16};  // unused by index_add's kernel_args
  const double scalars[] = {c.alpha};
  fam().kernel_args(*problem, config, Bindings{pointers, alignment, ws.data(), scalars}, args);
  impl.launch(k, args, nullptr);
  JITUNE_CU_CHECK(cuCtxSynchronize());
  verify(c, p, c.dtype == DType::kFloat32 || config.at("workspace") == 1, config.text());
  if (prep.rezeroed_by_kernel || config.at("workspace")) {  // the kernel leaves its zeroed range zero again
    std::vector<std::uint8_t> w(prep.zero_end - prep.zero_begin);
    JITUNE_CU_CHECK(cuMemcpyDtoH(w.data(), ws.get() + prep.zero_begin, w.size()));
    for (std::uint8_t v : w) REQUIRE(v == 0);
  }
}

std::vector<Config> strategies() {
  std::vector<Config> out;
  // atomic, workspace, prereduce, block, items
  const std::int64_t table[][5] = {{0, 0, 0, 256, 4},  {1, 0, 0, 128, 1}, {1, 0, 1, 256, 8},
                                   {2, 0, 0, 512, 2},  {2, 0, 1, 128, 4}, {0, 1, 0, 256, 4},
                                   {0, 1, 1, 1024, 2}, {2, 1, 0, 256, 8}, {0, 0, 1, 1024, 1},
                                   {2, 0, 2, 1024, 4}, {1, 0, 2, 512, 2}, {0, 0, 2, 256, 8}};
  for (const auto& t : table)
    out.push_back(Config{{"atomic", t[0]},
                         {"workspace", t[1]},
                         {"prereduce", t[2]},
                         {"block", t[3]},
                         {"items", t[4]},
                         {"vec", 1},
                         {"order", 0},
                         {"cache", 0},
                         {"partition", 0},
                         {"bucket", 15},
                         {"segment", 18}});
  // Vector units (illegal where the row length or the dtype's 16 bytes forbid them).
  const std::int64_t vectors[][5] = {{0, 256, 4, 2, 0}, {0, 128, 2, 8, 0}, {1, 512, 1, 4, 0}, {1, 256, 8, 8, 0}};
  for (const auto& v : vectors)
    out.push_back(Config{{"atomic", 2},
                         {"workspace", v[0]},
                         {"prereduce", v[4]},
                         {"block", v[1]},
                         {"items", v[2]},
                         {"vec", v[3]},
                         {"order", 0},
                         {"cache", 0},
                         {"partition", 0},
                         {"bucket", 15},
                         {"segment", 18}});
  // The partition strategy: bucket, segment, block, items. Small segments split a bucket into several (their
  // sums add atomically); large ones leave it to one block (a plain read-add-write).
  const std::int64_t partitions[][4] = {{12, 16, 256, 1}, {14, 16, 512, 4}, {15, 18, 1024, 2}, {12, 18, 512, 8}};
  for (const auto& q : partitions)
    out.push_back(Config{{"atomic", 0},
                         {"workspace", 0},
                         {"prereduce", 0},
                         {"block", q[2]},
                         {"items", q[3]},
                         {"vec", 1},
                         {"order", 0},
                         {"cache", 0},
                         {"partition", 1},
                         {"bucket", q[0]},
                         {"segment", q[1]}});
  return out;
}

TEST_CASE("every strategy matches the reference: dtypes, index types, row lengths, offsets, index patterns") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  coverage = {};
  std::uint64_t seed = 100;
  vector_units = 0;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32})
    for (std::int64_t d : {1, 2, 3, 8, 64, 65})
      for (const Config& config : strategies()) {
        Case c;
        c.dtype = dtype;
        c.row_length = d;
        c.index_dtype = (seed & 1) ? DType::kInt32 : DType::kInt64;
        // Random values, random indices with collisions, odd destination and source offsets.
        c.rows = 1001;
        c.count = 20000 / d + 7;
        c.dst_offset = 1;
        c.src_offset = 1;
        run_config(rt, c, config, ++seed);
        // No collisions, aligned.
        c.pattern = Pattern::kUnique;
        c.count = 997;
        c.dst_offset = c.src_offset = 0;
        run_config(rt, c, config, ++seed);
        // Integer values with whole warps on one element, then three hot spots: exact sums, so a lost update
        // fails.
        c.integers = true;
        c.pattern = Pattern::kSortedRuns;
        c.rows = 37;
        c.count = (dtype == DType::kBFloat16 ? 37 * 24 : 37 * 96) / std::min<std::int64_t>(d, 8) + 1;
        c.dst_offset = 1;
        run_config(rt, c, config, ++seed);
        c.pattern = Pattern::kHotSpots;
        c.count = (dtype == DType::kBFloat16 ? 3 * 40 : 3 * 200) + 2;
        c.dst_offset = 0;
        run_config(rt, c, config, ++seed);
        // A destination of several shared-memory slices (prereduce=2 splits it into block rows), odd offset.
        if (d == 1 || d == 3) {
          c = Case{};
          c.dtype = dtype;
          c.row_length = d;
          c.rows = 60013 / d;
          c.count = 150001 / d;
          c.dst_offset = 1;
          run_config(rt, c, config, ++seed);
        }
      }
  coverage.report("every strategy");
  MESSAGE(vector_units, " runs with vector units, ", partitioned, " of the partition strategy");
  CHECK(vector_units > 0);
  CHECK(partitioned > 0);
}

TEST_CASE("exact integer sums under heavy contention with float accumulation (float32 and the workspace)") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  coverage = {};
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (const Config& config : strategies()) {
      if (dtype != DType::kFloat32 && config.at("workspace") == 0) continue;
      Case c;
      c.dtype = dtype;
      c.integers = true;
      c.rows = 5;
      c.count = 1 << 18;  // 50000+ sources per element; integer sums stay exact in float
      c.pattern = Pattern::kHotSpots;
      c.row_length = 1;
      // Sums reach a few thousand: exact in float, and the float16 / bfloat16 destination rounds once at the
      // end; compare at the destination's precision.
      run_config(rt, c, config, 7);
    }
  coverage.report("exact integer sums");
}

TEST_CASE("partition: many buckets, one source per element to a hot row, every dtype and bucket size") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  coverage = {};
  partitioned = 0;
  std::uint64_t seed = 900;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32})
    for (std::int64_t bucket : {12, 14, 15})
      for (std::int64_t segment : {16, 18}) {
        Config config{{"atomic", 0}, {"workspace", 0}, {"prereduce", 0}, {"block", 512},     {"items", 4},
                      {"vec", 1},    {"order", 0},     {"cache", 0},     {"partition", 1}, {"bucket", bucket},
                      {"segment", segment}};
        Case c;
        c.dtype = dtype;
        c.index_dtype = (seed & 1) ? DType::kInt32 : DType::kInt64;
        // About one source per element over hundreds of buckets, an odd destination offset, alpha.
        c.rows = (1 << 19) + 17;
        c.count = (1 << 19) - 5;
        c.dst_offset = 1;
        c.alpha = -1.5f;
        run_config(rt, c, config, ++seed);
        // Half the sources on one element: its bucket splits into many segments that add atomically, beside
        // buckets of one segment.
        c.pattern = Pattern::kSkewed;
        c.rows = 100003;
        c.count = 300007;
        c.dst_offset = 0;
        c.alpha = 1.0f;
        run_config(rt, c, config, ++seed);
        // Rows of 5: the bucket holds flat elements, rows straddle buckets.
        c.pattern = Pattern::kRandom;
        c.row_length = 5;
        c.rows = 40009;
        c.count = 80021;
        c.dst_offset = 1;
        run_config(rt, c, config, ++seed);
      }
  coverage.report("partition");
  CHECK(partitioned == coverage.ran);
}

TEST_CASE("memcheck: the fast path never touches memory past either end of the destination") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  for (DType dtype : {DType::kFloat16, DType::kBFloat16})
    for (std::int64_t d : {1, 3})
      for (std::int64_t atomic : {1, 2})
        for (std::int64_t prereduce : {0, 2}) {
          if (atomic == 2 && d == 1 && prereduce == 0) continue;
          const std::int64_t rows =
              7;  // 7 or 21 elements: odd, so the last element's pair neighbour is outside
          const std::int64_t count = 64;
          const Config config{{"atomic", atomic}, {"workspace", 0}, {"prereduce", prereduce},
                              {"block", 128},     {"items", 2},     {"vec", 1},       {"order", 0},     {"cache", 0},
                              {"partition", 0}, {"bucket", 15},   {"segment", 18}};
          auto problem = std::make_unique<templates::scatter_add::ScatterAddProblem>(
              templates::scatter_add::ScatterAddProblem::index_add(dtype, DType::kInt64, rows, count, d));
          const std::size_t numel = static_cast<std::size_t>(rows * d), es = dtype_size(dtype);
          std::vector<std::int64_t> idx(count);
          for (std::int64_t i = 0; i < count; ++i)
            idx[i] = i % 2 ? rows - 1 : 0;  // the first and last rows only
          const auto index_bytes = encode_indices(idx, DType::kInt64);
          driver::DeviceBuffer index(index_bytes.size()), src(static_cast<std::size_t>(count * d) * es);
          JITUNE_CU_CHECK(cuMemcpyHtoD(index.get(), index_bytes.data(), index_bytes.size()));
          const auto src_host = integer_values(dtype, static_cast<std::size_t>(count * d), 5);
          JITUNE_CU_CHECK(cuMemcpyHtoD(src.get(), src_host.data(), src_host.size()));
          const auto initial = integer_values(dtype, numel, 6);
          std::vector<double> ref(numel);
          for (std::size_t e = 0; e < numel; ++e) ref[e] = load_element(dtype, initial.data(), e);
          for (std::int64_t i = 0; i < count; ++i)
            for (std::int64_t col = 0; col < d; ++col)
              ref[static_cast<std::size_t>(idx[i] * d + col)] +=
                  load_element(dtype, src_host.data(), static_cast<std::uint64_t>(i * d + col));
          const Kernel& k = internal::impl(rt).kernel(fam(), *problem, config);
          // (a) An allocation of exactly the destination: its last element sits at an even offset, so its
          // pair neighbour would lie past the allocation's end (compute-sanitizer reports any such access).
          // (b) The destination one element into an allocation: its first element's neighbour is the
          // allocation's first element, a NaN guard that must keep its bits.
          for (int layout = 0; layout < 2; ++layout) {
            driver::DeviceBuffer mem((numel + static_cast<std::size_t>(layout)) * es);
            JITUNE_CU_CHECK(cuMemsetD8(mem.get(), 0xFF, mem.bytes()));
            const CUdeviceptr dst = mem.get() + static_cast<std::size_t>(layout) * es;
            JITUNE_CU_CHECK(cuMemcpyHtoD(dst, initial.data(), initial.size()));
            KernelArgs args;
            const void* pointers[] = {reinterpret_cast<void*>(dst), index.data(), src.data()};
            const std::uint8_t alignment[] = {16, 16, 16};  // unused by index_add's kernel_args
            fam().kernel_args(*problem, config, Bindings{pointers, alignment, nullptr, {}}, args);
            internal::impl(rt).launch(k, args, nullptr);
            JITUNE_CU_CHECK(cuCtxSynchronize());
            std::vector<std::byte> got(mem.bytes());
            JITUNE_CU_CHECK(cuMemcpyDtoH(got.data(), mem.get(), got.size()));
            INFO(dtype_name(dtype), " row_length=", d, " atomic=", atomic, " prereduce=", prereduce,
                 " layout=", layout);
            if (layout == 1) CHECK((got[0] == std::byte{0xFF} && got[1] == std::byte{0xFF}));
            for (std::size_t e = 0; e < numel; ++e)
              CHECK(load_element(dtype, got.data() + static_cast<std::size_t>(layout) * es, e) == ref[e]);
          }
        }
}

TEST_CASE("index_add and scatter_add through the public API: alpha, streams, defaults") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  driver::StreamHandle stream;
  const auto s = reinterpret_cast<Stream>(stream.get());
  std::uint64_t seed = 900;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32})
    for (std::int64_t d : {1, 4, 5}) {
      Case c;
      c.dtype = dtype;
      c.row_length = d;
      c.rows = 4099;
      c.count = 60001;
      c.dst_offset = 3;
      c.alpha = -0.5f;
      Prepared p = prepare(c, ++seed);
      ScatterAddOptions o;
      o.alpha = c.alpha;
      index_add(rt, p.dst_ptr(), c.rows, p.index->at(0), c.count, c.index_dtype, p.src->at(0), c.count, d,
                dtype, s, o);
      JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
      const Config used = Config::parse(
          rt.explain("scatter_add", index_add_signature(c.rows, c.count, d, dtype, c.index_dtype)).config);
      verify(c, p, dtype == DType::kFloat32 || used.at("workspace") == 1, "index_add " + used.text());
    }
  // scatter_add: the 1-D case, src longer than index (torch's rule), int32 indices.
  Case c;
  c.dtype = DType::kFloat16;
  c.index_dtype = DType::kInt32;
  c.rows = 777;
  c.count = 12345;
  c.dst_offset = 1;
  Prepared p = prepare(c, 4);
  scatter_add(rt, p.dst_ptr(), c.rows, p.index->at(0), c.count, DType::kInt32, p.src->at(0), c.count + 1,
              DType::kFloat16, s);
  JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
  verify(c, p, false, "scatter_add");
  CHECK(rt.explain("scatter_add", index_add_signature(777, 12345, 1, DType::kFloat16, DType::kInt32)).level ==
        MatchLevel::kHeuristic);
}

TEST_CASE("bad input is a clear error; zero sizes launch nothing") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  Buffer dst(4096), idx(4096), src(4096);
  dst.poison();
  const std::vector<std::int64_t> bad = {0, 5, 10, 3};
  idx.upload(encode_indices(bad, DType::kInt64), 0);
  auto message = [](auto&& call) {
    try {
      call();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  ScatterAddOptions checked;
  checked.check_indices = true;
  CHECK(message([&] {
          index_add(rt, dst.at(0), 10, idx.at(0), 4, DType::kInt64, src.at(0), 4, 1, DType::kFloat16, nullptr,
                    checked);
        }).find("index[2] = 10 is out of range for a destination of 10 rows") != std::string::npos);
  CHECK(message([&] {
          scatter_add(rt, dst.at(0), 10, idx.at(0), 4, DType::kInt64, src.at(0), 4, DType::kFloat32, nullptr,
                      checked);
        }).find("index[2] = 10") != std::string::npos);
  idx.upload(encode_indices({0, -1}, DType::kInt32), 0);
  CHECK(message([&] {
          index_add(rt, dst.at(0), 10, idx.at(0), 2, DType::kInt32, src.at(0), 2, 3, DType::kFloat32, nullptr,
                    checked);
        }).find("index[1] = -1") != std::string::npos);
  CHECK(message([&] {
          index_add(rt, dst.at(0), 10, idx.at(0), 4, DType::kInt64, src.at(0), 5, 1, DType::kFloat16);
        }).find("src has 5 rows but index has 4 entries") != std::string::npos);
  CHECK(message([&] {
          scatter_add(rt, dst.at(0), 10, idx.at(0), 6, DType::kInt64, src.at(0), 5, DType::kFloat16);
        }).find("index has 6 entries but src only 5") != std::string::npos);
  CHECK(message([&] {
          index_add(rt, dst.at(0), 10, nullptr, 4, DType::kInt64, src.at(0), 4, 1, DType::kFloat16);
        }).find("index pointer is null") != std::string::npos);
  CHECK(message([&] {
          index_add(rt, dst.at(1), 10, idx.at(0), 4, DType::kInt64, src.at(0), 4, 1, DType::kFloat16);
        }).find("dst pointer is not aligned") != std::string::npos);
  CHECK(message([&] {
          index_add(rt, dst.at(0), 10, idx.at(4), 4, DType::kInt64, src.at(0), 4, 1, DType::kFloat16);
        }).find("index pointer is not aligned") != std::string::npos);
  CHECK(message([&] {
          index_add(rt, dst.at(0), 10, idx.at(0), 4, DType::kInt16, src.at(0), 4, 1, DType::kFloat16);
        }).find("int32 or int64") != std::string::npos);
  CHECK(message([&] {
          index_add(rt, dst.at(0), 10, idx.at(0), 4, DType::kInt64, src.at(0), 4, 1, DType::kFloat64);
        }).find("float64 is not supported") != std::string::npos);
  CHECK(message([&] {
          index_add(rt, dst.at(0), -1, idx.at(0), 4, DType::kInt64, src.at(0), 4, 1, DType::kFloat16);
        }).find("dst_rows is negative") != std::string::npos);
  CHECK(message([&] {
          dot(rt, src.at(0), src.at(1), 4, dst.at(0), DType::kFloat16);
        }).find("y pointer is not aligned") != std::string::npos);
  CHECK(message([&] {
          dot(rt, src.at(0), src.at(0), -4, dst.at(0), DType::kFloat16);
        }).find("n is negative") != std::string::npos);
  // Zero sizes: nothing launched, nothing written (pointers may even be null).
  index_add(rt, dst.at(0), 10, nullptr, 0, DType::kInt64, nullptr, 0, 1, DType::kFloat16);
  index_add(rt, dst.at(0), 10, idx.at(0), 4, DType::kInt64, src.at(0), 4, 0, DType::kFloat16);
  index_add(rt, nullptr, 0, idx.at(0), 4, DType::kInt64, src.at(0), 4, 1, DType::kFloat16);
  scatter_add(rt, dst.at(0), 10, nullptr, 0, DType::kInt64, nullptr, 0, DType::kFloat16);
  CHECK(message([&] {
          index_add(rt, nullptr, 0, idx.at(0), 4, DType::kInt64, src.at(0), 4, 1, DType::kFloat16, nullptr,
                    checked);
        }).find("no rows") != std::string::npos);
  JITUNE_CU_CHECK(cuCtxSynchronize());
  for (std::byte b : dst.download(4096, 0)) REQUIRE(b == std::byte{0xFF});
  // Without checking, out-of-range indices are skipped and the rest is added.
  idx.upload(encode_indices(bad, DType::kInt64), 0);
  const auto ones = integer_values(DType::kFloat32, 4, 1);
  src.upload(ones, 0);
  std::vector<std::byte> halves(10 * 4 + 64);
  for (std::size_t i = 0; i < halves.size() / 4; ++i) store_element(DType::kFloat32, halves.data(), i, 0.5);
  dst.upload(halves, 0);
  index_add(rt, dst.at(0), 10, idx.at(0), 4, DType::kInt64, src.at(0), 4, 1, DType::kFloat32);
  JITUNE_CU_CHECK(cuCtxSynchronize());
  auto got = dst.download(halves.size(), 0);
  for (std::size_t i = 0; i < halves.size() / 4; ++i) {
    double want = 0.5;
    for (int k = 0; k < 4; ++k)
      if (bad[k] == static_cast<std::int64_t>(i) && bad[k] < 10)
        want += load_element(DType::kFloat32, ones.data(), k);
    CHECK(load_element(DType::kFloat32, got.data(), i) == want);  // element 10 and beyond: untouched
  }
}

double dot_reference(DType dtype, const std::vector<std::byte>& x, const std::vector<std::byte>& y,
                     std::int64_t n) {
  double s = 0;
  for (std::int64_t i = 0; i < n; ++i)
    s += load_element(dtype, x.data(), i) * load_element(dtype, y.data(), i);
  return s;
}

TEST_CASE("dot matches the reference at odd sizes and alignments, deterministically") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  driver::StreamHandle stream;
  const auto s = reinterpret_cast<Stream>(stream.get());
  std::uint64_t seed = 40;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32})
    for (std::int64_t n :
         {std::int64_t{1}, std::int64_t{7}, std::int64_t{4099}, std::int64_t{1000003}, std::int64_t{1} << 24})
      for (auto [ox, oy] : {std::pair<int, int>{0, 0}, {1, 1}, {0, 3}}) {
        const std::size_t es = dtype_size(dtype);
        auto x = test::random_values(dtype, static_cast<std::size_t>(n), ++seed);
        auto y = test::random_values(dtype, static_cast<std::size_t>(n), ++seed);
        Buffer bx(static_cast<std::size_t>(n) * es + 64), by(static_cast<std::size_t>(n) * es + 64), out(64);
        bx.upload(x, ox * es);
        by.upload(y, oy * es);
        out.poison();
        dot(rt, bx.at(ox * es), by.at(oy * es), n, out.at(es), dtype, s);
        JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
        const auto got = out.download(64, 0);
        const double want = dot_reference(dtype, x, y, n);
        const OutputCheck check = templates::scatter_add::accumulation_check(dtype, DType::kFloat32, n, 5.69);
        const double g = load_element(dtype, got.data() + es, 0);
        INFO(dtype_name(dtype), " n=", n, " offsets ", ox, ",", oy, ": got ", g, " want ", want);
        CHECK(std::fabs(g - want) <= check.atol + check.rtol * std::fabs(want));
        for (std::size_t b = 0; b < 64; ++b)
          if (b < es || b >= 2 * es) REQUIRE(got[b] == std::byte{0xFF});
        // Same inputs, same config: the same bits.
        dot(rt, bx.at(ox * es), by.at(oy * es), n, out.at(es), dtype, s);
        JITUNE_CU_CHECK(cuStreamSynchronize(stream.get()));
        CHECK(out.download(64, 0) == got);
      }
  Buffer out(16);
  out.poison();
  dot(rt, nullptr, nullptr, 0, out.at(0), DType::kBFloat16);
  JITUNE_CU_CHECK(cuCtxSynchronize());
  CHECK(load_element(DType::kBFloat16, out.download(2, 0).data(), 0) == 0.0);
}

// The tuner's verification path: every legal config verifies on the family's own workload and reference (so
// the tolerances, the workspace invariant and the dot's head and tail hold for each), none may be cut.
TEST_CASE("every config of the space verifies (tuner verification path)") {
  TempDir dir;
  Runtime rt(test::isolated_options(dir));
  const std::vector<std::map<std::string, std::string>> problems = {
      {{"op", "index_add"},
       {"dtype", "float16"},
       {"index", "int32"},
       {"rows", "1001"},
       {"count", "30011"},
       {"row_length", "3"}},
      {{"op", "index_add"}, {"dtype", "bfloat16"}, {"index", "int64"}, {"rows", "256"}, {"count", "50021"}},
      {{"op", "index_add"},
       {"dtype", "float32"},
       {"index", "int64"},
       {"rows", "513"},
       {"count", "20000"},
       {"row_length", "8"}},
      {{"op", "dot"}, {"dtype", "float16"}, {"n", "1000003"}},
      {{"op", "index_add"},
       {"dtype", "float16"},
       {"index", "int64"},
       {"rows", "65536"},
       {"count", "1048576"}},
  };
  for (const auto& options : problems) {
    auto problem = fam().make_problem(options);
    tuner::TuneOptions opt;
    opt.min_time_ms = 0.05;
    opt.min_reps = 3;
    opt.store = false;
    opt.cut_ratio = 1e9;
    tuner::TuneReport r = tuner::tune(rt, fam(), *problem, opt);
    INFO(problem->signature());
    CHECK(r.candidates.size() > 20);
    for (const auto& c : r.candidates) {
      INFO(c.config.text(), " ", c.reason);
      CHECK(c.status == "ok");
    }
  }
}

TEST_CASE("a tuned record is used exactly by a new Runtime") {
  TempDir dir;
  const std::string sig = index_add_signature(4096, 1 << 20, 1, DType::kFloat16, DType::kInt64);
  std::string tuned;
  {
    Runtime rt(test::isolated_options(dir));
    tuner::TuneOptions opt;
    opt.strategy = tuner::Strategy::kRandom;
    opt.budget = 16;
    opt.min_time_ms = 0.2;
    tuner::TuneReport r = tuner::tune(rt, fam(), *fam().parse_problem(sig), opt);
    CHECK(r.stored);
    tuned = r.best.text();
  }
  Runtime rt(test::isolated_options(dir));
  Explanation x = rt.explain("scatter_add", sig);
  CHECK(x.level == MatchLevel::kExact);
  CHECK(x.config == tuned);
  Case c;
  c.rows = 4096;
  c.count = 1 << 20;
  Prepared p = prepare(c, 3);
  index_add(rt, p.dst_ptr(), c.rows, p.index->at(0), c.count, DType::kInt64, p.src->at(0), c.count, 1,
            DType::kFloat16);
  JITUNE_CU_CHECK(cuCtxSynchronize());
  verify(c, p, Config::parse(tuned).at("workspace") == 1, "tuned " + tuned);
}

}  // namespace
}  // namespace jitune
