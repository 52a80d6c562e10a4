#include "eval/perplexity_task.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "bifocal/error.h"
#include "bifocal/model.h"
#include "bifocal/sampler.h"
#include "bifocal/tokenizer.h"
#include "core/whole_number.h"
#include "eval/perplexity.h"

namespace bifocal::eval {

namespace {

class PerplexityTask final : public Task {
 public:
  PerplexityTask(std::string file, int context) : file_(std::move(file)), context_(context) {
    std::ifstream in(file_, std::ios::binary);
    if (!in) fail(file_, "cannot read the perplexity task's text file");
    std::ostringstream text;
    text << in.rdbuf();
    text_ = text.str();
    if (text_.empty()) fail(file_, "the text file is empty");
  }

  std::string name() const override { return "perplexity:" + file_ + ",context=" + std::to_string(context_); }
  std::string primary_metric() const override { return "next_token_accuracy"; }

  std::vector<EvalItem> items(const Tokenizer& tokenizer) const override {
    const auto ids = tokenizer.encode(text_, /*add_special_tokens=*/false);
    const auto bos = tokenizer.bos_id();
    const Windows windows = split_windows(ids, context_, bos, /*min_length=*/2);
    std::vector<EvalItem> items;
    for (std::size_t i = 0; i < windows.windows.size(); ++i)
      items.push_back({.id = "window-" + std::to_string(i), .input = {{"tokens", windows.windows[i]}}});
    return items;
  }

  ItemResult score(const Model& model, const Tokenizer&, const EvalItem& item) const override {
    const auto tokens = item.input.at("tokens").get<std::vector<std::int32_t>>();
    const std::size_t vocab = model.config().vocab_size;
    Session session = model.new_session(std::int64_t(tokens.size()));
    constexpr std::size_t kSlice = 256;  // logits of a slice at a time: memory stays kSlice × vocab
    std::vector<float> logits(kSlice * vocab);
    double nll = 0;
    std::int64_t targets = 0, first_ranked = 0;
    for (std::size_t begin = 0; begin + 1 < tokens.size(); begin += kSlice) {
      const std::size_t n = std::min(kSlice, tokens.size() - 1 - begin);
      model.forward(session, std::span(tokens).subspan(begin, n), logits, /*all_logits=*/true);
      for (std::size_t i = 0; i < n; ++i) {
        const std::span<const float> row(logits.data() + i * vocab, vocab);
        const std::int32_t target = tokens[begin + i + 1];
        nll += token_nll(row, target);
        first_ranked += argmax(row) == target;
        ++targets;
      }
    }
    ItemResult result;
    result.metrics["next_token_accuracy"] = double(first_ranked) / double(targets);
    result.metrics["nll_per_token"] = nll / double(targets);
    result.details = {{"targets", targets}, {"nll_sum", nll}};
    return result;
  }

 private:
  std::string file_;
  int context_;
  std::string text_;
};

}  // namespace

std::unique_ptr<Task> make_perplexity_task(TaskSpec spec, const TaskContext&) {
  const auto file = spec.take("file");
  if (!file) fail("--task perplexity", "give the text file: perplexity:FILE");
  int context = 4096;
  if (const auto value = spec.take("context")) {
    const auto tokens = parse_whole_int(*value);
    if (!tokens || *tokens < 2) fail("--task perplexity", "context=" + *value + " is not a number of tokens >= 2");
    context = *tokens;
  }
  spec.expect_no_more_options();
  return std::make_unique<PerplexityTask>(*file, context);
}

}  // namespace bifocal::eval
