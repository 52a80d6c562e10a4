// S-NIAH: the single needle-in-a-haystack tasks of RULER (Hsieh et al., "RULER: What's the Real
// Context Size of Your Long-Context Language Models?", 2024). One sentence, the needle, pairs a
// word key with a value; it is hidden in filler at a depth that items spread evenly from the
// start of the context (0) to its end (1); the prompt ends by asking for the key's value and
// starting the answer, and the model's greedy continuation is scored by the share of reference
// values it contains (RULER's "all of them" string match, ignoring case). The variants, as RULER
// configures them:
//   niah_single_1  filler: the repeated noise sentences; value: a 7-digit number
//   niah_single_2  filler: essay text (pg_essays);       value: a 7-digit number
//   niah_single_3  filler: essay text;                   value: a UUID
// Keys are adjective-noun pairs such as "quiet-harbor" (RULER draws its word keys the same way,
// from its own word lists). The instructions and the needle sentence are bifocal's own wording.
// One more variant speaks the embedded testbed model's own language:
//   testbed_needle  filler: essay text; value: a 7-digit number; needle and question worded as
//                   in the testbed's training documents (tools/testbed/procedural_retrieval.py):
//                   "The special magic number for KEY is VALUE." … "Question: What is the
//                   special magic number for KEY? Answer: The special magic number for KEY is".
//                   A 14 M-parameter model does not carry retrieval over to RULER's paraphrase
//                   ("… mentioned in the text above is"); this variant measures the retrieval it
//                   has, so that mixers can be compared on it.
//
// Context length L counts the whole sequence the way RULER does: the prompt (BOS included when
// the tokenizer adds one) has exactly L − A tokens, A being the answer budget (32 tokens for
// numbers, 64 for UUIDs), so prompt and answer together stay within L.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eval/eval_task.h"
#include "eval/seeded_random.h"

namespace bifocal::eval {

enum class NiahFiller { noise, essays };
enum class NiahValue { number, uuid };
enum class NiahWording { ruler, testbed };  // RULER's prompt layout, or the testbed's training documents'

struct NiahVariant {
  std::string name;  // niah_single_1 …
  NiahFiller filler = NiahFiller::noise;
  NiahValue value = NiahValue::number;
  int max_new_tokens = 32;  // the answer budget
  NiahWording wording = NiahWording::ruler;
};

// niah_single_1/2/3 and testbed_needle → its variant; any other name → nothing.
std::optional<NiahVariant> niah_variant(std::string_view task_name);

// A word key "adjective-noun"; a 7-digit number (1000000–9999999); a version-4 UUID in
// lower-case 8-4-4-4-12 hex.
std::string niah_key(SeededRandom& random);
std::string niah_number(SeededRandom& random);
std::string niah_uuid(SeededRandom& random);

// "The special magic number for KEY is: VALUE." ("uuid" for UUID values); the testbed wording
// has no colon.
std::string niah_needle(const std::string& key, const std::string& value, NiahValue kind,
                        NiahWording wording = NiahWording::ruler);
// The instructions, the haystack, then the question about KEY and the start of the answer.
std::string niah_prompt(const std::string& haystack, const std::string& key, NiahValue kind,
                        NiahWording wording = NiahWording::ruler);

// Depth of item `index` of `count` at one length: evenly from 0 to 1 (0.5 for a single item).
double niah_depth(int index, int count);

// The share of `references` found in `output`, ignoring ASCII case; 0 with no references.
double niah_score(std::string_view output, const std::vector<std::string>& references);

// Tasks niah_single_1/2/3 and testbed_needle. Options: lengths=512,1024,2048,4096 (the default;
// any lengths in tokens), samples=N items per length (default 20). Items are ordered item index
// first, then length, so `--limit` keeps every length. niah_single_2/3 and testbed_needle read
// CONTEXT.data_dir/pg_essays/*.txt (an error naming the folder when it is missing).
std::unique_ptr<Task> make_niah_task(TaskSpec spec, const TaskContext& context);

}  // namespace bifocal::eval
