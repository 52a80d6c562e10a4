// The testbed's multi-step arithmetic problems, made in C++ so `bifocal eval --task
// testbed_arithmetic` can measure the embedded testbed model on the kind of problem it was
// trained on, with no data files. A port of the idea of tools/testbed/procedural_arithmetic.py
// (same layout, wording, operations and limits; its own random stream, so not the same
// numbers as the Python generator): named numbers (and unused distractors) are defined first,
// simple filler sentences follow, then a question over an expression of the named numbers. The
// training documents went on with a worked solution, one exact integer step per line, ending
// "The answer is N." — the model is expected to write that.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace bifocal::eval {

struct ArithmeticProblem {
  std::string prompt;           // definitions, filler, then "Question: What is E?" or "Problem: compute E."
  std::string answer;           // the final result, a whole number
  std::string expression;       // E, with the operators − × ÷ (U+2212, U+00D7, U+00F7) as in training
  std::string worked_solution;  // the text training documents continue with: "\nFirst, … The answer is N."
  std::vector<std::pair<std::string, std::int64_t>> definitions;  // in the order the prompt lists them
};

// `count` problems drawn from one random stream seeded by `seed` (problem i does not depend on
// `count`, so a shorter run is a prefix of a longer one). Each prompt is about `target_chars`
// bytes long with its worked solution (less filler when the structure alone is longer).
std::vector<ArithmeticProblem> make_arithmetic_problems(std::uint64_t seed, int count, int target_chars);

}  // namespace bifocal::eval
