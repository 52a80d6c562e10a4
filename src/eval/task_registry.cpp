// make_task: the task names `bifocal eval --task` knows, each handed to its family's factory.
#include <set>

#include "bifocal/error.h"
#include "eval/babilong.h"
#include "eval/eval_task.h"
#include "eval/long_generation.h"
#include "eval/multiple_choice.h"
#include "eval/niah.h"
#include "eval/perplexity_task.h"

namespace bifocal::eval {

namespace {

const std::set<std::string> kMultipleChoice = {"mmlu", "hellaswag", "piqa", "arc_easy", "arc_challenge", "winogrande", "mc"};
const std::set<std::string> kNeedles = {"niah_single_1", "niah_single_2", "niah_single_3", "testbed_needle"};
const std::set<std::string> kBabilong = {"babilong_qa1", "babilong_qa2", "babilong_qa3", "babilong_qa4", "babilong_qa5"};
const std::set<std::string> kLongGeneration = {"gsm8k", "aime24", "aime25", "hmmt_feb25", "testbed_arithmetic"};

}  // namespace

std::unique_ptr<Task> make_task(const std::string& text, const TaskContext& context) {
  TaskSpec spec = TaskSpec::parse(text);
  if (kMultipleChoice.contains(spec.name)) return make_multiple_choice_task(std::move(spec), context);
  if (kNeedles.contains(spec.name)) return make_niah_task(std::move(spec), context);
  if (kBabilong.contains(spec.name)) return make_babilong_task(std::move(spec), context);
  if (kLongGeneration.contains(spec.name)) return make_long_generation_task(std::move(spec), context);
  if (spec.name == "perplexity") return make_perplexity_task(std::move(spec), context);
  fail("--task " + spec.name, std::string("unknown task (known: ") + kKnownTaskNames + ")");
}

}  // namespace bifocal::eval
