// Reading a bzip2-compressed text file (HellaSwag's rendering in ../shared/data is published as
// .txt.bz2). The project links no bzip2 library, so this runs the `bzip2` program (Debian
// package bzip2) with its output on a pipe: `bzip2 -dc -- FILE`, started directly (no shell, so
// any file name is safe).
#pragma once

#include <filesystem>
#include <string>

namespace bifocal::eval {

// The decompressed bytes. Throws Error naming the file when it is missing, when `bzip2` is not
// installed, or when bzip2 fails (not a bzip2 file, truncated data).
std::string read_bzip2_file(const std::filesystem::path& file);

}  // namespace bifocal::eval
