// Runs the `bifocal` binary as a user would, for the CLI tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace bifocal::testing {

struct CommandResult {
  int exit_code;
  std::string output;  // stdout, and stderr unless redirected elsewhere
};

// 'text' for /bin/sh, single quotes escaped.
inline std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// `ENVIRONMENT bifocal ARGUMENTS < stdin_file STDERR`; stderr "2>&1" merges it into the output, and
// environment ("NAME=value …", through env(1)) sets variables for that run only.
inline CommandResult run_cli(const std::string& arguments, const std::string& stdin_file = "/dev/null",
                             const std::string& stderr_redirect = "2>&1", const std::string& environment = "") {
  const std::string command = (environment.empty() ? "" : "env " + environment + " ") + std::string(BIFOCAL_CLI_PATH) +
                              " " + arguments + " < " + shell_quote(stdin_file) + " " + stderr_redirect;
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  std::array<char, 4096> buffer;
  while (std::size_t read = std::fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), read);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace bifocal::testing
