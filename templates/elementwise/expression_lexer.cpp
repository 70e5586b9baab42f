// Lexer of elementwise expressions: the tokens (with the operators expressions may not use rejected by name),
// C number literals with their exact C values, and the error messages with a caret under the offending
// column.
#include "templates/elementwise/expression_syntax.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <string>

#include <jitune/error.hpp>

namespace jitune::templates::elementwise::detail {
namespace {

constexpr std::string_view kNumberHint = "write numbers as C literals, e.g. 2, 0.5f, 1e-3f, 0x1F";

std::string caret_block(std::string_view text, size_t pos) {
  std::string line(text);
  // Newlines and tabs would break the caret's alignment.
  for (char& c : line)
    if (c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f') c = ' ';
  return "  " + line + "\n  " + std::string(std::min(pos, text.size()), ' ') + "^";
}

std::string describe_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  constexpr char kHex[] = "0123456789ABCDEF";
  const std::string code = std::string("0x") + kHex[u >> 4] + kHex[u & 15];
  if (u >= 0x80) return "non-ASCII byte " + code;
  if (u < 0x20 || u == 0x7f) return "control character " + code;
  return std::string("'") + c + "'";
}

bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

struct OperatorSpelling {
  std::string_view text;
  std::string_view rejection;  // empty: allowed
};

constexpr std::string_view kCompound =
    "compound assignments are not allowed; write the full assignment, e.g. 'z = z + x'";
constexpr std::string_view kIncrement = "increment and decrement are not allowed; write e.g. 'z = x + 1'";

// Longest spellings first so that "<<=" is not read as "<<" and "=".
constexpr OperatorSpelling kOperators[] = {
    {"<<=", kCompound},
    {">>=", kCompound},
    {"++", kIncrement},
    {"--", kIncrement},
    {"+=", kCompound},
    {"-=", kCompound},
    {"*=", kCompound},
    {"/=", kCompound},
    {"%=", kCompound},
    {"&=", kCompound},
    {"|=", kCompound},
    {"^=", kCompound},
    {"->", "member access is not allowed; inputs are plain values"},
    {"::", "qualified names like std::exp are not allowed; call the function directly, e.g. expf(x)"},
    {"<<", ""},
    {">>", ""},
    {"<=", ""},
    {">=", ""},
    {"==", ""},
    {"!=", ""},
    {"&&", ""},
    {"||", ""},
    {"+", ""},
    {"-", ""},
    {"*", ""},
    {"/", ""},
    {"%", ""},
    {"<", ""},
    {">", ""},
    {"!", ""},
    {"~", ""},
    {"&", ""},
    {"|", ""},
    {"^", ""},
    {"?", ""},
    {":", ""},
    {"(", ""},
    {")", ""},
    {",", ""},
    {"=", ""},
};

// A C preprocessing number: digits, letters, '_', '.', and a sign right after a decimal exponent. Validated
// later.
size_t number_end(std::string_view text, size_t i) {
  const bool hex = text.size() > i + 1 && text[i] == '0' && (text[i + 1] == 'x' || text[i + 1] == 'X');
  size_t j = i;
  while (j < text.size()) {
    const char c = text[j];
    if (is_alpha(c) || is_digit(c) || c == '.') {
      ++j;
    } else if ((c == '+' || c == '-') && !hex && (text[j - 1] == 'e' || text[j - 1] == 'E')) {
      ++j;
    } else {
      break;
    }
  }
  return j;
}

bool valid_integer_suffix(std::string_view s) {
  if (!s.empty() && (s.front() == 'u' || s.front() == 'U')) {
    s.remove_prefix(1);
  } else if (!s.empty() && (s.back() == 'u' || s.back() == 'U')) {
    s.remove_suffix(1);
  }
  return s.empty() || s == "l" || s == "L" || s == "ll" || s == "LL";
}

int digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return 99;
}

[[noreturn]] void malformed(std::string_view text, const Token& token, const std::string& why) {
  fail(text, token.pos, "malformed number " + quoted(token.text) + why, kNumberHint);
}

[[noreturn]] void too_large(std::string_view text, const Token& token) {
  fail(text, token.pos, "integer literal " + quoted(token.text) + " does not fit in 64 bits",
       "write it as a floating literal, e.g. 1e20f");
}

// "0x1F", "0b101": digits of the base after the prefix, then an optional integer suffix.
Literal parse_based_integer(std::string_view text, const Token& token) {
  const std::string_view s = token.text;
  const int base = (s[1] == 'x' || s[1] == 'X') ? 16 : 2;
  constexpr size_t first = 2;
  size_t j = first;
  std::uint64_t value = 0;
  while (j < s.size() && digit_value(s[j]) < base) {
    const auto digit = static_cast<std::uint64_t>(digit_value(s[j]));
    if (value > (static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) - digit) / base)
      too_large(text, token);
    value = value * base + digit;
    ++j;
  }
  if (j == first) malformed(text, token, ": no digits after the base prefix");
  if (!valid_integer_suffix(s.substr(j))) malformed(text, token, ": unexpected " + quoted(s.substr(j)));
  Literal literal;
  literal.i = static_cast<std::int64_t>(value);
  return literal;
}

// End of a decimal literal's digits, fraction and exponent (its suffix follows); a fraction or an exponent
// makes it floating.
size_t decimal_body_end(std::string_view text, const Token& token, bool& is_float) {
  const std::string_view s = token.text;
  size_t j = 0;
  while (j < s.size() && is_digit(s[j])) ++j;
  size_t mantissa_digits = j;
  if (j < s.size() && s[j] == '.') {
    is_float = true;
    ++j;
    const size_t first = j;
    while (j < s.size() && is_digit(s[j])) ++j;
    mantissa_digits += j - first;
  }
  if (mantissa_digits == 0) malformed(text, token, "");
  if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
    is_float = true;
    ++j;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    const size_t first = j;
    while (j < s.size() && is_digit(s[j])) ++j;
    if (j == first) malformed(text, token, ": the exponent has no digits");
  }
  return j;
}

Literal parse_floating(std::string_view text, const Token& token, std::string_view body,
                       std::string_view suffix) {
  if (!(suffix.empty() || suffix == "f" || suffix == "F" || suffix == "l" || suffix == "L"))
    malformed(text, token, ": unexpected " + quoted(suffix));
  Literal literal;
  literal.is_float = true;
  const auto [end, error] = std::from_chars(body.data(), body.data() + body.size(), literal.f);
  if (error != std::errc() || end != body.data() + body.size())
    fail(text, token.pos, "floating literal " + quoted(token.text) + " is out of the range of double",
         kNumberHint);
  // A float literal's value is its float rounding: 0.1f is not 0.1.
  if (suffix == "f" || suffix == "F") literal.f = static_cast<float>(literal.f);
  return literal;
}

Literal parse_decimal_integer(std::string_view text, const Token& token, std::string_view body,
                              std::string_view suffix) {
  if (!valid_integer_suffix(suffix)) {
    if (suffix == "f" || suffix == "F")
      malformed(text, token, ": an integer cannot take the suffix 'f'; write " + std::string(body) + ".0f");
    malformed(text, token, ": unexpected " + quoted(suffix));
  }
  int base = 10;
  if (body.size() > 1 && body[0] == '0') {
    base = 8;  // C reads a leading 0 as octal: 010 == 8
    for (char c : body)
      if (c > '7')
        malformed(text, token,
                  ": a leading 0 makes it octal, which has no digit " + quoted(std::string(1, c)));
  }
  Literal literal;
  const auto [end, error] = std::from_chars(body.data(), body.data() + body.size(), literal.i, base);
  if (error == std::errc::result_out_of_range) too_large(text, token);
  if (error != std::errc() || end != body.data() + body.size()) malformed(text, token, "");
  return literal;
}

}  // namespace

[[noreturn]] void fail(std::string_view text, size_t pos, const std::string& what, std::string_view hint) {
  std::string message = "invalid elementwise expression: " + what + " (column " + std::to_string(pos + 1) +
                        ")\n" + caret_block(text, pos);
  if (!hint.empty()) message += "\n" + std::string(hint);
  throw InvalidArgument(message);
}

std::string quoted(std::string_view s) {
  // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on "'" + std::string(s) + "'" here.
  std::string out;
  out.reserve(s.size() + 2);
  out += '\'';
  out += s;
  out += '\'';
  return out;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

std::vector<Token> tokenize(std::string_view text) {
  std::vector<Token> tokens;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (is_space(c)) {
      ++i;
      continue;
    }
    if (is_alpha(c)) {
      size_t j = i;
      while (j < text.size() && (is_alpha(text[j]) || is_digit(text[j]))) ++j;
      tokens.push_back({TokenKind::kIdentifier, text.substr(i, j - i), i});
      i = j;
      continue;
    }
    if (is_digit(c) || (c == '.' && i + 1 < text.size() && is_digit(text[i + 1]))) {
      const size_t j = number_end(text, i);
      tokens.push_back({TokenKind::kNumber, text.substr(i, j - i), i});
      i = j;
      continue;
    }
    bool matched = false;
    for (const OperatorSpelling& op : kOperators) {
      if (text.substr(i, op.text.size()) != op.text) continue;
      if (!op.rejection.empty())
        fail(text, i, "operator " + quoted(op.text) + " is not allowed", op.rejection);
      tokens.push_back({TokenKind::kOperator, op.text, i});
      i += op.text.size();
      matched = true;
      break;
    }
    if (!matched) fail(text, i, "unexpected " + describe_char(c), kStatementHint);
  }
  return tokens;
}

Literal parse_number(std::string_view text, const Token& token) {
  const std::string_view s = token.text;
  if (s.size() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X' || s[1] == 'b' || s[1] == 'B'))
    return parse_based_integer(text, token);
  bool is_float = false;
  const size_t end = decimal_body_end(text, token, is_float);
  const std::string_view body = s.substr(0, end), suffix = s.substr(end);
  return is_float ? parse_floating(text, token, body, suffix)
                  : parse_decimal_integer(text, token, body, suffix);
}

}  // namespace jitune::templates::elementwise::detail
