// A small random number generator whose every draw is fixed by its seed on every platform.
// std::uniform_int_distribution and friends are implementation-defined (libstdc++ and libc++
// give different numbers), and evaluation items and bootstrap intervals must be reproducible
// wherever `bifocal eval` runs, so draws are made here from splitmix64 output alone.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "bifocal/error.h"

namespace bifocal::eval {

// One step of splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
// generators", 2014): a bijective mix of 64 bits, used both as the generator and to combine seeds.
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// FNV-1a over the bytes of `text`: a stable hash of an item id (std::hash is not stable).
constexpr std::uint64_t stable_hash(std::string_view text) {
  std::uint64_t hash = 0xCBF29CE484222325ull;
  for (const char c : text) {
    hash ^= std::uint8_t(c);
    hash *= 0x100000001B3ull;
  }
  return hash;
}

class SeededRandom {
 public:
  explicit SeededRandom(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    return splitmix64(state_);
  }

  // Uniform in [0, n), n > 0: Lemire's multiply-and-shift with rejection, so no value is favoured.
  std::uint64_t below(std::uint64_t n) {
    if (n == 0) fail("SeededRandom::below", "the range is empty");
    for (;;) {
      const unsigned __int128 product = (unsigned __int128)next() * n;
      const auto low = std::uint64_t(product);
      if (low >= n || low >= (0 - n) % n) return std::uint64_t(product >> 64);
    }
  }

  // Uniform integer in [low, high], both included (Python's randint).
  std::int64_t between(std::int64_t low, std::int64_t high) {
    if (high < low) fail("SeededRandom::between", "empty range");
    return low + std::int64_t(below(std::uint64_t(high - low) + 1));
  }

  // Uniform in [0, 1) with 53 random bits.
  double unit() { return double(next() >> 11) * 0x1.0p-53; }

  template <typename T>
  const T& pick(const std::vector<T>& values) {
    return values[below(values.size())];
  }

  // Index i with probability weights[i] / sum(weights); weights are non-negative, not all zero.
  std::size_t weighted_index(const std::vector<double>& weights) {
    double total = 0;
    for (const double w : weights) total += w;
    if (!(total > 0)) fail("SeededRandom::weighted_index", "the weights sum to zero");
    double point = unit() * total;
    for (std::size_t i = 0; i < weights.size(); ++i) {
      if (point < weights[i]) return i;
      point -= weights[i];
    }
    return weights.size() - 1;  // rounding left a sliver past the last weight
  }

  // Fisher–Yates.
  template <typename T>
  void shuffle(std::vector<T>& values) {
    for (std::size_t i = values.size(); i > 1; --i) std::swap(values[i - 1], values[below(i)]);
  }

 private:
  std::uint64_t state_;
};

}  // namespace bifocal::eval
