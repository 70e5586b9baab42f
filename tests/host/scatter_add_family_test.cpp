// The scatter_add family without a GPU: problems and signatures, constraints and heuristic, pair units,
// workload (balanced random indices, never-zero values) and CPU reference, tolerances, the dot alignment
// rule, and an NVRTC compile of every legal config for sm_80 and sm_90, plus the shared atomics header on its
// own.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "runtime/compiler.hpp"
#include "templates/host_float.hpp"
#include "templates/scatter_add/scatter_add.hpp"
#include "templates/sources.hpp"
#include "tuner/tuner.hpp"

namespace jitune {
namespace {

const Family& fam() {
  return templates::scatter_add::scatter_add_family();
}

std::unique_ptr<Problem> index_add(const std::string& dtype, std::int64_t rows, std::int64_t count,
                                   std::int64_t row_length = 1, const std::string& index = "int64") {
  return fam().make_problem({{"op", "index_add"},
                             {"dtype", dtype},
                             {"index", index},
                             {"rows", std::to_string(rows)},
                             {"count", std::to_string(count)},
                             {"row_length", std::to_string(row_length)}});
}

std::unique_ptr<Problem> dot(const std::string& dtype, std::int64_t n) {
  return fam().make_problem({{"op", "dot"}, {"dtype", dtype}, {"n", std::to_string(n)}});
}

const templates::scatter_add::ScatterAddProblem& as_sa(const Problem& p) {
  return static_cast<const templates::scatter_add::ScatterAddProblem&>(p);
}

Config config(std::int64_t atomic, std::int64_t workspace, std::int64_t prereduce, std::int64_t block = 256,
              std::int64_t items = 4, std::int64_t vec = 1, std::int64_t order = 0, std::int64_t cache = 0) {
  return Config{{"atomic", atomic}, {"workspace", workspace}, {"prereduce", prereduce}, {"block", block},
                {"items", items},   {"vec", vec},             {"order", order},         {"cache", cache},
                {"partition", 0},   {"bucket", 15},           {"segment", 18}};
}

/// The partition strategy with buckets of 2^bucket elements and segments of 2^segment entries.
Config partition(std::int64_t bucket, std::int64_t segment = 16, std::int64_t block = 512, std::int64_t items = 4) {
  Config c = config(0, 0, 0, block, items);
  c.set("partition", 1);
  c.set("bucket", bucket);
  c.set("segment", segment);
  return c;
}

std::int64_t index_at(const Workload& w, DType index_dtype, std::int64_t i) {
  if (index_dtype == DType::kInt32) {
    std::int32_t v;
    std::memcpy(&v, w.inputs[0].data() + i * 4, 4);
    return v;
  }
  std::int64_t v;
  std::memcpy(&v, w.inputs[0].data() + i * 8, 8);
  return v;
}

}  // namespace

TEST_CASE("scatter_add is registered and its template is embedded") {
  CHECK(&family("scatter_add") == &fam());
  CHECK(template_source("scatter_add/scatter_add.cuh").find("__global__") != std::string::npos);
  CHECK(template_source("common/atomics.cuh").find("fast_atomic_add") != std::string::npos);
  // The template hash covers the shared atomics header it includes.
  CHECK(template_hash("scatter_add/scatter_add.cuh") != template_hash("common/atomics.cuh"));
}

TEST_CASE("signatures are canonical and parse back; bad options are clear errors") {
  auto p = index_add("half", 65536, 1 << 24);
  CHECK(p->signature() == "count=16777216;dtype=float16;index=int64;op=index_add;row_length=1;rows=65536");
  CHECK(fam().parse_problem(p->signature())->signature() == p->signature());
  CHECK(p->group() == "index_add|float16|int64");
  CHECK(p->bytes_moved() == double(1 << 24) * (2 + 8) + 65536.0 * 2);
  auto d = dot("bf16", 1000);
  CHECK(d->signature() == "dtype=bfloat16;n=1000;op=dot");
  CHECK(fam().parse_problem(d->signature())->signature() == d->signature());
  CHECK(d->group() == "dot|bfloat16");
  CHECK(index_add("float32", 10, 5, 3, "int32")->group() == "index_add|float32|int32");

  CHECK_THROWS_WITH_AS(index_add("int32", 10, 10), doctest::Contains("float16"), InvalidArgument);
  CHECK_THROWS_WITH_AS(index_add("float32", 10, 10, 1, "int16"), doctest::Contains("int32 or int64"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(index_add("float32", 0, 10), doctest::Contains("at least one row"), InvalidArgument);
  CHECK_THROWS_WITH_AS(index_add("float32", 10, 10, 0), doctest::Contains("row_length"), InvalidArgument);
  CHECK_THROWS_WITH_AS(index_add("float32", std::int64_t{1} << 40, 10, 1 << 20), doctest::Contains("2^48"),
                       InvalidArgument);
  CHECK_THROWS_AS(fam().make_problem({{"op", "index_add"}, {"dtype", "float32"}, {"rows", "4"}}),
                  InvalidArgument);
  CHECK_THROWS_WITH_AS(fam().make_problem({{"op", "gather"}, {"dtype", "float32"}}),
                       doctest::Contains("index_add or dot"), InvalidArgument);
  CHECK_THROWS_WITH_AS(fam().make_problem({{"op", "dot"}, {"dtype", "float32"}, {"n", "4"}, {"rows", "4"}}),
                       doctest::Contains("unknown option 'rows'"), InvalidArgument);
  CHECK_THROWS_WITH_AS(fam().make_problem({{"op", "dot"}, {"dtype", "float32"}, {"n", "-4"}}),
                       doctest::Contains("non-negative"), InvalidArgument);
}

TEST_CASE("constraints: what each strategy needs, and the heuristic is legal") {
  const DeviceInfo h100 = nominal_device(90), a100 = nominal_device(80);
  auto f16 = index_add("float16", 65536, 1 << 17);
  auto f32 = index_add("float32", 65536, 1 << 17);
  auto dense = index_add("float16", 65536, 1 << 20);  // 16 sources per element
  auto rows = index_add("float16", 1024, 4096, 64);
  auto huge = index_add("bfloat16", std::int64_t{1} << 21, 1 << 20);
  CHECK(fam().check(*f16, config(1, 0, 0), h100).empty());
  CHECK(fam().check(*f16, config(2, 0, 0), h100).find("row_length 1") != std::string::npos);
  CHECK(fam().check(*rows, config(2, 0, 1), h100).empty());
  CHECK(fam().check(*rows, config(2, 0, 0), a100).empty());  // half2 pairs: native on sm_80
  CHECK(fam().check(*rows, config(2, 1, 0), h100).empty());  // float2 pairs in the workspace: sm_90
  CHECK(fam().check(*rows, config(2, 1, 0), a100).find("sm_90") != std::string::npos);
  CHECK(fam().check(*f32, config(1, 0, 0), h100).find("plain") != std::string::npos);
  CHECK(fam().check(*f32, config(0, 1, 0), h100).find("float32") != std::string::npos);
  CHECK(fam().check(*f16, config(0, 1, 0), h100).empty());
  CHECK(fam().check(*f16, config(1, 1, 0), h100).find("plain") != std::string::npos);
  CHECK(fam().check(*huge, config(0, 1, 0), h100).find("2097152") != std::string::npos);
  // The chunk order and the loads' eviction priority are the dot's.
  CHECK(fam().check(*f16, config(1, 0, 0, 256, 4, 1, 1, 0), h100).find("order=0") != std::string::npos);
  CHECK(fam().check(*f16, config(1, 0, 0, 256, 4, 1, 0, 2), h100).find("cache=0") != std::string::npos);
  CHECK(fam().check(*dot("bfloat16", 1 << 20), config(0, 1, 0, 256, 2, 8, 1, 2), h100).empty());
  // Vector units: packed, no pre-reduction, whole units per row, 16 bytes at most.
  CHECK(fam().check(*f16, config(2, 0, 0, 256, 4, 2), h100).find("multiple of vec") != std::string::npos);
  CHECK(fam().check(*rows, config(2, 0, 0, 256, 4, 8), h100).empty());
  CHECK(fam().check(*rows, config(2, 1, 0, 256, 4, 8), h100).empty());
  CHECK(fam().check(*rows, config(2, 0, 1, 256, 4, 8), h100).find("prereduce=0") != std::string::npos);
  CHECK(fam().check(*rows, config(1, 0, 0, 256, 4, 8), h100).find("atomic=2") != std::string::npos);
  CHECK(fam().check(*index_add("float32", 1024, 4096, 64), config(2, 0, 0, 256, 4, 8), h100).find("16 bytes") !=
        std::string::npos);
  CHECK(fam().check(*index_add("float16", 1024, 4096, 12), config(2, 0, 0, 256, 4, 8), h100)
            .find("row_length 12") != std::string::npos);
  CHECK(fam().check(*index_add("float16", 1024, 4096, 12), config(2, 0, 0, 256, 4, 4), h100).empty());
  // The shared-memory pre-reduction: 65536 elements are two slices of 32768 float bins (128 KB).
  CHECK(templates::scatter_add::block_slices(as_sa(*f16)) == 2);
  CHECK(templates::scatter_add::block_slice_elements(as_sa(*f16)) == 32768);
  CHECK(templates::scatter_add::block_slice_elements(as_sa(*index_add("float16", 40961, 10))) == 20482);
  CHECK(
      fam().check(*f16, config(2, 0, 2, 1024), h100).empty());  // pairs of adjacent bins, even with rows of 1
  CHECK(fam().check(*f16, config(1, 0, 2, 1024), a100).empty());
  CHECK(fam().check(*f16, config(0, 1, 2), h100).find("workspace=0") != std::string::npos);
  CHECK(fam().check(*huge, config(1, 0, 2), h100).find("slices") != std::string::npos);
  DeviceInfo tiny = h100;
  tiny.max_shared_per_block_optin = 48 * 1024;
  CHECK(fam().check(*f16, config(1, 0, 2), tiny).find("shared memory") != std::string::npos);
  auto d16 = dot("float16", 1 << 20), d32 = dot("float32", 1 << 20);
  CHECK(fam().check(*d16, config(0, 1, 0, 256, 2, 8), h100).empty());
  CHECK(fam().check(*d32, config(0, 1, 0, 256, 2, 8), h100).find("16 bytes") != std::string::npos);
  CHECK(fam().check(*d16, config(1, 1, 0, 256, 2, 8), h100).find("atomic=0") != std::string::npos);
  DeviceInfo small = h100;
  small.max_threads_per_block = 512;
  CHECK(fam().check(*f16, config(1, 0, 0, 1024), small).find("exceeds") != std::string::npos);

  for (const DeviceInfo& dev : {h100, a100})
    for (auto* p : {f16.get(), f32.get(), dense.get(), rows.get(), huge.get(), d16.get(), d32.get()}) {
      INFO(p->signature(), " sm_", dev.cc());
      const Config h = fam().heuristic(*p, dev);
      CHECK(fam().validate(*p, h, dev).empty());
      std::size_t pruned = 0;
      auto legal = tuner::legal_candidates(fam(), *p, dev, pruned);
      CHECK(legal.front() == h);
      CHECK(legal.size() + pruned == fam().space().size());
      std::set<std::string> distinct;
      for (const Config& c : legal) distinct.insert(fam().source(*p, c).name_expression);
      CHECK(distinct.size() == legal.size());  // no two legal configs compile to the same kernel
    }
  // The heuristic takes the fast path for 16-bit types, pairs for rows, and float accumulation for bfloat16
  // before sm_90 (where bfloat162 atomics are compare-and-swap loops).
  CHECK(fam().heuristic(*f16, h100).at("atomic") == 1);
  CHECK(fam().heuristic(*rows, h100).at("atomic") == 2);
  CHECK(fam().heuristic(*dense, h100).at("prereduce") == 2);
  CHECK(fam().heuristic(*dense, h100).at("atomic") == 2);
  CHECK(fam().heuristic(*index_add("float32", 65536, 1 << 20), a100).at("atomic") == 0);
  auto bf = index_add("bfloat16", 65536, 1 << 17);
  CHECK(fam().heuristic(*bf, a100).at("workspace") == 1);
  CHECK(fam().heuristic(*bf, h100).at("workspace") == 0);
  CHECK(fam().heuristic(*index_add("float32", 100, 1 << 20), h100).at("prereduce") == 1);
}

TEST_CASE("partition: what it takes, its workspace and shared memory, and where the heuristic picks it") {
  namespace sa = templates::scatter_add;
  const DeviceInfo h100 = nominal_device(90), a100 = nominal_device(80);
  auto big32 = index_add("float32", std::int64_t{1} << 24, std::int64_t{1} << 24);  // 64 MB > L2
  auto big16 = index_add("float16", std::int64_t{1} << 24, std::int64_t{1} << 24);  // 32 MB < L2
  auto rows = index_add("bfloat16", 100003, 300007, 5, "int32");
  CHECK(fam().check(*big32, partition(15, 18), h100).empty());
  CHECK(fam().check(*rows, partition(12, 16, 256, 1), a100).empty());
  // The other strategies' knobs stay neutral.
  Config packed = partition(15);
  packed.set("atomic", 2);
  CHECK(fam().check(*big16, packed, h100).find("atomic=0") != std::string::npos);
  // 1024-thread blocks spill beyond 2 items; blocks of 128 are refused.
  CHECK(fam().check(*big32, partition(15, 18, 1024, 4), h100).find("spill") != std::string::npos);
  CHECK(fam().check(*big32, partition(15, 18, 1024, 2), h100).empty());
  CHECK(fam().check(*big32, partition(15, 18, 128, 4), h100).find("block >= 256") != std::string::npos);
  // Buckets: at most kMaxPartitionBuckets; 2^24 elements in buckets of 2^12 make 4096, 2^30 in 2^15 too many.
  CHECK(sa::partition_buckets(as_sa(*big32), partition(12)) == 4096);
  auto huge = index_add("float16", std::int64_t{1} << 30, 1000);
  CHECK(fam().check(*huge, partition(15), h100).find("16384") != std::string::npos);
  // Entries are numbered in 32 bits.
  auto many = index_add("float16", 1000, std::int64_t{1} << 31);
  CHECK(fam().check(*many, partition(15), h100).find("2^31") != std::string::npos);
  // A device with 48 KB of shared memory a block cannot hold 2^15 float bins.
  DeviceInfo tiny = h100;
  tiny.max_shared_per_block_optin = 48 * 1024;
  CHECK(fam().check(*big32, partition(15), tiny).find("shared memory") != std::string::npos);
  CHECK(fam().check(*big32, partition(12, 16, 512, 2), tiny).empty());
  CHECK(fam().check(*dot("float16", 1000), partition(15), h100).find("dot takes partition=0") != std::string::npos);
  // Workspace: 4 header words, totals, fill and base per bucket, then an entry per source element (4 bytes for
  // 16-bit types, 8 for float) from the next 8-byte boundary; totals and fill zeroed, and the kernel re-zeroes.
  const Config c15 = partition(15, 18);
  const std::size_t buckets = 512;
  CHECK(sa::partition_zeroed_bytes(as_sa(*big32), c15) == 4 * (4 + 2 * buckets));
  CHECK(sa::partition_workspace_bytes(as_sa(*big32), c15) == 4 * (4 + 3 * buckets) + (std::size_t{8} << 24));
  CHECK(sa::partition_workspace_bytes(as_sa(*big16), c15) == 4 * (4 + 3 * buckets) + (std::size_t{4} << 24));
  const LaunchPrep prep = fam().prep(*big32, c15);
  CHECK(prep.workspace_bytes == sa::partition_workspace_bytes(as_sa(*big32), c15));
  CHECK(prep.zero_begin == 0);
  CHECK(prep.zero_end == sa::partition_zeroed_bytes(as_sa(*big32), c15));
  CHECK(prep.rezeroed_by_kernel);
  // Shared memory: a word per bucket, then the larger of the scatter tile and the bins.
  CHECK(sa::partition_shared_bytes(as_sa(*big32), c15) == 4 * 512 + std::max<std::int64_t>(4 * 512 + 512 * 4 * 10, 4 << 15));
  const LaunchShape shape = fam().launch_shape(*big32, c15, h100);
  CHECK(shape.cooperative);
  CHECK(shape.shared_bytes == sa::partition_shared_bytes(as_sa(*big32), c15));
  CHECK(shape.grid.x >= 1);
  CHECK_FALSE(fam().launch_shape(*big32, config(0, 0, 0), h100).cooperative);
  // The heuristic: partitioned where the destination outgrows L2 and sources are at least as many.
  CHECK(fam().heuristic(*big32, h100).at("partition") == 1);
  CHECK(fam().validate(*big32, fam().heuristic(*big32, h100), h100).empty());
  CHECK(fam().heuristic(*big16, h100).at("partition") == 0);
  CHECK(fam().heuristic(*index_add("float32", std::int64_t{1} << 24, 1 << 20), h100).at("partition") == 0);
}

TEST_CASE("pair units per row follow the destination's element parity") {
  auto even = index_add("float16", 10, 10, 64);
  auto odd = index_add("float16", 10, 10, 7);
  auto one = index_add("float16", 10, 10, 1);
  const Config packed = config(2, 0, 0), fast = config(1, 0, 0), packed_ws = config(2, 1, 0);
  CHECK(templates::scatter_add::units_per_row(as_sa(*even), packed, 0) == 32);
  CHECK(templates::scatter_add::units_per_row(as_sa(*even), packed, 1) == 33);     // a lone head and tail element
  CHECK(templates::scatter_add::units_per_row(as_sa(*even), packed_ws, 1) == 32);  // the workspace is always aligned
  CHECK(templates::scatter_add::units_per_row(as_sa(*odd), packed, 0) == 4);
  CHECK(templates::scatter_add::units_per_row(as_sa(*odd), packed, 1) == 4);
  CHECK(templates::scatter_add::units_per_row(as_sa(*odd), fast, 1) == 7);
  CHECK(templates::scatter_add::units_per_row(as_sa(*one), fast, 0) == 1);
  CHECK(templates::scatter_add::units_per_row(as_sa(*even), config(2, 0, 2), 1) == 64);  // shared bins: pairs only when flushing
  // Odd offsets: a row's units cover each column exactly once whatever its parity (the kernel's rule).
  for (std::int64_t d : {1, 2, 3, 7, 64, 65})
    for (int parity : {0, 1})
      for (std::int64_t r : {0, 1, 2, 5}) {
        auto p = index_add("float16", 10, 10, d);
        const std::int64_t units = templates::scatter_add::units_per_row(as_sa(*p), packed, parity);
        const std::int64_t h = (parity + r * d) & 1;
        std::vector<int> seen(static_cast<std::size_t>(d), 0);
        for (std::int64_t u = 0; u < units; ++u) {
          const std::int64_t c = 2 * u - h;
          if (c >= 0 && c + 1 < d) {
            CHECK(((parity + r * d + c) & 1) == 0);  // the pair starts at an even element: 4-byte aligned
            ++seen[static_cast<std::size_t>(c)];
            ++seen[static_cast<std::size_t>(c + 1)];
          } else if (c == -1 || c == d - 1) {
            ++seen[static_cast<std::size_t>(c < 0 ? 0 : c)];
          }
        }
        for (int s : seen) CHECK(s == 1);
      }
}

TEST_CASE("workload: balanced random indices, never-zero values; the reference adds them; the workspace is prep's") {
  for (const char* index : {"int32", "int64"}) {
    auto p = index_add("float16", 1000, 4321, 3, index);
    const auto& sp = as_sa(*p);
    Workload w = fam().workload(*p, 7);
    REQUIRE(w.inputs.size() == 2);
    REQUIRE(w.output_bytes.size() == 1);  // the destination; the workspace comes from prep()
    const LaunchPrep with = fam().prep(*p, config(0, 1, 0));
    CHECK(with.workspace_bytes == (1000 * 3 + 1) * 4);
    CHECK(with.zero_begin == 0);
    CHECK(with.zero_end == with.workspace_bytes);  // all of it starts at zero
    CHECK(fam().prep(*p, config(0, 0, 0)).workspace_bytes == 0);
    std::vector<int> per_row(1000, 0);
    for (std::int64_t i = 0; i < 4321; ++i) {
      const std::int64_t r = index_at(w, sp.index_dtype(), i);
      REQUIRE(r >= 0);
      REQUIRE(r < 1000);
      ++per_row[static_cast<std::size_t>(r)];
    }
    for (int c : per_row) CHECK((c == 4 || c == 5));  // 4321 sources over 1000 rows
    for (std::int64_t i = 0; i < 4321 * 3; ++i)
      CHECK(load_element(DType::kFloat16, w.inputs[1].data(), i) != 0.0);
    for (std::int64_t i = 0; i < 3000; ++i)
      CHECK(load_element(DType::kFloat16, w.initial_outputs[0].data(), i) != 0.0);
    // Not the identity order: consecutive sources go to scattered rows.
    std::int64_t ascending = 0;
    for (std::int64_t i = 1; i < 4321; ++i)
      ascending += index_at(w, sp.index_dtype(), i) > index_at(w, sp.index_dtype(), i - 1);
    CHECK(ascending > 1500);
    CHECK(ascending < 2800);

    auto ref = fam().reference(*p, w);
    REQUIRE(ref.size() == 1);
    std::vector<double> expected(3000);
    for (std::int64_t e = 0; e < 3000; ++e)
      expected[e] = load_element(DType::kFloat16, w.initial_outputs[0].data(), e);
    for (std::int64_t i = 0; i < 4321; ++i)
      for (int c = 0; c < 3; ++c)
        expected[index_at(w, sp.index_dtype(), i) * 3 + c] +=
            load_element(DType::kFloat16, w.inputs[1].data(), i * 3 + c);
    for (std::int64_t e = 0; e < 3000; ++e)
      CHECK(load_element(DType::kFloat16, ref[0].data(), e) ==
            static_cast<double>(half_bits_to_float(float_to_half_bits(static_cast<float>(expected[e])))));
  }
  // A new seed draws new indices; float32 destinations have no workspace.
  auto p = index_add("float32", 64, 1000);
  CHECK(fam().workload(*p, 1).inputs[0] != fam().workload(*p, 2).inputs[0]);
  CHECK(fam().workload(*p, 1).output_bytes.size() == 1);
  // Too large for the workspace: none allocated.
  CHECK(as_sa(*index_add("float16", (1 << 20) + 1, 10)).workspace_bytes() == 0);
}

TEST_CASE("dot workload and reference") {
  auto p = dot("bfloat16", 999);
  Workload w = fam().workload(*p, 3);
  REQUIRE(w.inputs.size() == 2);
  CHECK(w.output_bytes[0] == 2);
  CHECK(w.initial_outputs.empty());  // the result is poisoned before each run
  REQUIRE(w.output_bytes.size() == 1);
  // Partials plus a block counter; only the counter must start at zero.
  const LaunchPrep prep = fam().prep(*p, fam().heuristic(*p, nominal_device(90)));
  CHECK(prep.workspace_bytes == (templates::scatter_add::kMaxDotBlocks + 1) * 4);
  CHECK(prep.zero_begin == prep.workspace_bytes - 4);
  CHECK(prep.zero_end == prep.workspace_bytes);
  double sum = 0;
  for (int i = 0; i < 999; ++i)
    sum += load_element(DType::kBFloat16, w.inputs[0].data(), i) *
           load_element(DType::kBFloat16, w.inputs[1].data(), i);
  CHECK(load_element(DType::kBFloat16, fam().reference(*p, w)[0].data(), 0) ==
        static_cast<double>(bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(sum)))));
}

TEST_CASE("tolerances grow with the contributions per element and shrink with float accumulation") {
  const OutputCheck one = templates::scatter_add::accumulation_check(DType::kFloat16, DType::kFloat16, 2, 2.39);
  const OutputCheck many = templates::scatter_add::accumulation_check(DType::kFloat16, DType::kFloat16, 257, 2.39);
  const OutputCheck ws = templates::scatter_add::accumulation_check(DType::kFloat16, DType::kFloat32, 257, 2.39);
  CHECK(one.atol < many.atol);
  CHECK(ws.atol < many.atol / 1000);
  CHECK(many.rtol == doctest::Approx(std::ldexp(1.0, -10)));
  // One source per element: a lost update (|src| >= 0.25) is far outside the tolerance.
  CHECK(one.atol + one.rtol * 8 < 0.25);
  // 257 contributions of rms 2.39: the walk's rounding deviation is about 0.12; 12 of them.
  CHECK(many.atol == doctest::Approx(12 * std::ldexp(1.0, -11) * 2.39 * 257 / std::sqrt(6.0) +
                                     std::ldexp(1.0, -11) * 2.39));
  auto p = index_add("float16", 65536, 1 << 24);
  CHECK(fam().output_check(*p, 0).atol ==
        doctest::Approx(templates::scatter_add::accumulation_check(DType::kFloat16, DType::kFloat16, 257, 2.39).atol));
  CHECK(fam().output_check(*index_add("float32", 65536, 1 << 24), 0).atol < 1e-3);
}

TEST_CASE("dot alignment: the widest vector both pointers share, with a scalar head") {
  alignas(64) static char mem[256];
  auto at = [](int off) -> const void* { return mem + off; };
  auto a = templates::scatter_add::dot_alignment(at(0), at(32), 2, 8, 1000);
  CHECK(a.vec == 8);
  CHECK(a.head == 0);
  a = templates::scatter_add::dot_alignment(at(2), at(34), 2, 8, 1000);
  CHECK(a.vec == 8);
  CHECK(a.head == 7);
  a = templates::scatter_add::dot_alignment(at(0), at(4), 2, 8, 1000);
  CHECK(a.vec == 2);
  CHECK(a.head == 0);
  a = templates::scatter_add::dot_alignment(at(0), at(2), 2, 8, 1000);
  CHECK(a.vec == 1);
  a = templates::scatter_add::dot_alignment(at(2), at(2), 2, 8, 3);
  CHECK(a.head == 3);
}

TEST_CASE("index_add vector units narrow to the source's and the destination's alignment") {
  alignas(64) static char mem[256];
  auto at = [](int off) -> const void* { return mem + off; };
  auto rows = index_add("float16", 1024, 4096, 64);
  const auto& p = as_sa(*rows);
  using templates::scatter_add::index_add_vec;
  CHECK(index_add_vec(p, config(2, 0, 0, 256, 4, 8), at(0), at(64)) == 8);
  CHECK(index_add_vec(p, config(2, 0, 0, 256, 4, 8), at(8), at(64)) == 4);    // dst 8-byte aligned
  CHECK(index_add_vec(p, config(2, 0, 0, 256, 4, 8), at(0), at(2)) == 1);     // src 2-byte aligned
  CHECK(index_add_vec(p, config(2, 1, 0, 256, 4, 8), at(2), at(64)) == 8);    // workspace: dst does not count
  CHECK(index_add_vec(p, config(2, 1, 0, 256, 4, 8), at(2), at(36)) == 2);
  CHECK(index_add_vec(p, config(2, 0, 0, 256, 4, 1), at(0), at(0)) == 1);
  // The dispatcher's slot is log2 of that vec, and its config the tuned one with that vec.
  const void* pointers[] = {at(8), at(0), at(64)};
  const std::uint8_t alignment[] = {8, 16, 16};
  const Config tuned = config(2, 0, 0, 256, 4, 8);
  const int slot = fam().variant(*rows, tuned, Bindings{pointers, alignment, nullptr, {}});
  CHECK(slot == 2);
  CHECK(fam().variant_config(*rows, tuned, slot, nominal_device(90)).at("vec") == 4);
  CHECK(fam().variant_config(*rows, tuned, 0, nominal_device(90)).at("vec") == 1);
  CHECK(fam().check(*rows, fam().variant_config(*rows, tuned, 0, nominal_device(90)), nominal_device(90)).empty());
}

TEST_CASE("the heuristic takes vector units for 16-bit rows of whole pairs") {
  CHECK(fam().heuristic(*index_add("float16", 16384, 262144, 64), nominal_device(90)).at("vec") == 8);
  CHECK(fam().heuristic(*index_add("bfloat16", 16384, 262144, 12), nominal_device(90)).at("vec") == 4);
  CHECK(fam().heuristic(*index_add("float16", 16384, 262144, 3), nominal_device(90)).at("vec") == 1);
  CHECK(fam().heuristic(*index_add("float32", 16384, 262144, 64), nominal_device(90)).at("vec") == 1);
  // A small destination takes the warp pre-reduction, which has no vector units (found by the Python GPU test:
  // 64 rows of 8 float16 had an illegal default).
  for (const char* dtype : {"float16", "bfloat16", "float32"})
    for (std::int64_t d : {2, 8, 64}) {
      auto small = index_add(dtype, 64, 4099, d);
      const Config c = fam().heuristic(*small, nominal_device(90));
      CHECK_MESSAGE(fam().check(*small, c, nominal_device(90)).empty(), dtype, " d=", d, " ", c.text());
    }
}

TEST_CASE("the default suite parses and covers the bench-cases rows and the contention sweep") {
  std::set<std::string> names;
  for (const auto& [name, signature] : fam().default_suite()) {
    names.insert(name);
    CHECK(fam().parse_problem(signature)->signature() == signature);
  }
  CHECK(names.count("index_add_float32_16777216_into_65536"));
  CHECK(names.count("index_add_float16_16777216_into_65536"));
  for (const char* per : {"16777216", "8388608", "4194304", "1048576", "262144"}) {
    CHECK(names.count(std::string("index_add_float16_16777216_into_") + per));
    CHECK(names.count(std::string("index_add_float32_16777216_into_") + per));
  }
  CHECK(names.count("dot_float16_16777216"));
}

TEST_CASE("NVRTC compiles every legal config for sm_80 and sm_90") {
  Compiler compiler;
  std::vector<std::unique_ptr<Problem>> problems;
  problems.push_back(index_add("float16", 65536, (1 << 20) + 3, 1, "int64"));
  problems.push_back(index_add("bfloat16", 1000, 5000, 3, "int32"));
  problems.push_back(index_add("float32", 1000, 5000, 64, "int32"));
  problems.push_back(dot("float16", (1 << 20) + 3));
  problems.push_back(dot("float32", 100));
  for (int cc : {80, 90})
    for (const auto& p : problems) {
      auto r = tuner::dry_run(compiler, fam(), *p, nominal_device(cc), 0);
      INFO("sm_", cc, " ", p->signature());
      REQUIRE(!r.candidates.empty());
      for (const auto& c : r.candidates) {
        INFO(c.config.text(), "\n", c.reason);
        CHECK(c.status == "ok");
        CHECK(c.resources.registers > 0);
        CHECK_FALSE(c.resources.spills());
      }
    }
}

TEST_CASE("the shared atomics header compiles on its own for every type, and float2 pairs need sm_90") {
  Compiler compiler;
  const std::string program = R"(
#include "common/atomics.cuh"
template <class T>
__global__ void exercise(T* base, long long numel, T value) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < numel) {
    jitune::plain_atomic_add(base + i, value);
    jitune::fast_atomic_add(base, i, numel, value);
  }
}
template <class T>
__global__ void exercise_pair(T* base, T a, T b) { jitune::pair_atomic_add(base + 2 * threadIdx.x, a, b); }
)";
  for (const char* arch : {"sm_80", "sm_90"}) {
    CompiledProgram out =
        compiler.compile(program,
                         {"exercise<float>", "exercise<double>", "exercise<__half>",
                          "exercise<__nv_bfloat16>", "exercise_pair<__half>", "exercise_pair<__nv_bfloat16>"},
                         arch, true);
    INFO(arch, "\n", out.log);
    CHECK(out.ok);
  }
  CHECK(compiler.compile(program, {"exercise_pair<float>"}, "sm_90", false).ok);
  CompiledProgram old = compiler.compile(program, {"exercise_pair<float>"}, "sm_80", false);
  CHECK_FALSE(old.ok);
  // The neighbour slot gets -0.0 (0x8000), never +0.0: x + (-0.0) == x keeps a neighbouring -0.0 intact.
  const std::string& src = template_source("common/atomics.cuh");
  CHECK(src.find("__ushort_as_half(0x8000)") != std::string::npos);
  CHECK(src.find("__ushort_as_bfloat16(0x8000)") != std::string::npos);
}

}  // namespace jitune
