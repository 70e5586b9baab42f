// Host evaluator of elementwise expressions, the CPU reference when verifying candidates. It types the
// parser's syntax tree with C's rules for integer and floating operands and flattens it into a postfix
// program run on a small fixed-size stack (no allocation per call; safe to call from several threads).
//
// Host semantics where C is undefined or the device differs (tested in tests/host/expression_eval_test.cpp):
//   - Integers are 64-bit and wrap on overflow. Division or remainder by zero gives 0, INT64_MIN / -1 wraps,
//     a shift by a negative count gives 0 and by 64 or more gives 0 (-1 for '>>' of a negative value).
//   - '%', '~', '&', '|', '^', '<<' and '>>' need integer operands. Types are known statically (inputs are
//     floating), so the Evaluator constructor rejects misuse instead of producing NaN at evaluation time.
//   - Float-suffixed literals (0.1f) and (float) casts take their float value; other arithmetic is double.
//   - (int) truncates toward zero, saturating at the 32-bit int range with NaN -> 0, like the GPU's cvt.
//   - Unsigned and long suffixes (10u, 10ul) are accepted and evaluated as signed 64-bit integers.
#include "templates/elementwise/expression.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include <jitune/error.hpp>

#include "templates/elementwise/expression_syntax.hpp"

namespace jitune::templates::elementwise {

using detail::AstNode;
using detail::binary_precedence;
using detail::fail;
using detail::kMaxStack;
using detail::NodeKind;
using detail::parse_statement;
using detail::quoted;
using detail::Statement;
using detail::Token;

namespace {

enum class Type { kInt, kFloat };

// clang-format off
enum class Fn : std::uint8_t {
  kExp, kExp2, kExpm1, kLog, kLog2, kLog10, kLog1p, kSqrt, kRsqrt, kCbrt,
  kSin, kCos, kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kTanh, kAsinh, kAcosh, kAtanh,
  kErf, kErfc, kFabs, kFloor, kCeil, kRound, kTrunc,
  kPow, kFmin, kFmax, kFmod, kAtan2, kCopysign, kHypot, kFma,
  kAbs, kMin, kMax,
};
// clang-format on

struct FunctionInfo {
  std::string_view name;
  Fn fn;
  int arity;
  bool float_variant;  // also spelled with an 'f' suffix (expf)
};

constexpr FunctionInfo kFunctions[] = {
    {"exp", Fn::kExp, 1, true},     {"exp2", Fn::kExp2, 1, true},         {"expm1", Fn::kExpm1, 1, true},
    {"log", Fn::kLog, 1, true},     {"log2", Fn::kLog2, 1, true},         {"log10", Fn::kLog10, 1, true},
    {"log1p", Fn::kLog1p, 1, true}, {"sqrt", Fn::kSqrt, 1, true},         {"rsqrt", Fn::kRsqrt, 1, true},
    {"cbrt", Fn::kCbrt, 1, true},   {"sin", Fn::kSin, 1, true},           {"cos", Fn::kCos, 1, true},
    {"tan", Fn::kTan, 1, true},     {"asin", Fn::kAsin, 1, true},         {"acos", Fn::kAcos, 1, true},
    {"atan", Fn::kAtan, 1, true},   {"sinh", Fn::kSinh, 1, true},         {"cosh", Fn::kCosh, 1, true},
    {"tanh", Fn::kTanh, 1, true},   {"asinh", Fn::kAsinh, 1, true},       {"acosh", Fn::kAcosh, 1, true},
    {"atanh", Fn::kAtanh, 1, true}, {"erf", Fn::kErf, 1, true},           {"erfc", Fn::kErfc, 1, true},
    {"fabs", Fn::kFabs, 1, true},   {"floor", Fn::kFloor, 1, true},       {"ceil", Fn::kCeil, 1, true},
    {"round", Fn::kRound, 1, true}, {"trunc", Fn::kTrunc, 1, true},       {"pow", Fn::kPow, 2, true},
    {"fmin", Fn::kFmin, 2, true},   {"fmax", Fn::kFmax, 2, true},         {"fmod", Fn::kFmod, 2, true},
    {"atan2", Fn::kAtan2, 2, true}, {"copysign", Fn::kCopysign, 2, true}, {"hypot", Fn::kHypot, 2, true},
    {"fma", Fn::kFma, 3, true},     {"abs", Fn::kAbs, 1, false},          {"min", Fn::kMin, 2, false},
    {"max", Fn::kMax, 2, false},
};

const FunctionInfo* find_function(std::string_view name) {
  for (const FunctionInfo& f : kFunctions) {
    if (name == f.name) return &f;
    if (f.float_variant && name.size() == f.name.size() + 1 && name.starts_with(f.name) && name.back() == 'f')
      return &f;
  }
  return nullptr;
}

std::string supported_functions() {
  std::string out;
  for (const FunctionInfo& f : kFunctions) {
    if (!out.empty()) out += ", ";
    out += std::string(f.name) + (f.float_variant ? "(f)" : "");
  }
  return out + "; '(f)' means both spellings, e.g. exp and expf";
}

// clang-format off
enum class Op : std::uint8_t {
  kInput, kPushInt, kPushFloat,
  kIntToFloat, kFloatToInt, kRoundToFloat, kFloatTruth,
  kNegI, kNegF, kNotI, kBitNot, kAbsI, kMath1,
  kAddI, kSubI, kMulI, kDivI, kModI, kShl, kShr, kBitAnd, kBitOr, kBitXor,
  kLtI, kLeI, kGtI, kGeI, kEqI, kNeI,
  kAddF, kSubF, kMulF, kDivF,
  kLtF, kLeF, kGtF, kGeF, kEqF, kNeF,
  kLogicalAnd, kLogicalOr, kMinI, kMaxI, kMath2,
  kSelect, kMath3,
};
// clang-format on

struct Instruction {
  Op op;
  Fn fn = Fn::kExp;        // kMath*
  std::int32_t input = 0;  // kInput
  std::int64_t i = 0;      // kPushInt
  double f = 0;            // kPushFloat
};

union Slot {
  std::int64_t i;
  double f;
};

// Integer arithmetic through uint64 wraps instead of being undefined on overflow.
std::int64_t wrap(std::uint64_t v) {
  return static_cast<std::int64_t>(v);
}
std::uint64_t bits(std::int64_t v) {
  return static_cast<std::uint64_t>(v);
}

std::int64_t int_div(std::int64_t a, std::int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return wrap(0 - bits(a));  // INT64_MIN / -1 traps on x86
  return a / b;
}

std::int64_t int_mod(std::int64_t a, std::int64_t b) {
  if (b == 0 || b == -1) return 0;
  return a % b;
}

std::int64_t shift_left(std::int64_t a, std::int64_t n) {
  if (n < 0 || n >= 64) return 0;
  return wrap(bits(a) << n);
}

std::int64_t shift_right(std::int64_t a, std::int64_t n) {
  if (n < 0) return 0;
  if (n >= 64) return a < 0 ? -1 : 0;
  return a >> n;
}

std::int64_t saturate_to_int(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 2147483647.0) return 2147483647;
  if (v <= -2147483648.0) return -2147483648LL;
  return static_cast<std::int64_t>(v);
}

// clang-format off
double math1(Fn fn, double x) {
  switch (fn) {
    case Fn::kExp: return std::exp(x);
    case Fn::kExp2: return std::exp2(x);
    case Fn::kExpm1: return std::expm1(x);
    case Fn::kLog: return std::log(x);
    case Fn::kLog2: return std::log2(x);
    case Fn::kLog10: return std::log10(x);
    case Fn::kLog1p: return std::log1p(x);
    case Fn::kSqrt: return std::sqrt(x);
    case Fn::kRsqrt: return 1.0 / std::sqrt(x);
    case Fn::kCbrt: return std::cbrt(x);
    case Fn::kSin: return std::sin(x);
    case Fn::kCos: return std::cos(x);
    case Fn::kTan: return std::tan(x);
    case Fn::kAsin: return std::asin(x);
    case Fn::kAcos: return std::acos(x);
    case Fn::kAtan: return std::atan(x);
    case Fn::kSinh: return std::sinh(x);
    case Fn::kCosh: return std::cosh(x);
    case Fn::kTanh: return std::tanh(x);
    case Fn::kAsinh: return std::asinh(x);
    case Fn::kAcosh: return std::acosh(x);
    case Fn::kAtanh: return std::atanh(x);
    case Fn::kErf: return std::erf(x);
    case Fn::kErfc: return std::erfc(x);
    case Fn::kFabs: case Fn::kAbs: return std::fabs(x);
    case Fn::kFloor: return std::floor(x);
    case Fn::kCeil: return std::ceil(x);
    case Fn::kRound: return std::round(x);
    case Fn::kTrunc: return std::trunc(x);
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

double math2(Fn fn, double a, double b) {
  switch (fn) {
    case Fn::kPow: return std::pow(a, b);
    case Fn::kFmin: case Fn::kMin: return std::fmin(a, b);
    case Fn::kFmax: case Fn::kMax: return std::fmax(a, b);
    case Fn::kFmod: return std::fmod(a, b);
    case Fn::kAtan2: return std::atan2(a, b);
    case Fn::kCopysign: return std::copysign(a, b);
    case Fn::kHypot: return std::hypot(a, b);
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}
// clang-format on

// Types the tree (rejecting what the host cannot evaluate) and emits postfix code with explicit conversions.
class BytecodeBuilder {
 public:
  BytecodeBuilder(const Statement& statement, const std::vector<int>& input_slots)
      : s_(statement), input_slots_(input_slots), types_(statement.nodes.size(), Type::kFloat) {}

  std::vector<Instruction> compile(Type& result) {
    result = check(s_.root);
    emit(s_.root);
    return std::move(code_);
  }

 private:
  const Token& token(int node) const { return s_.tokens[s_.nodes[node].token]; }
  [[noreturn]] void reject(int node, const std::string& what, std::string_view hint) const {
    fail(s_.text, token(node).pos, what, hint);
  }

  static Type common(Type a, Type b) {
    return a == Type::kInt && b == Type::kInt ? Type::kInt : Type::kFloat;
  }

  Type check(int n) {
    const AstNode& node = s_.nodes[n];
    const std::string_view text = token(n).text;
    Type type = Type::kFloat;
    std::vector<Type> args;
    for (int arg : node.args) args.push_back(check(arg));
    switch (node.kind) {
      case NodeKind::kLiteral:
        type = node.literal.is_float ? Type::kFloat : Type::kInt;
        break;
      case NodeKind::kConstant:
        type = (text == "true" || text == "false") ? Type::kInt : Type::kFloat;
        break;
      case NodeKind::kInput:
        type = Type::kFloat;
        break;
      case NodeKind::kCast:
        type = text == "int" ? Type::kInt : Type::kFloat;
        break;
      case NodeKind::kTernary:
        type = common(args[1], args[2]);
        break;
      case NodeKind::kUnary:
        if (text == "~" && args[0] != Type::kInt)
          reject(n, "operator '~' needs an integer operand, but this one is floating point",
                 "inputs are floating point; cast with (int) if integer bits are meant");
        type = text == "!" ? Type::kInt : args[0];
        break;
      case NodeKind::kBinary: {
        const bool integer_only =
            text == "%" || text == "&" || text == "|" || text == "^" || text == "<<" || text == ">>";
        if (integer_only && common(args[0], args[1]) != Type::kInt)
          reject(n, "operator " + quoted(text) + " needs integer operands, but one is floating point",
                 text == "%" ? "use fmodf(a, b) for floating values"
                             : "inputs are floating point; cast with (int) if integer bits are meant");
        const int precedence = binary_precedence(token(n));
        const bool boolean = precedence == 1 || precedence == 2 || precedence == 6 || precedence == 7;
        type = boolean ? Type::kInt : common(args[0], args[1]);
        break;
      }
      case NodeKind::kCall: {
        const FunctionInfo* f = find_function(text);
        if (f == nullptr)
          reject(n, "the host evaluator does not support the function " + quoted(text),
                 "the GPU may still compile it, but the CPU reference cannot check it. Supported: " +
                     supported_functions());
        if (static_cast<int>(args.size()) != f->arity)
          reject(n,
                 "function " + quoted(text) + " takes " + std::to_string(f->arity) + " argument" +
                     (f->arity == 1 ? "" : "s") + " but is called with " + std::to_string(args.size()),
                 "check the call's arguments");
        const bool all_int = std::all_of(args.begin(), args.end(), [](Type t) { return t == Type::kInt; });
        type = (!f->float_variant && all_int) ? Type::kInt : Type::kFloat;  // abs, min, max keep integers
        break;
      }
    }
    types_[n] = type;
    return type;
  }

  void push(Instruction instruction, int pushed) {
    code_.push_back(instruction);
    depth_ += pushed;
    if (depth_ > kMaxStack)
      fail(s_.text, 0,
           "the expression is too large for the host evaluator (stack deeper than " +
               std::to_string(kMaxStack) + ")",
           "split it into smaller expressions");
  }
  void op(Op o, int pushed = 0) { push(Instruction{o}, pushed); }

  void emit_as(int n, Type want) {
    emit(n);
    if (types_[n] == Type::kInt && want == Type::kFloat) op(Op::kIntToFloat);
  }
  void emit_truth(int n) {
    emit(n);
    if (types_[n] == Type::kFloat) op(Op::kFloatTruth);
  }

  void emit(int n) {
    const AstNode& node = s_.nodes[n];
    const std::string_view text = token(n).text;
    switch (node.kind) {
      case NodeKind::kLiteral:
        if (node.literal.is_float) {
          push(Instruction{.op = Op::kPushFloat, .f = node.literal.f}, 1);
        } else {
          push(Instruction{.op = Op::kPushInt, .i = node.literal.i}, 1);
        }
        return;
      case NodeKind::kConstant: {
        if (text == "true" || text == "false") {
          push(Instruction{.op = Op::kPushInt, .i = text == "true" ? 1 : 0}, 1);
          return;
        }
        double value = std::numeric_limits<double>::quiet_NaN();
        if (text == "INFINITY") value = std::numeric_limits<double>::infinity();
        if (text == "M_PI") value = 3.14159265358979323846;
        if (text == "M_E") value = 2.71828182845904523536;
        push(Instruction{.op = Op::kPushFloat, .f = value}, 1);
        return;
      }
      case NodeKind::kInput:
        push(Instruction{.op = Op::kInput, .input = input_slots_[node.input]}, 1);
        return;
      case NodeKind::kCast: {
        const int operand = node.args[0];
        emit(operand);
        if (text == "int") {
          if (types_[operand] == Type::kFloat) op(Op::kFloatToInt);
        } else {
          if (types_[operand] == Type::kInt) op(Op::kIntToFloat);
          if (text == "float") op(Op::kRoundToFloat);
        }
        return;
      }
      case NodeKind::kTernary:
        emit_truth(node.args[0]);
        emit_as(node.args[1], types_[n]);
        emit_as(node.args[2], types_[n]);
        op(Op::kSelect, -2);
        return;
      case NodeKind::kUnary: {
        const int operand = node.args[0];
        if (text == "!") {
          emit_truth(operand);
          op(Op::kNotI);
        } else {
          emit(operand);
          if (text == "-") op(types_[operand] == Type::kInt ? Op::kNegI : Op::kNegF);
          if (text == "~") op(Op::kBitNot);
        }
        return;
      }
      case NodeKind::kBinary:
        emit_binary(n, text);
        return;
      case NodeKind::kCall: {
        const FunctionInfo* f = find_function(text);
        const Type type = types_[n];
        for (int arg : node.args) emit_as(arg, type);
        if (type == Type::kInt) {
          op(f->fn == Fn::kAbs ? Op::kAbsI : f->fn == Fn::kMin ? Op::kMinI : Op::kMaxI, 1 - f->arity);
          return;
        }
        const Op math = f->arity == 1 ? Op::kMath1 : f->arity == 2 ? Op::kMath2 : Op::kMath3;
        push(Instruction{.op = math, .fn = f->fn}, 1 - f->arity);
        return;
      }
    }
  }

  void emit_binary(int n, std::string_view text) {
    const AstNode& node = s_.nodes[n];
    if (text == "&&" || text == "||") {
      emit_truth(node.args[0]);
      emit_truth(node.args[1]);
      op(text == "&&" ? Op::kLogicalAnd : Op::kLogicalOr, -1);
      return;
    }
    const Type operands = common(types_[node.args[0]], types_[node.args[1]]);
    emit_as(node.args[0], operands);
    emit_as(node.args[1], operands);
    struct Pair {
      std::string_view text;
      Op integer, floating;
    };
    static constexpr Pair kOps[] = {
        {"+", Op::kAddI, Op::kAddF},     {"-", Op::kSubI, Op::kSubF},     {"*", Op::kMulI, Op::kMulF},
        {"/", Op::kDivI, Op::kDivF},     {"%", Op::kModI, Op::kModI},     {"<<", Op::kShl, Op::kShl},
        {">>", Op::kShr, Op::kShr},      {"&", Op::kBitAnd, Op::kBitAnd}, {"|", Op::kBitOr, Op::kBitOr},
        {"^", Op::kBitXor, Op::kBitXor}, {"<", Op::kLtI, Op::kLtF},       {"<=", Op::kLeI, Op::kLeF},
        {">", Op::kGtI, Op::kGtF},       {">=", Op::kGeI, Op::kGeF},      {"==", Op::kEqI, Op::kEqF},
        {"!=", Op::kNeI, Op::kNeF},
    };
    for (const Pair& pair : kOps) {
      if (pair.text != text) continue;
      op(operands == Type::kInt ? pair.integer : pair.floating, -1);
      return;
    }
  }

  const Statement& s_;
  const std::vector<int>& input_slots_;
  std::vector<Type> types_;
  std::vector<Instruction> code_;
  int depth_ = 0;
};

}  // namespace

// The header's opaque node is the whole compiled program: a flat postfix list, cheap to run 2^27 times.
struct Evaluator::Node {
  std::vector<Instruction> program;
  bool int_result = false;
};

Evaluator::Evaluator(const Expression& expression) : root_(std::make_unique<Node>()) {
  const Statement s = parse_statement(expression.canonical);
  std::vector<int> slots;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    const auto found = std::find(expression.inputs.begin(), expression.inputs.end(), s.inputs[i]);
    if (found == expression.inputs.end())
      fail(s.text, s.tokens[s.input_tokens[i]].pos,
           "the input " + quoted(s.inputs[i]) + " is missing from Expression::inputs",
           "build the Expression with parse_expression, or list every input it reads");
    slots.push_back(static_cast<int>(found - expression.inputs.begin()));
  }
  Type result = Type::kFloat;
  root_->program = BytecodeBuilder(s, slots).compile(result);
  root_->int_result = result == Type::kInt;
}

Evaluator::~Evaluator() = default;
Evaluator::Evaluator(Evaluator&&) noexcept = default;
Evaluator& Evaluator::operator=(Evaluator&&) noexcept = default;

double Evaluator::operator()(const double* inputs) const {
  // Two unused slots below the first value keep `stack[top - 1]` inside the array when it is not read.
  Slot stack[kMaxStack + 2];
  int top = 1;
  for (const Instruction& in : root_->program) {
    Slot& l = stack[top - 1];
    Slot& r = stack[top];
    // clang-format off
    switch (in.op) {
      case Op::kInput: stack[++top].f = inputs[in.input]; break;
      case Op::kPushInt: stack[++top].i = in.i; break;
      case Op::kPushFloat: stack[++top].f = in.f; break;
      case Op::kIntToFloat: r.f = static_cast<double>(r.i); break;
      case Op::kFloatToInt: r.i = saturate_to_int(r.f); break;
      case Op::kRoundToFloat: r.f = static_cast<float>(r.f); break;
      case Op::kFloatTruth: r.i = r.f != 0.0; break;
      case Op::kNegI: r.i = wrap(0 - bits(r.i)); break;
      case Op::kNegF: r.f = -r.f; break;
      case Op::kNotI: r.i = r.i == 0; break;
      case Op::kBitNot: r.i = ~r.i; break;
      case Op::kAbsI: r.i = r.i < 0 ? wrap(0 - bits(r.i)) : r.i; break;
      case Op::kMath1: r.f = math1(in.fn, r.f); break;
      case Op::kAddI: l.i = wrap(bits(l.i) + bits(r.i)), --top; break;
      case Op::kSubI: l.i = wrap(bits(l.i) - bits(r.i)), --top; break;
      case Op::kMulI: l.i = wrap(bits(l.i) * bits(r.i)), --top; break;
      case Op::kDivI: l.i = int_div(l.i, r.i), --top; break;
      case Op::kModI: l.i = int_mod(l.i, r.i), --top; break;
      case Op::kShl: l.i = shift_left(l.i, r.i), --top; break;
      case Op::kShr: l.i = shift_right(l.i, r.i), --top; break;
      case Op::kBitAnd: l.i = l.i & r.i, --top; break;
      case Op::kBitOr: l.i = l.i | r.i, --top; break;
      case Op::kBitXor: l.i = l.i ^ r.i, --top; break;
      case Op::kLtI: l.i = l.i < r.i, --top; break;
      case Op::kLeI: l.i = l.i <= r.i, --top; break;
      case Op::kGtI: l.i = l.i > r.i, --top; break;
      case Op::kGeI: l.i = l.i >= r.i, --top; break;
      case Op::kEqI: l.i = l.i == r.i, --top; break;
      case Op::kNeI: l.i = l.i != r.i, --top; break;
      case Op::kAddF: l.f = l.f + r.f, --top; break;
      case Op::kSubF: l.f = l.f - r.f, --top; break;
      case Op::kMulF: l.f = l.f * r.f, --top; break;
      case Op::kDivF: l.f = l.f / r.f, --top; break;
      case Op::kLtF: l.i = l.f < r.f, --top; break;
      case Op::kLeF: l.i = l.f <= r.f, --top; break;
      case Op::kGtF: l.i = l.f > r.f, --top; break;
      case Op::kGeF: l.i = l.f >= r.f, --top; break;
      case Op::kEqF: l.i = l.f == r.f, --top; break;
      case Op::kNeF: l.i = l.f != r.f, --top; break;
      case Op::kLogicalAnd: l.i = l.i != 0 && r.i != 0, --top; break;
      case Op::kLogicalOr: l.i = l.i != 0 || r.i != 0, --top; break;
      case Op::kMinI: l.i = std::min(l.i, r.i), --top; break;
      case Op::kMaxI: l.i = std::max(l.i, r.i), --top; break;
      case Op::kMath2: l.f = math2(in.fn, l.f, r.f), --top; break;
      case Op::kSelect:  // condition, if_true, if_false
        top -= 2;
        stack[top] = stack[top].i != 0 ? stack[top + 1] : stack[top + 2];
        break;
      case Op::kMath3:  // fma is the only three-argument function
        top -= 2;
        stack[top].f = std::fma(stack[top].f, stack[top + 1].f, stack[top + 2].f);
        break;
    }
    // clang-format on
  }
  return root_->int_result ? static_cast<double>(stack[2].i) : stack[2].f;
}

}  // namespace jitune::templates::elementwise
