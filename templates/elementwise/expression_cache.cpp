// The memo behind parse_expression_cached: a mutex-protected map from the exact text to the shared
// Expression.
#include "templates/elementwise/expression.hpp"

#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace jitune::templates::elementwise {
namespace {

struct ExpressionMemo {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const Expression>, std::less<>> parsed;
};

ExpressionMemo& memo() {
  // Never destroyed, so a call from another static object's destructor at exit still finds it.
  static ExpressionMemo* const instance = new ExpressionMemo;
  return *instance;
}

}  // namespace

std::shared_ptr<const Expression> parse_expression_cached(std::string_view text) {
  ExpressionMemo& m = memo();
  {
    std::lock_guard lock(m.mutex);
    if (const auto it = m.parsed.find(text); it != m.parsed.end()) return it->second;
  }
  // Parsed outside the lock so a long text does not stall other threads; when two threads parse the same new
  // text, the first one stored is what both return.
  auto expression = std::make_shared<const Expression>(parse_expression(text));
  std::lock_guard lock(m.mutex);
  if (m.parsed.size() >= kExpressionCacheLimit && !m.parsed.contains(text)) m.parsed.clear();
  return m.parsed.try_emplace(std::string(text), std::move(expression)).first->second;
}

}  // namespace jitune::templates::elementwise
