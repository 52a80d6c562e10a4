#include "core/kernel_name.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace bifocal {

namespace {

std::string demangled(std::string_view name) {
  const std::string text(name);
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> plain(abi::__cxa_demangle(text.c_str(), nullptr, nullptr, &status),
                                                     std::free);
  return status == 0 && plain ? std::string(plain.get()) : text;
}

}  // namespace

std::string kernel_short_name(std::string_view name) {
  std::string signature = demangled(name);
  // "(anonymous namespace)" is a scope, not the parameter list: take it out before looking for "(".
  for (std::size_t at; (at = signature.find("(anonymous namespace)::")) != std::string::npos;)
    signature.erase(at, std::string_view("(anonymous namespace)::").size());
  // The qualified name ends at the parameter list: the first "(" outside template arguments.
  int depth = 0;
  std::size_t end = signature.size();
  for (std::size_t i = 0; i < signature.size(); ++i) {
    const char c = signature[i];
    if (c == '<') ++depth;
    if (c == '>' && depth > 0) --depth;
    if (c == '(' && depth == 0) {
      end = i;
      break;
    }
  }
  std::string qualified = signature.substr(0, end);
  // Drop the template arguments of the function itself (they close at the end).
  if (!qualified.empty() && qualified.back() == '>') {
    depth = 0;
    for (std::size_t i = qualified.size(); i-- > 0;) {
      if (qualified[i] == '>') ++depth;
      if (qualified[i] == '<' && --depth == 0) {
        qualified.erase(i);
        break;
      }
    }
  }
  // Then the scopes, and a template function's return type before them ("void ns::f").
  const std::size_t scope = qualified.rfind("::");
  if (scope != std::string::npos) qualified.erase(0, scope + 2);
  const std::size_t space = qualified.rfind(' ');
  if (space != std::string::npos) qualified.erase(0, space + 1);
  return qualified;
}

}  // namespace bifocal
