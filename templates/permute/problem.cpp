// The permute problem: option and call parsing, validation, the plans per movement, signature and features.
#include <bit>
#include <charconv>
#include <cmath>

#include "templates/permute/permute_detail.hpp"

namespace jitune::templates::permute {
namespace {

constexpr std::int64_t kMaxBytes = std::int64_t{1} << 62;

std::int64_t parse_count(std::string_view text, const char* what) {
  std::int64_t v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0)
    throw InvalidArgument(std::string("permute problem: ") + what + " '" + std::string(text) +
                          "' is not a non-negative integer");
  return v;
}

// "64x1024x1024" or "64,1024,1024"; empty: a 0-d tensor.
std::vector<std::int64_t> parse_shape(std::string_view text) {
  std::vector<std::int64_t> out;
  if (text.empty()) return out;
  std::size_t start = 0;
  while (true) {
    const std::size_t sep = text.find_first_of("x,", start);
    out.push_back(parse_count(text.substr(start, sep - start), "shape extent"));
    if (sep == std::string_view::npos) break;
    start = sep + 1;
  }
  return out;
}

int log2_of(int bytes) {
  return std::countr_zero(static_cast<unsigned>(bytes));
}

}  // namespace

namespace detail {

std::string join(std::span<const std::int64_t> values, char sep) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i)
    out += (i ? std::string(1, sep) : "") + std::to_string(values[i]);
  return out;
}

std::string join(std::span<const int> values, char sep) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i)
    out += (i ? std::string(1, sep) : "") + std::to_string(values[i]);
  return out;
}

// "0,2,1" or the digits alone, "021" (at most 8 dims, so one digit each); empty: a 0-d tensor.
std::vector<int> parse_perm(std::string_view text) {
  std::vector<int> out;
  if (text.find(',') == std::string_view::npos) {
    for (char c : text) {
      if (c < '0' || c > '9')
        throw InvalidArgument("permute problem: perm '" + std::string(text) +
                              "' is neither comma-separated dims (0,2,1) nor digits (021)");
      out.push_back(c - '0');
    }
    return out;
  }
  std::size_t start = 0;
  while (true) {
    const std::size_t sep = text.find(',', start);
    out.push_back(static_cast<int>(parse_count(text.substr(start, sep - start), "perm entry")));
    if (sep == std::string_view::npos) break;
    start = sep + 1;
  }
  return out;
}

std::unique_ptr<Problem> make_problem(const std::map<std::string, std::string>& options) {
  for (const auto& [key, value] : options)
    if (key != "dtype" && key != "shape" && key != "perm")
      throw InvalidArgument("permute problem: unknown option '" + key + "'; options are dtype, shape, perm");
  auto get = [&](const char* key) -> const std::string& {
    auto it = options.find(key);
    if (it == options.end())
      throw InvalidArgument(std::string("permute problem: missing '") + key +
                            "' (options: dtype, shape, perm)");
    return it->second;
  };
  return std::make_unique<PermuteProblem>(parse_dtype(get("dtype")), parse_shape(get("shape")),
                                          parse_perm(get("perm")));
}

std::unique_ptr<Problem> problem_from_call(const CallArgs& args) {
  CallReader in(args);
  const DType dtype = in.next_dtype();
  std::vector<std::int64_t> shape = in.next_list();
  std::vector<int> perm = in.next_list<int>();
  return std::make_unique<PermuteProblem>(dtype, std::move(shape), std::move(perm));
}

}  // namespace detail

using detail::join;

void validate(std::span<const std::int64_t> shape, std::span<const int> perm, std::size_t element_size) {
  const std::string where = "permute of shape (" + join(shape, ',') + ") by perm (" + join(perm, ',') + ")";
  if (shape.size() > static_cast<std::size_t>(kMaxRank))
    throw InvalidArgument(where + ": " + std::to_string(shape.size()) +
                          " dims; at most 8 are supported (merge dims that stay together first)");
  if (perm.size() != shape.size())
    throw InvalidArgument(where + ": the permutation has " + std::to_string(perm.size()) + " entries for " +
                          std::to_string(shape.size()) + " dims; give one output position per input dim");
  unsigned seen = 0;
  for (int d : perm) {
    if (d < 0 || d >= static_cast<int>(shape.size()))
      throw InvalidArgument(where + ": entry " + std::to_string(d) + " is outside 0.." +
                            std::to_string(static_cast<int>(shape.size()) - 1) +
                            "; perm must be a permutation of 0..n-1");
    if (seen & (1u << d))
      throw InvalidArgument(where + ": dim " + std::to_string(d) +
                            " appears twice; perm must be a permutation of 0..n-1");
    seen |= 1u << d;
  }
  std::int64_t bytes = static_cast<std::int64_t>(element_size);
  bool empty = false;
  for (std::int64_t extent : shape) {
    if (extent < 0) throw InvalidArgument(where + ": extent " + std::to_string(extent) + " is negative");
    empty = empty || extent == 0;
  }
  if (!empty)
    for (std::int64_t extent : shape) {
      if (bytes > kMaxBytes / extent)
        throw InvalidArgument(where + ": the tensor holds more than 2^62 bytes");
      bytes *= extent;
    }
}

PermuteProblem::PermuteProblem(DType dtype, std::vector<std::int64_t> shape, std::vector<int> perm)
    : dtype_(dtype), shape_(std::move(shape)), perm_(std::move(perm)) {
  const int es = element_size();
  validate(shape_, perm_, static_cast<std::size_t>(es));
  elements_ = 1;
  for (std::int64_t extent : shape_) elements_ *= extent;
  max_movement_ = simplify(shape_, perm_, es, 16).unit;
  for (int m = es; m <= max_movement_; m *= 2) plans_[log2_of(m)] = simplify(shape_, perm_, es, m);
}

const Plan& PermuteProblem::plan(int bytes) const {
  if (bytes < element_size() || bytes > max_movement_ || !std::has_single_bit(static_cast<unsigned>(bytes)))
    throw InvalidArgument("permute " + signature() + ": movement " + std::to_string(bytes) +
                          " is not a power of two between the element size and " +
                          std::to_string(max_movement_));
  return plans_[log2_of(bytes)];
}

std::string PermuteProblem::signature() const {
  return "dtype=" + std::string(dtype_name(dtype_)) + ";perm=" + join(perm_, ',') +
         ";shape=" + join(shape_, 'x');
}

std::string PermuteProblem::group() const {
  const Plan& p = plans_[log2_of(max_movement_)];
  return "bytes=" + std::to_string(p.unit) +
         "|perm=" + join(std::span<const int>(p.perm.data(), p.rank), ',');
}

std::vector<double> PermuteProblem::features() const {
  const Plan& p = plans_[log2_of(max_movement_)];
  std::vector<double> f;
  for (int d = 0; d < p.rank; ++d) f.push_back(std::log2(static_cast<double>(p.dims[d])));
  return f;
}

double PermuteProblem::bytes_moved() const {
  return 2.0 * static_cast<double>(elements_) * element_size();
}

}  // namespace jitune::templates::permute
