// Errors: one exception type whose message names the file (or input) and what is wrong with it,
// so the CLI can print it as one line and exit non-zero.
#pragma once

#include <stdexcept>
#include <string>

namespace bifocal {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws Error("<where>: <what>"); `where` is a file path, a flag or another named input.
[[noreturn]] inline void fail(const std::string& where, const std::string& what) {
  throw Error(where + ": " + what);
}

}  // namespace bifocal
