// Small helpers for tests that write bad input files: a fresh temporary directory per test,
// and an assertion that an Error's message contains the expected fragments.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include "bifocal/error.h"

namespace bifocal::testing {

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() / ("bifocal-test-" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path write(const std::string& name, const std::string& content) const {
    std::ofstream(path_ / name, std::ios::binary) << content;
    return path_ / name;
  }

 private:
  std::filesystem::path path_;
};

// Runs `action`, expects a bifocal::Error whose message contains every fragment.
inline void expect_error(const std::function<void()>& action, std::initializer_list<std::string> fragments) {
  try {
    action();
    ADD_FAILURE() << "expected a bifocal::Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const auto& fragment : fragments) EXPECT_NE(message.find(fragment), std::string::npos) << "message: " << message << "\nmissing: " << fragment;
  }
}

}  // namespace bifocal::testing
