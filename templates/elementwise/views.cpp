// Planning an elementwise call over views: broadcast, validate, drop size-1 dims, order by the output, merge,
// classify.
#include "templates/elementwise/views.hpp"

#include <algorithm>
#include <numeric>

#include <jitune/error.hpp>

#include "templates/elementwise/elementwise.hpp"
#include "templates/host_float.hpp"
#include "templates/host_parallel.hpp"

namespace jitune::templates::elementwise {
namespace {

std::string list_text(std::span<const std::int64_t> values) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(values[i]);
  }
  return out;
}

std::string operand_name(std::size_t index, std::size_t inputs) {
  return index == inputs ? "the output" : "input " + std::to_string(index);
}

void check_view(const View& v, const std::string& name) {
  if (v.shape.size() != v.strides.size())
    throw InvalidArgument("elementwise: " + name + " has " + std::to_string(v.shape.size()) + " sizes but " +
                          std::to_string(v.strides.size()) + " strides; give one stride per dim");
  for (std::size_t d = 0; d < v.shape.size(); ++d) {
    if (v.shape[d] < 0)
      throw InvalidArgument("elementwise: " + name + " has size " + std::to_string(v.shape[d]) + " at dim " +
                            std::to_string(d) + "; sizes are >= 0");
    if (v.strides[d] < 0)
      throw InvalidArgument("elementwise: " + name + " has stride " + std::to_string(v.strides[d]) + " at dim " +
                            std::to_string(d) + " (a flipped view); negative strides are not supported: make it "
                            "contiguous first (.contiguous())");
  }
}

// Whether no two indices of `shape` (sizes > 1 only) reach one element through `strides`: sorted by stride, each
// stride must pass the farthest element of the dims inside it.
bool overlaps(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  std::vector<std::size_t> dims;
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (shape[d] > 1) dims.push_back(d);
  std::sort(dims.begin(), dims.end(), [&](std::size_t a, std::size_t b) { return strides[a] < strides[b]; });
  std::int64_t reach = 0;  // the largest offset the inner dims reach
  for (std::size_t d : dims) {
    if (strides[d] <= reach) return true;
    reach += strides[d] * (shape[d] - 1);
  }
  return false;
}

bool dense_inner(const std::vector<std::int64_t>& st) { return st.back() == 1; }
bool all_zero(const std::vector<std::int64_t>& st) {
  return std::all_of(st.begin(), st.end(), [](std::int64_t s) { return s == 0; });
}

LayoutClass classify(const ViewPlan& p) {
  const std::vector<std::int64_t>& out = p.strides[0];
  const std::size_t dims = p.shape.size();
  const auto inputs = std::span(p.strides).subspan(1);
  if (dims == 1) {
    const bool simple = out[0] == 1 && std::all_of(inputs.begin(), inputs.end(), [](const auto& st) {
      return st[0] == 0 || st[0] == 1;
    });
    return simple ? LayoutClass::kContiguous : LayoutClass::kGeneral;
  }
  if (!dense_inner(out)) return LayoutClass::kGeneral;
  if (std::all_of(inputs.begin(), inputs.end(), [](const auto& st) { return dense_inner(st) || all_zero(st); }))
    return LayoutClass::kRows;
  if (std::all_of(inputs.begin(), inputs.end(), [](const auto& st) { return st.back() == 0 || st.back() == 1; }))
    return LayoutClass::kBroadcastColumn;
  const bool transposed = std::any_of(inputs.begin(), inputs.end(), [](const auto& st) {
    return st.back() > 1 && std::find(st.begin(), st.end() - 1, 1) != st.end() - 1;
  });
  return transposed ? LayoutClass::kInnerTranspose : LayoutClass::kGeneral;
}

// Bit a set when input a is read along the row (inner stride not 0) and is not a scalar passed by value.
unsigned dense_inputs(const ViewPlan& plan, unsigned scalars) {
  unsigned mask = 0;
  for (std::size_t a = 1; a < plan.strides.size(); ++a)
    if (plan.strides[a].back() != 0 && !((scalars >> (a - 1)) & 1u)) mask |= 1u << (a - 1);
  return mask;
}

}  // namespace

std::string_view layout_class_name(LayoutClass layout) noexcept {
  switch (layout) {
    case LayoutClass::kContiguous: return "contiguous";
    case LayoutClass::kRows: return "rows";
    case LayoutClass::kBroadcastColumn: return "broadcast_column";
    case LayoutClass::kInnerTranspose: return "inner_transpose";
    case LayoutClass::kGeneral: return "general";
  }
  return "general";
}

std::string ViewPlan::key() const {
  std::string out = "layout=" + std::string(layout_class_name(layout)) + ";shape=" + list_text(shape) + ";strides=";
  for (std::size_t i = 0; i < strides.size(); ++i) {
    if (i) out += '|';
    out += list_text(strides[i]);
  }
  return out;
}

std::vector<std::int64_t> dense_strides(std::span<const std::int64_t> shape) {
  std::vector<std::int64_t> out(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) out[d - 1] = out[d] * std::max<std::int64_t>(shape[d], 1);
  return out;
}

std::vector<std::int64_t> broadcast_shape(std::span<const std::vector<std::int64_t>> shapes) {
  std::size_t dims = 0;
  for (const auto& s : shapes) dims = std::max(dims, s.size());
  std::vector<std::int64_t> out(dims, 1);
  std::vector<std::size_t> from(dims, 0);  // which shape set each dim, for the message
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const auto& s = shapes[i];
    for (std::size_t k = 0; k < s.size(); ++k) {
      const std::size_t d = dims - s.size() + k;
      if (s[k] == 1) continue;
      if (out[d] == 1) {
        out[d] = s[k];
        from[d] = i;
      } else if (out[d] != s[k]) {
        throw InvalidArgument("elementwise: shapes [" + list_text(shapes[from[d]]) + "] and [" + list_text(s) +
                              "] do not broadcast: at dim " + std::to_string(d) + " (counted over " +
                              std::to_string(dims) + " right-aligned dims) one is " + std::to_string(out[d]) +
                              " and the other " + std::to_string(s[k]) + "; sizes must be equal or 1");
      }
    }
  }
  return out;
}

ViewPlan plan_views(std::span<const View> inputs, const View& output) {
  const std::size_t n_inputs = inputs.size();
  std::vector<const View*> ops;  // the output first, then the inputs
  ops.push_back(&output);
  for (const View& v : inputs) ops.push_back(&v);
  for (std::size_t i = 0; i < ops.size(); ++i) check_view(*ops[i], operand_name(i == 0 ? n_inputs : i - 1, n_inputs));

  std::vector<std::vector<std::int64_t>> shapes;
  for (const View* v : ops) shapes.push_back(v->shape);
  const std::vector<std::int64_t> full = broadcast_shape(shapes);
  if (full != output.shape)
    throw InvalidArgument("elementwise: the output has shape [" + list_text(output.shape) + "] but the operands "
                          "broadcast to [" + list_text(full) + "]; give an output of the broadcast shape");
  for (std::size_t d = 0; d < output.shape.size(); ++d)
    if (output.shape[d] > 1 && output.strides[d] == 0)
      throw InvalidArgument("elementwise: the output has stride 0 at dim " + std::to_string(d) + " of size " +
                            std::to_string(output.shape[d]) + " (an expanded view): its elements overlap; write "
                            "into a tensor that owns its elements");
  if (overlaps(output.shape, output.strides))
    throw InvalidArgument("elementwise: the output's strides [" + list_text(output.strides) + "] for shape [" +
                          list_text(output.shape) + "] make two elements share memory; write into a tensor whose "
                          "elements do not overlap");

  ViewPlan plan;
  plan.elements = std::accumulate(full.begin(), full.end(), std::int64_t{1}, std::multiplies<>());
  plan.strides.resize(ops.size());
  if (plan.elements == 0) {  // an empty problem: nothing to launch
    plan.shape = {0};
    for (auto& st : plan.strides) st = {1};
    plan.layout = LayoutClass::kContiguous;
    return plan;
  }
  // Right-aligned strides of every operand over the broadcast dims; 0 where an operand is broadcast.
  const std::size_t dims = full.size();
  std::vector<std::vector<std::int64_t>> aligned(ops.size(), std::vector<std::int64_t>(dims, 0));
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const View& v = *ops[i];
    for (std::size_t k = 0; k < v.shape.size(); ++k)
      if (v.shape[k] != 1) aligned[i][dims - v.shape.size() + k] = v.strides[k];
  }
  // Dims of size 1 go; the rest in the output's memory order (largest output stride first).
  std::vector<std::size_t> order;
  for (std::size_t d = 0; d < dims; ++d)
    if (full[d] > 1) order.push_back(d);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return aligned[0][a] > aligned[0][b]; });
  if (order.empty()) {  // one element
    plan.shape = {1};
    for (auto& st : plan.strides) st = {1};
    plan.layout = LayoutClass::kContiguous;
    return plan;
  }
  // Merge from the inside out: dim `outer` folds into the merged inner one when every operand steps over the
  // whole inner extent with its outer stride.
  std::vector<std::int64_t> shape = {full[order.back()]};
  for (std::size_t i = 0; i < ops.size(); ++i) plan.strides[i] = {aligned[i][order.back()]};
  for (std::size_t k = order.size() - 1; k-- > 0;) {
    const std::size_t d = order[k];
    bool merge = true;
    for (std::size_t i = 0; i < ops.size() && merge; ++i)
      merge = aligned[i][d] == plan.strides[i].front() * shape.front();
    if (merge) {
      shape.front() *= full[d];
    } else {
      shape.insert(shape.begin(), full[d]);
      for (std::size_t i = 0; i < ops.size(); ++i) plan.strides[i].insert(plan.strides[i].begin(), aligned[i][d]);
    }
  }
  plan.shape = std::move(shape);
  plan.layout = classify(plan);
  return plan;
}

ViewKernel view_kernel(const ViewPlan& plan) noexcept {
  if (plan.shape.size() < 2) return ViewKernel::kGather;
  // A block per row: worth it for rows of a few hundred elements and more; short rows go to gather.
  constexpr std::int64_t kMinRow = 128;
  if ((plan.layout == LayoutClass::kRows || plan.layout == LayoutClass::kBroadcastColumn) &&
      plan.shape.back() >= kMinRow)
    return ViewKernel::kRows;
  if (plan.layout == LayoutClass::kInnerTranspose && view_transposed_dim(plan) >= 0) return ViewKernel::kTiled;
  return ViewKernel::kGather;
}

int view_transposed_dim(const ViewPlan& plan) noexcept {
  const std::size_t inner = plan.shape.size() - 1;
  for (std::size_t i = 1; i < plan.strides.size(); ++i) {
    const auto& st = plan.strides[i];
    if (plan.shape.size() < 2 || st[inner] <= 1) continue;
    for (std::size_t d = 0; d < inner; ++d)
      if (st[d] == 1) return static_cast<int>(d);
  }
  return -1;
}

bool views_rows_mixed(const ViewPlan& plan, std::int64_t pack) noexcept {
  if (pack <= 1) return false;
  const std::size_t inner = plan.shape.size() - 1;
  for (std::size_t i = 1; i < plan.strides.size(); ++i) {
    if (plan.strides[i][inner] != 1) continue;  // not read along the row
    for (std::size_t d = 0; d < inner; ++d)
      if (plan.strides[i][d] % pack != plan.strides[0][d] % pack) return true;
  }
  return false;
}

unsigned view_transposed_inputs(const ViewPlan& plan) noexcept {
  const int t = view_transposed_dim(plan);
  if (t < 0) return 0;
  const std::size_t inner = plan.shape.size() - 1;
  unsigned mask = 0;
  for (std::size_t i = 1; i < plan.strides.size(); ++i)
    if (plan.strides[i][static_cast<std::size_t>(t)] == 1 && plan.strides[i][inner] > 1) mask |= 1u << (i - 1);
  return mask;
}

std::vector<std::int64_t> view_extents(const ViewPlan& plan) {
  std::vector<std::int64_t> out;
  for (const auto& st : plan.strides) {
    std::int64_t last = 0;
    for (std::size_t d = 0; d < plan.shape.size(); ++d) last += (plan.shape[d] - 1) * st[d];
    out.push_back(plan.elements == 0 ? 0 : last + 1);
  }
  return out;
}

bool views_need_index64(const ViewPlan& plan) {
  // Grid-stride indices pass the end by up to a grid of tiles (2^25 and more on big GPUs): keep them under 2^31.
  constexpr std::int64_t kLimit = std::int64_t{1} << 30;
  if (plan.elements >= kLimit) return true;
  for (std::int64_t extent : view_extents(plan))
    if (extent >= kLimit) return true;
  return false;
}

KernelSource view_source(const Expression& expression, DType dtype, const ViewPlan& plan, const Config& config,
                         unsigned scalars) {
  constexpr std::size_t kMaxDims = 8;
  if (plan.shape.size() > kMaxDims)
    throw InvalidArgument("elementwise: " + std::to_string(plan.shape.size()) + " dims remain after merging; at "
                          "most 8 are supported");
  if (expression.inputs.size() > kMaxInputs)
    throw InvalidArgument("elementwise: " + std::to_string(expression.inputs.size()) + " inputs; at most 8");
  const std::string type(dtype_cuda_type(dtype));
  const std::string arity = std::to_string(expression.inputs.size()), dims = std::to_string(plan.shape.size());
  const std::string index = (views_need_index64(plan) ? "long long" : "int") + std::string(", ") +
                            std::to_string(scalars) + "u";  // the last two template arguments
  std::string name;
  if (view_kernel(plan) == ViewKernel::kTiled)
    name = "jitune::ewv::tiled<jitune_ew_op, " + type + ", " + arity + ", " + dims + ", " +
           std::to_string(view_transposed_dim(plan)) + ", " + std::to_string(config.at("tile")) + ", " +
           std::to_string(config.at("pack")) + ", " + std::to_string(config.at("block")) + ", " +
           std::to_string(config.at("group")) + ", " + index + ", " +
           std::to_string(view_transposed_inputs(plan)) + "u, " + std::to_string(config.at("minblocks")) + ">";
  else if (view_kernel(plan) == ViewKernel::kRows && config.at("flat") == 1)
    name = "jitune::ewv::flat<jitune_ew_op, " + type + ", " + arity + ", " + dims + ", " +
           std::to_string(config.at("pack")) + ", " + std::to_string(config.at("block")) + ", " +
           std::to_string(config.at("unroll")) + ", " + index + ", " + std::to_string(dense_inputs(plan, scalars)) +
           "u>";
  else if (view_kernel(plan) == ViewKernel::kRows)
    name = "jitune::ewv::rows<jitune_ew_op, " + type + ", " + arity + ", " + dims + ", " +
           std::to_string(config.at("pack")) + ", " + std::to_string(config.at("block")) + ", " +
           std::to_string(config.at("unroll")) + ", " + index + ", " +
           (views_rows_mixed(plan, config.at("pack")) ? "true" : "false") + ">";
  else
    name = "jitune::ewv::gather<jitune_ew_op, " + type + ", " + arity + ", " + dims + ", " +
           std::to_string(config.at("block")) + ", " + std::to_string(config.at("unroll")) + ", " + index + ">";
  return {"#include \"elementwise/views.cuh\"\n" + op_functor_source(expression), std::move(name)};
}

void view_reference(const Expression& expression, DType dtype, const ViewPlan& plan,
                    std::span<const std::byte* const> inputs, std::vector<std::byte>& out, unsigned scalars,
                    std::span<const double> values) {
  const Evaluator eval(expression);
  const std::size_t dims = plan.shape.size(), operands = plan.strides.size();
  parallel_for(static_cast<std::uint64_t>(plan.elements), [&](std::uint64_t begin, std::uint64_t end) {
    double v[8];
    std::int64_t at[9];
    for (std::uint64_t e = begin; e < end; ++e) {
      std::fill(at, at + operands, 0);
      std::int64_t rest = static_cast<std::int64_t>(e);
      for (std::size_t d = dims; d-- > 0;) {
        const std::int64_t i = rest % plan.shape[d];
        rest /= plan.shape[d];
        for (std::size_t a = 0; a < operands; ++a) at[a] += i * plan.strides[a][d];
      }
      for (std::size_t a = 0; a + 1 < operands; ++a)
        v[a] = (scalars >> a) & 1u ? static_cast<double>(static_cast<float>(values[a]))
                                   : load_element(dtype, inputs[a], static_cast<std::uint64_t>(at[a + 1]));
      store_element(dtype, out.data(), static_cast<std::uint64_t>(at[0]), static_cast<float>(eval(v)));
    }
  });
}

}  // namespace jitune::templates::elementwise
