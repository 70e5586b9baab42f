// The scatter_add problem: option and call parsing, validation of index_add and dot, signature and features.
#include <charconv>
#include <cmath>

#include "templates/scatter_add/scatter_add_detail.hpp"

namespace jitune::templates::scatter_add {
namespace {

bool float_type(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16;
}
bool index_type(DType d) {
  return d == DType::kInt32 || d == DType::kInt64;
}

std::int64_t parse_count(const std::map<std::string, std::string>& options, const char* key) {
  auto it = options.find(key);
  if (it == options.end()) throw InvalidArgument(std::string("scatter_add problem: missing '") + key + "'");
  const std::string& text = it->second;
  std::int64_t v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0)
    throw InvalidArgument(std::string("scatter_add problem: ") + key + "='" + text +
                          "' is not a non-negative integer");
  return v;
}

// index_add's rules for a call that adds something: supported dtypes, at least one row of at least one
// element, a non-negative count, at most 2^48 elements on either side.
void validate_index_add(DType dtype, DType index_dtype, std::int64_t rows, std::int64_t count,
                        std::int64_t row_length) {
  if (!float_type(dtype))
    throw InvalidArgument("index_add: dtype " + std::string(dtype_name(dtype)) +
                          " is not supported; use float32, float16 or bfloat16");
  if (!index_type(index_dtype))
    throw InvalidArgument("index_add: index dtype " + std::string(dtype_name(index_dtype)) +
                          " is not supported; use int32 or int64");
  if (rows < 1)
    throw InvalidArgument("index_add: the destination needs at least one row, got " + std::to_string(rows));
  if (row_length < 1)
    throw InvalidArgument("index_add: row_length must be at least 1, got " + std::to_string(row_length));
  if (count < 0) throw InvalidArgument("index_add: index count " + std::to_string(count) + " is negative");
  constexpr std::int64_t kMaxElements = std::int64_t{1}
                                        << 48;  // far beyond any device, and no overflow below it
  if (rows > kMaxElements / row_length || count > kMaxElements / row_length)
    throw InvalidArgument("index_add: " + std::to_string(rows) + " or " + std::to_string(count) +
                          " rows of " + std::to_string(row_length) + " elements exceed 2^48 elements");
}
}  // namespace

namespace detail {

std::unique_ptr<Problem> make_problem(const std::map<std::string, std::string>& options) {
  auto op_it = options.find("op");
  const std::string op = op_it == options.end() ? "index_add" : op_it->second;
  auto dtype_it = options.find("dtype");
  if (dtype_it == options.end()) throw InvalidArgument("scatter_add problem: missing 'dtype'");
  const DType dtype = parse_dtype(dtype_it->second);
  if (op == "dot") {
    for (const auto& [key, value] : options)
      if (key != "op" && key != "dtype" && key != "n")
        throw InvalidArgument("scatter_add dot problem: unknown option '" + key +
                              "'; options are op, dtype, n");
    return std::make_unique<ScatterAddProblem>(ScatterAddProblem::dot(dtype, parse_count(options, "n")));
  }
  if (op != "index_add")
    throw InvalidArgument("scatter_add problem: op='" + op + "' is unknown; use index_add or dot");
  for (const auto& [key, value] : options)
    if (key != "op" && key != "dtype" && key != "index" && key != "rows" && key != "count" &&
        key != "row_length")
      throw InvalidArgument("scatter_add index_add problem: unknown option '" + key +
                            "'; options are op, dtype, index, rows, count, row_length");
  auto index_it = options.find("index");
  const DType index = index_it == options.end() ? DType::kInt64 : parse_dtype(index_it->second);
  const std::int64_t row_length = options.count("row_length") ? parse_count(options, "row_length") : 1;
  return std::make_unique<ScatterAddProblem>(ScatterAddProblem::index_add(
      dtype, index, parse_count(options, "rows"), parse_count(options, "count"), row_length));
}

// Values in the order of the public wrappers: api (kIndexAddCall, kScatterAddCall, kDotCall), dtype, then
// index_add: index dtype, dst_rows, index_count, src_rows, row_length; scatter_add: index dtype, dst_count,
// index_count, src_count; dot: n.
std::unique_ptr<Problem> problem_from_call(const CallArgs& args) {
  CallReader in(args);
  const auto api = static_cast<Api>(in.next());
  const DType dtype = in.next_dtype();
  if (api == Api::kDot) return std::make_unique<ScatterAddProblem>(ScatterAddProblem::dot(dtype, in.next()));
  const DType index_dtype = in.next_dtype();
  const std::int64_t rows = in.next(), count = in.next(), src_rows = in.next();
  const std::int64_t row_length = api == Api::kIndexAdd ? in.next() : 1;
  return std::make_unique<ScatterAddProblem>(
      ScatterAddProblem::call(api, dtype, index_dtype, rows, count, src_rows, row_length));
}

}  // namespace detail

ScatterAddProblem::ScatterAddProblem(Api api, DType dtype, DType index_dtype, std::int64_t rows,
                                     std::int64_t count, std::int64_t row_length) noexcept
    : op_(Op::kIndexAdd),
      api_(api),
      dtype_(dtype),
      index_dtype_(index_dtype),
      rows_(rows),
      count_(count),
      row_length_(row_length) {}

ScatterAddProblem ScatterAddProblem::index_add(DType dtype, DType index_dtype, std::int64_t rows,
                                               std::int64_t count, std::int64_t row_length) {
  validate_index_add(dtype, index_dtype, rows, count, row_length);
  return ScatterAddProblem(Api::kIndexAdd, dtype, index_dtype, rows, count, row_length);
}

std::string_view api_name(Api api) noexcept {
  switch (api) {
    case Api::kIndexAdd:
      return "index_add";
    case Api::kScatterAdd:
      return "scatter_add";
    case Api::kDot:
      return "dot";
  }
  return "scatter_add";
}

ScatterAddProblem ScatterAddProblem::call(Api api, DType dtype, DType index_dtype, std::int64_t rows,
                                          std::int64_t count, std::int64_t src_rows,
                                          std::int64_t row_length) {
  const std::string op(api_name(api));
  if (!float_type(dtype))
    throw InvalidArgument(op + ": dtype " + std::string(dtype_name(dtype)) +
                          " is not supported; use float32, float16 or bfloat16");
  if (!index_type(index_dtype))
    throw InvalidArgument(op + ": index dtype " + std::string(dtype_name(index_dtype)) +
                          " is not supported; use int32 or int64");
  const char* names[] = {api == Api::kIndexAdd ? "dst_rows" : "dst_count", "index_count",
                         api == Api::kIndexAdd ? "src_rows" : "src_count", "row_length"};
  const std::int64_t values[] = {rows, count, src_rows, row_length};
  for (int i = 0; i < 4; ++i)
    if (values[i] < 0)
      throw InvalidArgument(op + ": " + names[i] + " is negative (" + std::to_string(values[i]) + ")");
  if (api == Api::kIndexAdd && src_rows != count)
    throw InvalidArgument("index_add: src has " + std::to_string(src_rows) + " rows but index has " +
                          std::to_string(count) +
                          " entries; source row i goes to destination row index[i], so they must match");
  if (api == Api::kScatterAdd && count > src_rows)
    throw InvalidArgument("scatter_add: index has " + std::to_string(count) + " entries but src only " +
                          std::to_string(src_rows) + " elements; index may not be longer than src");
  // An empty call is valid and does nothing: keep its sizes as given (its buffers may be empty).
  if (rows > 0 && row_length > 0 && count > 0)
    validate_index_add(dtype, index_dtype, rows, count, row_length);
  return ScatterAddProblem(api, dtype, index_dtype, rows, count, row_length);
}

ScatterAddProblem ScatterAddProblem::dot(DType dtype, std::int64_t n) {
  if (!float_type(dtype))
    throw InvalidArgument("dot: dtype " + std::string(dtype_name(dtype)) +
                          " is not supported; use float16, bfloat16 or float32");
  if (n < 0) throw InvalidArgument("dot: n is negative (" + std::to_string(n) + ")");
  if (n > (std::int64_t{1} << 48))
    throw InvalidArgument("dot: length " + std::to_string(n) + " exceeds 2^48");
  ScatterAddProblem p;
  p.op_ = Op::kDot;
  p.api_ = Api::kDot;
  p.dtype_ = dtype;
  p.count_ = n;
  return p;
}

bool ScatterAddProblem::workspace_possible() const noexcept {
  if (op_ == Op::kDot) return true;
  return dtype_ != DType::kFloat32 && dst_elements() <= kMaxWorkspaceElements;
}

std::size_t ScatterAddProblem::workspace_bytes() const noexcept {
  if (op_ == Op::kDot) return (static_cast<std::size_t>(kMaxDotBlocks) + 1) * sizeof(float);
  return workspace_possible() ? (static_cast<std::size_t>(dst_elements()) + 1) * sizeof(float) : 0;
}

std::string ScatterAddProblem::signature() const {
  if (op_ == Op::kDot)
    return "dtype=" + std::string(dtype_name(dtype_)) + ";n=" + std::to_string(count_) + ";op=dot";
  return "count=" + std::to_string(count_) + ";dtype=" + std::string(dtype_name(dtype_)) +
         ";index=" + std::string(dtype_name(index_dtype_)) +
         ";op=index_add;row_length=" + std::to_string(row_length_) + ";rows=" + std::to_string(rows_);
}

std::string ScatterAddProblem::group() const {
  if (op_ == Op::kDot) return "dot|" + std::string(dtype_name(dtype_));
  return "index_add|" + std::string(dtype_name(dtype_)) + "|" + std::string(dtype_name(index_dtype_));
}

std::vector<double> ScatterAddProblem::features() const {
  auto l = [](std::int64_t v) { return std::log2(static_cast<double>(v) + 1.0); };
  if (op_ == Op::kDot) return {l(count_)};
  return {l(count_), l(rows_), l(row_length_)};
}

double ScatterAddProblem::bytes_moved() const {
  const auto es = static_cast<double>(dtype_size(dtype_));
  if (op_ == Op::kDot) return 2.0 * static_cast<double>(count_) * es + es;
  return static_cast<double>(count_) *
             (static_cast<double>(row_length_) * es + static_cast<double>(dtype_size(index_dtype_))) +
         static_cast<double>(dst_elements()) * es;
}

double ScatterAddProblem::flops() const {
  return op_ == Op::kDot ? 2.0 * static_cast<double>(count_)
                         : static_cast<double>(count_) * static_cast<double>(row_length_);
}

}  // namespace jitune::templates::scatter_add
