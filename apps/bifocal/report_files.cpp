// Report output shared by the subcommands that write Markdown/JSON/SVG (compare, bench).
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "bifocal/error.h"
#include "commands.h"

namespace bifocal::cli {

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,") == std::string::npos)
    return s;
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

namespace {

void create_report_directory(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) fail(dir, "cannot create the output directory: " + error.message());
}

}  // namespace

void prepare_report_directory(const std::string& dir) {
  create_report_directory(dir);
  const std::filesystem::path probe = std::filesystem::path(dir) / ".bifocal-write-check";
  if (!std::ofstream(probe, std::ios::binary)) fail(dir, "cannot write in the output directory");
  std::error_code ignored;
  std::filesystem::remove(probe, ignored);
}

void write_report_files(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files) {
  create_report_directory(dir);
  std::string names;
  for (const auto& [name, content] : files) {
    const std::filesystem::path path = std::filesystem::path(dir) / name;
    std::ofstream out(path, std::ios::binary);
    out << content;
    if (!out) fail(path.string(), "cannot write");
    names += (names.empty() ? "" : ", ") + name;
  }
  std::fprintf(stderr, "bifocal: wrote %s: %s\n", dir.c_str(), names.c_str());
}

}  // namespace bifocal::cli
