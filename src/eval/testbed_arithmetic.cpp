#include "eval/testbed_arithmetic.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "eval/seeded_random.h"

namespace bifocal::eval {

namespace {

// ---------------------------------------------------------------------------------------------
// Filler: simple sentences from small word lists (procedural_text.py's simple_filler). No word
// is a digit or a question phrase, so the filler never competes with the problem's numbers.
// ---------------------------------------------------------------------------------------------

const std::vector<std::string> kDeterminers{"The", "Every", "That", "This", "One", "Each"};
const std::vector<std::string> kNouns{
    "farmer", "sailor", "teacher", "river", "mountain", "village", "cloud", "bird", "road", "bridge",
    "tree", "wind", "storm", "merchant", "painter", "child", "dog", "horse", "boat", "market",
    "forest", "field", "lake", "city", "song", "stone", "valley", "harbor", "train", "poet",
    "baker", "island", "meadow", "tower", "clock", "ship", "fox", "owl", "tailor"};
const std::vector<std::string> kAdjectives{
    "old", "quiet", "bright", "small", "distant", "busy", "gentle", "tired", "young", "heavy",
    "green", "cold", "warm", "narrow", "ancient", "patient", "curious", "silent", "proud", "lazy"};
const std::vector<std::string> kIntransitive{
    "waited", "rested", "wandered", "slept", "shone", "sang", "paused", "listened", "laughed",
    "drifted", "vanished", "grew", "trembled", "smiled", "lingered", "hummed"};
const std::vector<std::string> kTransitive{
    "watched", "followed", "painted", "remembered", "described", "admired", "crossed",
    "greeted", "noticed", "praised", "ignored", "imagined", "studied", "sketched"};
const std::vector<std::string> kAdverbials{
    "for a long time", "near the road", "after the rain", "before dawn", "without a sound",
    "all afternoon", "in the evening", "by the water", "under the stars", "at the edge of town",
    "once again", "with great care", "in the morning light", "during the long winter"};
const std::vector<std::string> kConnectives{"because", "while", "although", "until", "as if"};

std::string filler_sentence(SeededRandom& random) {
  const std::string& determiner = random.pick(kDeterminers);
  const std::string& adjective = random.pick(kAdjectives);
  const std::string& noun = random.pick(kNouns);
  const std::string& other = random.pick(kNouns);
  switch (random.below(5)) {
    case 0: return determiner + " " + adjective + " " + noun + " " + random.pick(kIntransitive) + " " + random.pick(kAdverbials) + ".";
    case 1: return determiner + " " + noun + " " + random.pick(kTransitive) + " the " + adjective + " " + other + ".";
    case 2: {
      std::string when = random.pick(kAdverbials);
      when[0] = char(when[0] - 'a' + 'A');
      return when + ", the " + noun + " " + random.pick(kTransitive) + " the " + other + ".";
    }
    case 3:
      return determiner + " " + noun + " " + random.pick(kIntransitive) + " " + random.pick(kConnectives) + " the " + other + " was " + adjective + ".";
    default: return "Nobody knew why the " + adjective + " " + noun + " " + random.pick(kIntransitive) + " so often.";
  }
}

// Sentences joined by spaces, at most n_chars bytes.
std::string simple_filler(SeededRandom& random, int n_chars) {
  std::string text;
  for (;;) {
    const std::string sentence = filler_sentence(random);
    const std::size_t grown = text.size() + (text.empty() ? 0 : 1) + sentence.size();
    if (n_chars < 0 || grown > std::size_t(n_chars)) return text;
    if (!text.empty()) text += ' ';
    text += sentence;
  }
}

// ---------------------------------------------------------------------------------------------
// The chain of operations (procedural_arithmetic.py): each step brings in the next named number;
// every intermediate result is a whole number below 100,000, divisions are exact.
// ---------------------------------------------------------------------------------------------

constexpr std::string_view kVariableNames = "abcdefghjkmnpqrstuvwxyz";  // no i, l, o (look like digits)
constexpr std::int64_t kLimit = 100'000;
constexpr int kAtom = 3;  // precedence of a name or a number: never parenthesised
const std::string kPlus = "+", kMinus = "\u2212", kTimes = "\u00D7", kDivide = "\u00F7";
const std::vector<std::string> kMiddleLeads{"Then", "Next,", "After that,"};

int precedence(const std::string& op) { return op == kPlus || op == kMinus ? 1 : 2; }
double op_weight(const std::string& op) { return op == kPlus || op == kMinus ? 3.0 : 2.0; }

struct Operand {
  std::string shown;       // how a step names it: a variable, or the number an earlier step gave
  std::int64_t value = 0;
  std::string expression;  // how the question writes it
  int precedence = kAtom;
};

struct Step {
  Operand left;
  std::string op;
  Operand right;
  std::int64_t result = 0;
};

std::int64_t apply(const std::string& op, std::int64_t left, std::int64_t right) {
  if (op == kPlus) return left + right;
  if (op == kMinus) return left - right;
  if (op == kTimes) return left * right;
  return left / right;  // exact by construction
}

// `left op right` with the fewest parentheses that keep the order of the steps.
std::pair<std::string, int> combined_expression(const Operand& left, const std::string& op, const Operand& right) {
  const int p = precedence(op);
  const std::string left_text = left.precedence >= p ? left.expression : "(" + left.expression + ")";
  const bool right_needs_parens = right.precedence < p || (right.precedence == p && (op == kMinus || op == kDivide));
  const std::string right_text = right_needs_parens ? "(" + right.expression + ")" : right.expression;
  return {left_text + " " + op + " " + right_text, p};
}

struct Operation {
  std::string op;
  std::int64_t value = 0;
  bool running_on_left = true;
};

// Every operation that keeps the result whole and below the limit, drawn by weight.
Operation next_operation(SeededRandom& random, std::int64_t current) {
  const std::int64_t room = kLimit - 1 - current;
  std::vector<Operation> options;
  if (room >= 2) options.push_back({kPlus, random.between(2, std::min<std::int64_t>(999, room)), true});
  if (current >= 3) options.push_back({kMinus, random.between(1, current - 1), true});
  if (room >= 1) options.push_back({kMinus, current + random.between(1, std::min<std::int64_t>(999, room)), false});
  if (current * 2 < kLimit)
    options.push_back({kTimes, random.between(2, std::min<std::int64_t>(25, (kLimit - 1) / current)), true});
  std::vector<std::int64_t> divisors;
  for (std::int64_t d = 2; d <= std::min<std::int64_t>(current / 2, 50); ++d)
    if (current % d == 0) divisors.push_back(d);
  if (!divisors.empty()) options.push_back({kDivide, random.pick(divisors), true});
  if (current >= 2 && current * 2 < kLimit)
    options.push_back({kDivide, current * random.between(2, std::min<std::int64_t>(12, (kLimit - 1) / current)), false});
  std::vector<double> weights;
  for (const auto& option : options) weights.push_back(op_weight(option.op));
  return options[random.weighted_index(weights)];
}

std::string step_sentence(const Step& step, const std::string& lead) {
  return lead + " " + step.left.shown + " " + step.op + " " + step.right.shown + " = " + std::to_string(step.left.value) +
         " " + step.op + " " + std::to_string(step.right.value) + " = " + std::to_string(step.result) + ".";
}

std::vector<std::string> step_leads(std::size_t steps) {
  if (steps == 1) return {"First,"};
  std::vector<std::string> leads{"First,"};
  for (std::size_t i = 0; i + 2 < steps; ++i) leads.push_back(kMiddleLeads[i % kMiddleLeads.size()]);
  leads.push_back("Finally,");
  return leads;
}

std::string definitions_text(SeededRandom& random, const std::vector<std::pair<std::string, std::int64_t>>& definitions) {
  std::vector<std::string> pairs;
  for (const auto& [name, value] : definitions) pairs.push_back(name + " = " + std::to_string(value));
  std::string listed;
  for (std::size_t i = 0; i + 1 < pairs.size(); ++i) listed += (i > 0 ? ", " : "") + pairs[i];
  listed += " and " + pairs.back();
  switch (random.below(3)) {
    case 0: return "Let " + listed + ".";
    case 1: return "We are given the numbers " + listed + ".";
    default: {
      std::string given = "Given:";
      for (const auto& pair : pairs) given += "\n" + pair;
      return given;
    }
  }
}

ArithmeticProblem make_problem(SeededRandom& random, int target_chars) {
  const auto n_steps = std::size_t(random.between(2, 6));
  const auto n_distractors = std::size_t(random.between(0, 3));
  std::vector<std::string> names;
  for (const char c : kVariableNames) names.emplace_back(1, c);
  random.shuffle(names);
  names.resize(n_steps + 1 + n_distractors);

  // The chain: the first number, then one step per further name.
  std::vector<std::pair<std::string, std::int64_t>> values;
  const std::int64_t small = random.between(2, 99), large = random.between(2, 999);
  const std::int64_t first_value = random.below(2) == 0 ? small : large;
  values.emplace_back(names[0], first_value);
  Operand running{names[0], first_value, names[0], kAtom};
  std::vector<Step> steps;
  for (std::size_t i = 1; i <= n_steps; ++i) {
    const Operation operation = next_operation(random, running.value);
    values.emplace_back(names[i], operation.value);
    const Operand variable{names[i], operation.value, names[i], kAtom};
    const Operand& left = operation.running_on_left ? running : variable;
    const Operand& right = operation.running_on_left ? variable : running;
    const Step step{left, operation.op, right, apply(operation.op, left.value, right.value)};
    steps.push_back(step);
    const auto [expression, p] = combined_expression(step.left, step.op, step.right);
    running = Operand{std::to_string(step.result), step.result, expression, p};
  }
  for (std::size_t i = n_steps + 1; i < names.size(); ++i) values.emplace_back(names[i], random.between(2, 999));
  random.shuffle(values);

  ArithmeticProblem problem;
  problem.definitions = values;
  problem.expression = running.expression;
  problem.answer = std::to_string(steps.back().result);
  const std::string question = random.below(2) == 0 ? "Question: What is " + problem.expression + "?"
                                                    : "Problem: compute " + problem.expression + ".";
  const auto leads = step_leads(steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) problem.worked_solution += "\n" + step_sentence(steps[i], leads[i]);
  problem.worked_solution += "\nThe answer is " + problem.answer + ".";

  // Layout: definitions, filler (the whole budget), then the question and its solution, joined
  // by newlines; the prompt stops after the question.
  const std::string definitions = definitions_text(random, values);
  const int structure = int(definitions.size() + 1 + question.size() + problem.worked_solution.size());
  const std::string filler = simple_filler(random, target_chars - structure - 1);
  problem.prompt = definitions + "\n" + (filler.empty() ? "" : filler + "\n") + question;
  return problem;
}

}  // namespace

std::vector<ArithmeticProblem> make_arithmetic_problems(std::uint64_t seed, int count, int target_chars) {
  SeededRandom random(splitmix64(seed ^ stable_hash("testbed_arithmetic")));
  std::vector<ArithmeticProblem> problems;
  for (int i = 0; i < count; ++i) problems.push_back(make_problem(random, target_chars));
  return problems;
}

}  // namespace bifocal::eval
