// Byte counts for people: "1.50 MiB" (binary units, two decimals), used by every report.
#pragma once

#include <string>

#include <fmt/format.h>

namespace bifocal {

inline std::string human_bytes(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024 * 1024));
  if (bytes >= 1024.0 * 1024) return fmt::format("{:.2f} MiB", bytes / (1024.0 * 1024));
  if (bytes >= 1024.0) return fmt::format("{:.2f} KiB", bytes / 1024.0);
  return fmt::format("{:.0f} B", bytes);
}

}  // namespace bifocal
