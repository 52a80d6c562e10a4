#include "eval/niah.h"

#include <array>
#include <cstdio>

#include "bifocal/error.h"
#include "bifocal/generate.h"
#include "bifocal/model.h"
#include "bifocal/tokenizer.h"
#include "eval/haystack.h"

namespace bifocal::eval {

namespace {

// Plain, common words, so that a key costs a few tokens with any tokenizer: 64 × 64 keys.
constexpr std::array<std::string_view, 64> kAdjectives = {
    "quiet",  "bright", "silver", "gentle", "hollow", "rapid",  "ancient", "brave",  "calm",    "crooked", "damp",
    "eager",  "faint",  "fierce", "frozen", "golden", "grand",  "hidden",  "humble", "jolly",   "keen",    "lively",
    "lonely", "loud",   "lucky",  "mellow", "misty",  "narrow", "noble",   "odd",    "pale",    "polite",  "proud",
    "quick",  "rare",   "restless", "rough", "rusty", "scarlet", "shallow", "sharp", "shy",     "silent",  "sleepy",
    "smooth", "soft",   "sour",   "spare",  "steady", "sticky", "stormy",  "sturdy", "sunny",   "swift",   "tall",
    "tender", "tidy",   "tiny",   "vast",   "velvet", "wary",   "wild",    "wise",   "wooden"};
constexpr std::array<std::string_view, 64> kNouns = {
    "harbor", "lantern", "meadow", "pebble",  "river",  "saddle", "tunnel", "violin", "anchor",  "basket", "beacon",
    "bridge", "candle",  "canyon", "castle",  "cellar", "cliff",  "comet",  "cottage", "crystal", "desert", "falcon",
    "feather", "forest", "garden", "glacier", "hammer", "island", "jacket", "kettle", "ladder",  "lagoon", "marble",
    "mirror", "mountain", "needle", "orchard", "otter", "palace", "parrot", "pillow", "planet",  "pocket", "quarry",
    "rabbit", "ribbon",  "rocket", "sailor",  "shadow", "shelter", "signal", "spider", "statue", "summit",  "teapot",
    "thunder", "tower",  "valley", "wagon",   "walnut", "window", "winter", "wizard", "zephyr"};

std::string lowercase_ascii(std::string_view text) {
  std::string lower(text);
  for (char& c : lower)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return lower;
}

std::string value_kind(NiahValue kind) { return kind == NiahValue::uuid ? "uuid" : "number"; }

class NiahTask final : public Task {
 public:
  NiahTask(NiahVariant variant, std::vector<std::int64_t> lengths, int samples, std::vector<std::string> filler,
           std::uint64_t seed)
      : variant_(std::move(variant)),
        lengths_(std::move(lengths)),
        samples_(samples),
        filler_{.sentences = std::move(filler), .first = 0},
        seed_(seed) {}

  std::string name() const override {
    return variant_.name + ":lengths=" + format_context_lengths(lengths_) + ",samples=" + std::to_string(samples_);
  }
  std::string primary_metric() const override { return "score"; }

  std::vector<EvalItem> items(const Tokenizer& tokenizer) const override {
    std::vector<EvalItem> items;
    for (int index = 0; index < samples_; ++index)
      for (const std::int64_t length : lengths_) items.push_back(make_item(tokenizer, length, index));
    return items;
  }

  ItemResult score(const Model& model, const Tokenizer& tokenizer, const EvalItem& item) const override {
    const auto& input = item.input;
    const auto prompt = tokenizer.encode(input.at("prompt").get<std::string>(), /*add_special_tokens=*/true);
    const auto expected_tokens = input.at("prompt_tokens").get<std::int64_t>();
    if (std::int64_t(prompt.size()) != expected_tokens)
      fail(variant_.name + " item " + item.id, "the prompt has " + std::to_string(prompt.size()) +
                                                   " tokens with this tokenizer, but was built to have " +
                                                   std::to_string(expected_tokens));
    GenerationOptions options;
    options.max_tokens = input.at("max_new_tokens").get<int>();
    options.sampling = {.temperature = 0, .top_k = 0, .top_p = 1, .seed = 0};  // greedy, as RULER decodes
    const GenerationResult generated = generate(model, tokenizer, prompt, options);
    const auto answers = input.at("answers").get<std::vector<std::string>>();
    ItemResult result;
    result.metrics["score"] = niah_score(generated.text, answers);
    result.group = {{"context", input.at("context")}};
    result.details = {{"output", generated.text},
                      {"answers", answers},
                      {"depth", input.at("depth")},
                      {"needle_sentence", input.at("needle_sentence")},
                      {"filler_sentences", input.at("filler_sentences")}};
    return result;
  }

 private:
  EvalItem make_item(const Tokenizer& tokenizer, std::int64_t length, int index) const {
    const std::string id = std::to_string(length) + "/" + std::to_string(index);
    SeededRandom random(splitmix64(seed_ ^ stable_hash(variant_.name + "/" + id)));
    const std::string key = niah_key(random);
    const std::string value = variant_.value == NiahValue::uuid ? niah_uuid(random) : niah_number(random);
    const double depth = niah_depth(index, samples_);
    const NiahValue kind = variant_.value;
    const NiahWording wording = variant_.wording;
    const std::vector<Insertion> needle = {{.depth = depth, .text = niah_needle(key, value, kind, wording)}};
    const Haystack haystack = fill_to_length(
        tokenizer, filler_, needle, length - variant_.max_new_tokens,
        [&](const std::string& text) { return niah_prompt(text, key, kind, wording); }, /*add_special_tokens=*/true,
        "--task " + variant_.name + " (length " + std::to_string(length) + ")");
    return {.id = id,
            .input = {{"prompt", haystack.prompt},
                      {"prompt_tokens", haystack.tokens},
                      {"context", length},
                      {"max_new_tokens", variant_.max_new_tokens},
                      {"key", key},
                      {"answers", std::vector<std::string>{value}},
                      {"depth", depth},
                      {"needle_sentence", haystack.boundaries.front()},
                      {"filler_sentences", haystack.filler_sentences},
                      {"filler_first", haystack.filler_first}}};
  }

  NiahVariant variant_;
  std::vector<std::int64_t> lengths_;
  int samples_;
  Filler filler_;
  std::uint64_t seed_;
};

}  // namespace

std::optional<NiahVariant> niah_variant(std::string_view task_name) {
  if (task_name == "niah_single_1")
    return NiahVariant{.name = "niah_single_1", .filler = NiahFiller::noise, .value = NiahValue::number, .max_new_tokens = 32};
  if (task_name == "niah_single_2")
    return NiahVariant{.name = "niah_single_2", .filler = NiahFiller::essays, .value = NiahValue::number, .max_new_tokens = 32};
  if (task_name == "niah_single_3")
    return NiahVariant{.name = "niah_single_3", .filler = NiahFiller::essays, .value = NiahValue::uuid, .max_new_tokens = 64};
  if (task_name == "testbed_needle")
    return NiahVariant{.name = "testbed_needle", .filler = NiahFiller::essays, .value = NiahValue::number,
                       .max_new_tokens = 32, .wording = NiahWording::testbed};
  return std::nullopt;
}

std::string niah_key(SeededRandom& random) {
  const std::string_view adjective = kAdjectives[random.below(kAdjectives.size())];
  const std::string_view noun = kNouns[random.below(kNouns.size())];
  return std::string(adjective) + "-" + std::string(noun);
}

std::string niah_number(SeededRandom& random) { return std::to_string(random.between(1'000'000, 9'999'999)); }

std::string niah_uuid(SeededRandom& random) {
  std::uint64_t high = random.next(), low = random.next();
  high = (high & ~0xF000ull) | 0x4000ull;                       // version 4 (RFC 4122: random)
  low = (low & ~(0xC000ull << 48)) | (0x8000ull << 48);         // variant 10xx
  char text[37];
  std::snprintf(text, sizeof text, "%08llx-%04llx-%04llx-%04llx-%012llx", (unsigned long long)(high >> 32),
                (unsigned long long)((high >> 16) & 0xFFFF), (unsigned long long)(high & 0xFFFF),
                (unsigned long long)(low >> 48), (unsigned long long)(low & 0xFFFFFFFFFFFFull));
  return text;
}

std::string niah_needle(const std::string& key, const std::string& value, NiahValue kind, NiahWording wording) {
  const std::string separator = wording == NiahWording::ruler ? " is: " : " is ";
  return "The special magic " + value_kind(kind) + " for " + key + separator + value + ".";
}

std::string niah_prompt(const std::string& haystack, const std::string& key, NiahValue kind, NiahWording wording) {
  const std::string what = "special magic " + value_kind(kind);
  if (wording == NiahWording::testbed)  // procedural_retrieval.py's needle preamble, question and answer lead
    return "Some special values are hidden in the text below. Remember them.\n" + haystack + "\nQuestion: What is the " + what +
           " for " + key + "? Answer: The " + what + " for " + key + " is";
  return "A " + what + " is hidden in the text below. Read the text carefully and remember the " + what +
         ", because you will be asked for it afterwards.\n" + haystack + "\nWhat is the " + what + " for " + key +
         " mentioned in the text above? The " + what + " for " + key + " mentioned in the text above is";
}

double niah_depth(int index, int count) { return count <= 1 ? 0.5 : double(index) / double(count - 1); }

double niah_score(std::string_view output, const std::vector<std::string>& references) {
  if (references.empty()) return 0;
  const std::string text = lowercase_ascii(output);
  int found = 0;
  for (const auto& reference : references) found += text.find(lowercase_ascii(reference)) != std::string::npos;
  return double(found) / double(references.size());
}

std::unique_ptr<Task> make_niah_task(TaskSpec spec, const TaskContext& context) {
  const auto variant = niah_variant(spec.name);
  if (!variant)
    fail("--task " + spec.name, "not an S-NIAH task (niah_single_1, niah_single_2, niah_single_3, testbed_needle)");
  const std::string where = "--task " + spec.name;
  std::vector<std::int64_t> lengths = {512, 1024, 2048, 4096};
  if (const auto value = spec.take("lengths"))
    lengths = parse_context_lengths(*value, where, /*minimum=*/variant->max_new_tokens + 1);
  int samples = 20;
  if (const auto value = spec.take("samples")) samples = parse_sample_count(*value, where);
  spec.expect_no_more_options();
  std::vector<std::string> filler = variant->filler == NiahFiller::noise
                                        ? noise_sentences()
                                        : read_essay_sentences(context.data_dir / "pg_essays");
  return std::make_unique<NiahTask>(*variant, std::move(lengths), samples, std::move(filler), context.seed);
}

}  // namespace bifocal::eval
