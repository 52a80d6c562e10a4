// perplexity:FILE — held-out text as an eval task: the file cut into windows of `context`
// tokens (BOS first), each window one item; metrics per window: the mean NLL per token (nats)
// and the share of next tokens the model ranks first. The report's primary metric is that
// share (higher is better, so the recovery rate reads like the other tasks'); `bifocal compare`
// gives the same text's perplexity by position.
#pragma once

#include <memory>

#include "eval/eval_task.h"

namespace bifocal::eval {

// Options: the file (required), context=N tokens per window (default 4096).
std::unique_ptr<Task> make_perplexity_task(TaskSpec spec, const TaskContext& context);

}  // namespace bifocal::eval
