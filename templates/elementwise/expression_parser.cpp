// Parser of elementwise expressions: one recursive-descent parser with C's precedence and associativity over
// the lexer's tokens, the checks on names (keywords, reserved names, constants), the statement checks (one
// assignment, inputs read, at most kMaxInputs), and parse_expression's canonical text.
#include "templates/elementwise/expression.hpp"

#include <algorithm>
#include <string>

#include <jitune/error.hpp>

#include "templates/elementwise/expression_syntax.hpp"

namespace jitune::templates::elementwise {
namespace detail {
namespace {

constexpr std::string_view kConstants[] = {"true", "false", "INFINITY", "NAN", "M_PI", "M_E"};
constexpr std::string_view kCastTypes[] = {"float", "double", "int"};

// C, C++ and their alternative operator spellings ("and" is "&&" in C++, so it cannot be a name either).
// clang-format off
constexpr std::string_view kKeywords[] = {
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch",
    "char", "char8_t", "char16_t", "char32_t", "class", "co_await", "co_return", "co_yield", "compl", "concept",
    "const", "consteval", "constexpr", "constinit", "const_cast", "continue", "decltype", "default", "delete", "do",
    "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "float", "for", "friend", "goto", "if",
    "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or",
    "or_eq", "private", "protected", "public", "register", "reinterpret_cast", "requires", "restrict", "return",
    "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct", "switch", "template", "this",
    "thread_local", "throw", "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void",
    "volatile", "wchar_t", "while", "xor", "xor_eq",
};
// clang-format on

template <size_t N>
bool contains(const std::string_view (&list)[N], std::string_view name) {
  return std::find(std::begin(list), std::end(list), name) != std::end(list);
}

void check_name(std::string_view text, const Token& token, bool is_output) {
  const std::string_view name = token.text;
  if (name.starts_with("__") || name.starts_with("jitune"))
    fail(text, token.pos, "name " + quoted(name) + " is reserved",
         "names starting with '__' or 'jitune' belong to the generated kernel; rename it");
  if (contains(kKeywords, name))
    fail(text, token.pos, quoted(name) + " is a C++ keyword and cannot be used as a name",
         "rename it; the only keywords allowed are the casts (float), (double), (int) and true/false");
  if (is_output && contains(kConstants, name))
    fail(text, token.pos, "cannot assign to the constant " + quoted(name), kAssignHint);
}

class Parser {
 public:
  Parser(Statement& statement, size_t first) : s_(statement), next_(first) {}

  int parse() {
    const int root = ternary();
    if (next_ < s_.tokens.size()) {
      const Token& t = s_.tokens[next_];
      if (t.kind == TokenKind::kIdentifier) check_name(s_.text, t, false);  // "x and y" is a keyword problem
      if (t.text == ")") fail_at(t, "unbalanced parentheses: this ')' has no matching '('", kStatementHint);
      if (t.text == ",") fail_at(t, "',' is only allowed between function arguments", kStatementHint);
      if (t.text == ":") fail_at(t, "':' without a matching '?'", "a conditional is written 'c ? a : b'");
      fail_at(t, "expected an operator before " + quoted(t.text), kStatementHint);
    }
    return root;
  }

 private:
  class DepthGuard {
   public:
    explicit DepthGuard(Parser& parser) : parser_(parser) {
      if (++parser_.depth_ > kMaxNesting) {
        const size_t pos = parser_.next_ < parser_.s_.tokens.size() ? parser_.s_.tokens[parser_.next_].pos
                                                                    : parser_.end_pos();
        fail(parser_.s_.text, pos,
             "the expression nests more than " + std::to_string(kMaxNesting) + " levels deep",
             "split it or remove redundant parentheses");
      }
    }
    ~DepthGuard() { --parser_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Parser& parser_;
  };

  size_t end_pos() const {
    const Token& last = s_.tokens.back();
    return last.pos + last.text.size();
  }
  bool at_operator(std::string_view op, size_t ahead = 0) const {
    const size_t i = next_ + ahead;
    return i < s_.tokens.size() && s_.tokens[i].kind == TokenKind::kOperator && s_.tokens[i].text == op;
  }
  [[noreturn]] void fail_at(const Token& token, const std::string& what, std::string_view hint) const {
    fail(s_.text, token.pos, what, hint);
  }
  [[noreturn]] void fail_here(const std::string& what, std::string_view hint) const {
    if (next_ < s_.tokens.size())
      fail(s_.text, s_.tokens[next_].pos, what + ", found " + quoted(s_.tokens[next_].text), hint);
    fail(s_.text, end_pos(), what + ", but the expression ends", hint);
  }
  std::string column_of(size_t token) const { return "column " + std::to_string(s_.tokens[token].pos + 1); }

  int add(NodeKind kind, size_t token, std::vector<int> args = {}) {
    s_.nodes.push_back(AstNode{kind, token, std::move(args)});
    return static_cast<int>(s_.nodes.size()) - 1;
  }

  int ternary() {
    DepthGuard guard(*this);
    const int condition = binary(1);
    if (!at_operator("?")) return condition;
    const size_t question = next_++;
    const int if_true = ternary();
    if (!at_operator(":"))
      fail_here("expected ':' for the '?' at " + column_of(question), "write 'c ? a : b'");
    ++next_;
    const int if_false = ternary();
    return add(NodeKind::kTernary, question, {condition, if_true, if_false});
  }

  // Precedence climbing: every operator in C's binary table is left-associative.
  int binary(int min_precedence) {
    int lhs = unary();
    while (next_ < s_.tokens.size()) {
      const int precedence = binary_precedence(s_.tokens[next_]);
      if (precedence == 0 || precedence < min_precedence) break;
      const size_t op = next_++;
      const int rhs = binary(precedence + 1);
      lhs = add(NodeKind::kBinary, op, {lhs, rhs});
    }
    return lhs;
  }

  int unary() {
    DepthGuard guard(*this);
    if (at_operator("+") || at_operator("-") || at_operator("!") || at_operator("~")) {
      const size_t op = next_++;
      const int operand = unary();
      return add(NodeKind::kUnary, op, {operand});
    }
    if (at_operator("(") && next_ + 2 < s_.tokens.size() && at_operator(")", 2) &&
        contains(kCastTypes, s_.tokens[next_ + 1].text)) {
      const size_t type = next_ + 1;
      next_ += 3;
      const int operand = unary();
      return add(NodeKind::kCast, type, {operand});
    }
    return primary();
  }

  int primary() {
    if (next_ >= s_.tokens.size()) fail_here("expected a value", kStatementHint);
    const size_t index = next_;
    const Token& token = s_.tokens[index];
    if (token.kind == TokenKind::kNumber) {
      ++next_;
      const int node = add(NodeKind::kLiteral, index);
      s_.nodes[node].literal = parse_number(s_.text, token);
      return node;
    }
    if (token.kind == TokenKind::kIdentifier) {
      ++next_;
      if (token.text != "true" && token.text != "false") check_name(s_.text, token, false);
      if (at_operator("(")) return call(index);
      if (contains(kConstants, token.text)) return add(NodeKind::kConstant, index);
      const int node = add(NodeKind::kInput, index);
      const auto found = std::find(s_.inputs.begin(), s_.inputs.end(), token.text);
      s_.nodes[node].input = static_cast<int>(found - s_.inputs.begin());
      if (found == s_.inputs.end()) {
        s_.inputs.push_back(token.text);
        s_.input_tokens.push_back(index);
      }
      return node;
    }
    if (at_operator("(")) {
      ++next_;
      const int inner = ternary();
      if (!at_operator(")"))
        fail_here("missing ')' for the '(' at " + column_of(index), "balance the parentheses");
      ++next_;
      return inner;
    }
    fail_here("expected a value (a name, a number or '(')", kStatementHint);
  }

  int call(size_t name) {
    const size_t open = next_++;
    std::vector<int> args;
    if (at_operator(")")) {
      ++next_;
      return add(NodeKind::kCall, name);
    }
    while (true) {
      args.push_back(ternary());
      if (at_operator(",")) {
        ++next_;
        continue;
      }
      if (at_operator(")")) break;
      fail_here("expected ',' or ')' in the call to " + quoted(s_.tokens[name].text) + " opened at " +
                    column_of(open),
                "balance the parentheses");
    }
    ++next_;
    return add(NodeKind::kCall, name, std::move(args));
  }

  Statement& s_;
  size_t next_;
  int depth_ = 0;
};

std::string join_tokens(const std::vector<Token>& tokens, size_t first) {
  std::string out;
  for (size_t i = first; i < tokens.size(); ++i) {
    if (i > first) out += ' ';
    out += tokens[i].text;
  }
  return out;
}

}  // namespace

int binary_precedence(const Token& token) {
  if (token.kind != TokenKind::kOperator) return 0;
  const std::string_view op = token.text;
  if (op == "||") return 1;
  if (op == "&&") return 2;
  if (op == "|") return 3;
  if (op == "^") return 4;
  if (op == "&") return 5;
  if (op == "==" || op == "!=") return 6;
  if (op == "<" || op == "<=" || op == ">" || op == ">=") return 7;
  if (op == "<<" || op == ">>") return 8;
  if (op == "+" || op == "-") return 9;
  if (op == "*" || op == "/" || op == "%") return 10;
  return 0;
}

// Everything parse_expression checks; Evaluator reuses it on the canonical text.
Statement parse_statement(std::string_view text) {
  Statement s;
  s.text = text;
  if (std::all_of(text.begin(), text.end(), is_space))
    throw InvalidArgument("invalid elementwise expression: the text is empty\n" + std::string(kAssignHint));
  s.tokens = tokenize(text);

  const auto& tokens = s.tokens;
  if (tokens[0].kind != TokenKind::kIdentifier)
    fail(text, tokens[0].pos, "expected the output name, found " + quoted(tokens[0].text), kAssignHint);
  if (tokens.size() < 2)
    fail(text, tokens[0].pos + tokens[0].text.size(), "expected '=' after the output name", kAssignHint);
  if (tokens[1].text != "=")
    fail(text, tokens[1].pos, "expected '=' after the output name, found " + quoted(tokens[1].text),
         kAssignHint);
  check_name(text, tokens[0], true);
  for (size_t i = 2; i < tokens.size(); ++i)
    if (tokens[i].text == "=")
      fail(text, tokens[i].pos, "a second assignment '='",
           "only one output can be assigned; " + std::string(kStatementHint));
  if (tokens.size() == 2) fail(text, tokens[1].pos + 1, "the right-hand side is empty", kAssignHint);

  s.root = Parser(s, 2).parse();

  if (s.inputs.empty())
    fail(text, tokens[2].pos, "the right-hand side reads no input",
         "an elementwise expression computes its output from input tensors, e.g. 'z = x * 2'");
  if (s.inputs.size() > static_cast<size_t>(kMaxInputs)) {
    std::string names;
    for (std::string_view name : s.inputs) names += (names.empty() ? "" : ", ") + std::string(name);
    fail(text, tokens[s.input_tokens[kMaxInputs]].pos,
         "the expression reads " + std::to_string(s.inputs.size()) + " inputs (" + names + ")",
         "at most " + std::to_string(kMaxInputs) + " inputs are supported; split the computation");
  }
  return s;
}

}  // namespace detail

Expression parse_expression(std::string_view text) {
  const detail::Statement s = detail::parse_statement(text);
  Expression expression;
  expression.canonical = detail::join_tokens(s.tokens, 0);
  expression.output = std::string(s.tokens[0].text);
  expression.rhs = detail::join_tokens(s.tokens, 2);
  for (std::string_view name : s.inputs) expression.inputs.emplace_back(name);
  return expression;
}

}  // namespace jitune::templates::elementwise
