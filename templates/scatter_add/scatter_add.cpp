// The scatter_add family object: its space and the Family contract, each part delegated to the file doing it.
#include <bit>

#include "templates/scatter_add/scatter_add_detail.hpp"

namespace jitune::templates::scatter_add {
namespace {

class ScatterAddFamily final : public Family {
 public:
  ScatterAddFamily()
      : space_({
            {"atomic",
             {kPlain, kFast, kPacked},
             "index_add: 0 plain atomicAdd, 1 fast (a 16-bit add as a pair atomic with -0.0 beside it), 2 "
             "packed "
             "(two adjacent row elements per half2/bfloat162/float2 atomic); dot: 0"},
            {"workspace",
             {0, 1},
             "1: accumulate in a zeroed float workspace that the last block adds into the destination "
             "(16-bit "
             "dtypes, at most 2^20 destination elements); dot: always 1"},
            {"prereduce",
             {0, 1, 2},
             "index_add: 1 combines the lanes of a warp that add to one element first; 2 accumulates in "
             "float bins "
             "in shared memory (one slice of the destination per block row, at most 4 slices) and adds the "
             "touched "
             "bins once per block; dot: 0"},
            {"block", {128, 256, 512, 1024}, "threads per block"},
            {"items",
             {1, 2, 4, 8},
             "index_add: units each thread loads before issuing its atomics; dot: vectors per operand per "
             "step"},
            {"vec",
             {1, 2, 4, 8},
             "elements per vector load (<= 16 bytes); index_add: >1 takes a unit of vec row elements per "
             "vector load and vector reduction (packed atomics, no pre-reduction, rows a multiple of vec), "
             "narrowed per call to the pointers' alignment"},
            {"partition",
             {0, 1},
             "index_add: 1 sorts the sources into buckets of destination elements, then sums each bucket in "
             "float bins in shared memory and adds it to the destination once (one cooperative launch, a "
             "workspace of the sorted entries; takes atomic=0, workspace=0, prereduce=0, vec=1); dot: 0"},
            {"bucket",
             {15, 12, 14},
             "partition=1: log2 of the destination elements per bucket (a float bin each in shared memory)",
             "partition",
             {1}},
            {"segment",
             {18, 16},
             "partition=1: log2 of the most entries a block sums at once; a bucket with more is split, and "
             "its segments add to the destination atomically",
             "partition",
             {1}},
            {"order", {0, 1}, "dot: 0 grid-stride, 1 one contiguous chunk per block; index_add: 0"},
            {"cache", {0, 2}, "dot: the loads' L2 eviction priority, 0 normal, 2 evict_first; index_add: 0"},
        }) {}

  std::string_view name() const override { return "scatter_add"; }
  std::string_view template_name() const override { return "scatter_add/scatter_add.cuh"; }
  const Space& space() const override { return space_; }

  std::vector<ProblemOption> problem_options() const override {
    return {{"op", "index_add (the 1-D scatter_add is row_length 1) or dot"},
            {"dtype", "float32, float16 or bfloat16"},
            {"index", "index_add: index dtype, int32 or int64"},
            {"rows", "index_add: destination rows"},
            {"count", "index_add: index entries (= source rows)"},
            {"row_length", "index_add: elements per row (default 1)"},
            {"n", "dot: vector length"}};
  }

  std::unique_ptr<Problem> make_problem(const std::map<std::string, std::string>& options) const override {
    return detail::make_problem(options);
  }

  Config heuristic(const Problem& problem, const DeviceInfo& device) const override {
    return detail::heuristic(static_cast<const ScatterAddProblem&>(problem), device);
  }

  std::string check(const Problem& problem, const Config& config, const DeviceInfo& device) const override {
    return detail::check(static_cast<const ScatterAddProblem&>(problem), config, device);
  }

  KernelSource source(const Problem& problem, const Config& config) const override {
    return detail::source(static_cast<const ScatterAddProblem&>(problem), config);
  }

  LaunchShape launch_shape(const Problem& problem, const Config& config,
                           const DeviceInfo& device) const override {
    return detail::launch_shape(static_cast<const ScatterAddProblem&>(problem), config, device);
  }

  std::unique_ptr<Problem> problem_from_call(const CallArgs& args) const override {
    return detail::problem_from_call(args);
  }

  std::string_view op_name(const Problem& problem) const override {
    return api_name(static_cast<const ScatterAddProblem&>(problem).api());
  }

  // index_add / scatter_add: dst, index, src; dot: x, y, out.
  std::vector<BufferSpec> buffers(const Problem& problem) const override {
    const auto& p = static_cast<const ScatterAddProblem&>(problem);
    if (p.op() == Op::kDot)
      return {{"x", BufferRole::kIn, p.dtype(), {p.count()}, {}},
              {"y", BufferRole::kIn, p.dtype(), {p.count()}, {}},
              {"out", BufferRole::kOut, p.dtype(), {1}, {}}};
    BufferSpec index{"index", BufferRole::kIn, p.index_dtype(), {p.count()}, {}};
    index.index_bound = p.rows();
    return {{"dst", BufferRole::kInOut, p.dtype(), {p.rows(), p.row_length()}, {}},
            std::move(index),
            {"src", BufferRole::kIn, p.dtype(), {p.count(), p.row_length()}, {}}};
  }

  // Nothing to add is nothing to launch; the dot of empty vectors is 0.
  Shortcut shortcut(const Problem& problem) const override {
    const auto& p = static_cast<const ScatterAddProblem&>(problem);
    if (p.op() == Op::kDot) return p.count() == 0 ? Shortcut{Shortcut::Kind::kZero, 0, 2} : Shortcut{};
    if (p.count() == 0 || p.rows() == 0 || p.row_length() == 0) return {Shortcut::Kind::kNothing};
    return {};
  }

  // Slot log2(vec): dot, the widest vector x and y share; index_add, the widest unit the source (and, without
  // the workspace, the destination) is aligned to (the scalar / pair kernel takes any alignment).
  int variant(const Problem& problem, const Config& tuned, const Bindings& b) const override {
    const auto& p = static_cast<const ScatterAddProblem&>(problem);
    if (p.op() != Op::kDot)
      return std::countr_zero(static_cast<unsigned>(index_add_vec(p, tuned, b.pointers[0], b.pointers[2])));
    const DotAlignment a = dot_alignment(b.pointers[0], b.pointers[1], dtype_size(p.dtype()),
                                         static_cast<int>(tuned.at("vec")), p.count());
    return std::countr_zero(static_cast<unsigned>(a.vec));
  }

  Config variant_config(const Problem&, const Config& tuned, int slot,
                        const DeviceInfo&) const override {
    Config c = tuned;
    c.set("vec", std::int64_t{1} << slot);
    return c;
  }

  // dot: only the block counter at the end of the workspace must start at zero (every partial is written
  // before it is read); the float workspace of index_add starts all zero.
  LaunchPrep prep(const Problem& problem, const Config& config) const override {
    const auto& p = static_cast<const ScatterAddProblem&>(problem);
    LaunchPrep prep;
    if (p.op() == Op::kDot) {
      prep.workspace_bytes = p.workspace_bytes();
      prep.zero_begin = prep.workspace_bytes - 4;
      prep.zero_end = prep.workspace_bytes;
      prep.rezeroed_by_kernel = true;  // the last block resets the counter (scatter_add.cuh)
    } else if (config.at("partition")) {
      prep.workspace_bytes = partition_workspace_bytes(p, config);
      prep.zero_end = partition_zeroed_bytes(p, config);
      prep.rezeroed_by_kernel = true;  // the last block zeroes the header again (partition.cuh)
    } else if (config.at("workspace")) {
      prep.workspace_bytes = prep.zero_end = p.workspace_bytes();
    }
    return prep;
  }

  void kernel_args(const Problem& problem, const Config& config, const Bindings& b,
                   KernelArgs& args) const override {
    const auto& p = static_cast<const ScatterAddProblem&>(problem);
    if (p.op() == Op::kDot) {
      const DotAlignment a = dot_alignment(b.pointers[0], b.pointers[1], dtype_size(p.dtype()),
                                           static_cast<int>(config.at("vec")), p.count());
      if (a.vec != config.at("vec"))  // variant() picked the config from these pointers
        throw Error("jitune internal error: dot buffers do not allow vec=" +
                    std::to_string(config.at("vec")));
      push_dot_args(p, a, b.pointers[0], b.pointers[1], b.at(2), b.workspace, args);
      return;
    }
    if (config.at("partition")) {
      push_partition_args(p, config, b.at(0), b.pointers[1], b.pointers[2], b.workspace,
                          static_cast<float>(b.scalar(0, 1.0)), args);
      return;
    }
    if (index_add_vec(p, config, b.pointers[0], b.pointers[2]) != config.at("vec"))
      throw Error("jitune internal error: index_add buffers do not allow vec=" +
                  std::to_string(config.at("vec")));
    push_index_add_args(p, config, b.at(0), b.pointers[1], b.pointers[2], b.workspace,
                        static_cast<float>(b.scalar(0, 1.0)), args);
  }

  Workload workload(const Problem& problem, std::uint64_t seed) const override {
    return detail::workload(static_cast<const ScatterAddProblem&>(problem), seed);
  }

  std::vector<std::vector<std::byte>> reference(const Problem& problem, const Workload& w) const override {
    return detail::reference(static_cast<const ScatterAddProblem&>(problem), w);
  }

  OutputCheck output_check(const Problem& problem, std::size_t) const override {
    const auto& p = static_cast<const ScatterAddProblem&>(problem);
    // Values of magnitude [0.25, 4): rms about 2.39 (a product of two: 5.69).
    if (p.op() == Op::kDot) return accumulation_check(p.dtype(), DType::kFloat32, p.count(), 5.69);
    // The workload gives every row ceil(count / rows) sources at most, plus the initial value.
    const std::int64_t per_row = (p.count() + p.rows() - 1) / p.rows() + 1;
    return accumulation_check(p.dtype(), p.dtype(), per_row, 2.39);
  }

  std::vector<std::pair<std::string, std::string>> default_suite() const override {
    std::vector<std::pair<std::string, std::string>> cases;
    auto index_add = [&](const std::string& dtype, std::int64_t count, std::int64_t rows, std::int64_t d) {
      const std::string name = "index_add_" + dtype + "_" + std::to_string(count) +
                               (d > 1 ? std::string("x") + std::to_string(d) : "") + "_into_" +
                               std::to_string(rows);
      cases.emplace_back(name, "count=" + std::to_string(count) + ";dtype=" + dtype +
                                   ";index=int64;op=index_add;row_length=" + std::to_string(d) +
                                   ";rows=" + std::to_string(rows));
    };
    const std::int64_t n = std::int64_t{1} << 24;
    for (const char* dtype : {"float32", "float16", "bfloat16"}) index_add(dtype, n, 65536, 1);
    // Contention sweep: 1, 2, 4, 16 and 64 sources per destination element.
    for (const char* dtype : {"float16", "float32"})
      for (std::int64_t per : {1, 2, 4, 16, 64}) index_add(dtype, n, n / per, 1);
    for (std::int64_t per : {1, 4, 64}) index_add("bfloat16", n, n / per, 1);  // issue 19's collision levels
    index_add("float16", n / 64, 16384, 64);
    index_add("float16", n / 256, 16384, 256);
    for (const char* dtype : {"float16", "bfloat16"})
      cases.emplace_back(std::string("dot_") + dtype + "_" + std::to_string(n),
                         std::string("dtype=") + dtype + ";n=" + std::to_string(n) + ";op=dot");
    return cases;
  }

 private:
  Space space_;
};

}  // namespace

const Family& scatter_add_family() {
  static const ScatterAddFamily family;
  return family;
}

}  // namespace jitune::templates::scatter_add
