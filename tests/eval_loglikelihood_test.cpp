// The log-probability of a continuation (src/eval/loglikelihood): lm-evaluation-harness's
// context/continuation split on the testbed's byte-level BPE tokenizer (token ids read off
// `bifocal tokenize --model models/testbed --pieces`), and the summed log-softmax checked
// against a direct computation from one Model::forward over the whole input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "bifocal/model.h"
#include "bifocal/tokenizer.h"
#include "eval/loglikelihood.h"
#include "golden_model.h"
#include "test_files.h"

namespace bifocal::eval {
namespace {

using Ids = std::vector<std::int32_t>;
constexpr std::int32_t kBos = 1;  // the testbed's <|bos|>, prepended by its post-processor

class LoglikelihoodTest : public testing::TestbedSuite {};

// The reference: every logit row of input = (context + continuation) minus its last token, from
// one forward call, and log softmax computed here in long double.
struct DirectScore {
  double logprob = 0;
  bool is_greedy = true;
};
DirectScore direct_score(const Model& model, const Ids& context, const Ids& continuation) {
  Ids input = context;
  input.insert(input.end(), continuation.begin(), continuation.end());
  input.pop_back();
  const std::size_t vocab = std::size_t(model.config().vocab_size);
  std::vector<float> logits(input.size() * vocab);
  Session session = model.new_session(std::int64_t(input.size()));
  model.forward(session, input, logits, /*all_logits=*/true);
  DirectScore score;
  for (std::size_t i = 0; i < continuation.size(); ++i) {
    const float* row = logits.data() + (context.size() - 1 + i) * vocab;
    long double max = -std::numeric_limits<long double>::infinity(), sum = 0;
    std::size_t best = 0;
    for (std::size_t v = 0; v < vocab; ++v) {
      if (row[v] > max) {
        max = row[v];
        best = v;
      }
    }
    for (std::size_t v = 0; v < vocab; ++v) sum += std::exp((long double)row[v] - max);
    score.logprob += double((long double)row[continuation[i]] - max - std::log(sum));
    score.is_greedy = score.is_greedy && best == std::size_t(continuation[i]);
  }
  return score;
}

TEST_F(LoglikelihoodTest, TrailingSpaceOfTheContextMovesIntoTheContinuation) {
  // "Answer: " + "B": encoded apart, the space is a token of its own ("Ġ" 222) and B is "B" 35;
  // jointly, " B" is one token ("ĠB" 596), which is what the model should be asked about.
  EXPECT_EQ(tokenizer_->encode("Answer: ", true), (Ids{kBos, 609, 1059, 27, 222}));
  EXPECT_EQ(tokenizer_->encode("B", false), (Ids{35}));
  const auto tokens = split_context_continuation(*tokenizer_, "Answer: ", "B");
  EXPECT_EQ(tokens.context, (Ids{kBos, 609, 1059, 27}));
  EXPECT_EQ(tokens.continuation, (Ids{596}));
}

TEST_F(LoglikelihoodTest, ContinuationIsTheJointEncodingPastTheContextsLength) {
  // "Where is the ca" ends in "Ġca" (1630); "Where is the cats" splits as "Ġc" "ats" (274 2047).
  // The continuation is the joint encoding past the context's 5 tokens: "ats" alone, not the
  // separate encoding of "ts" (5100). The context keeps its own encoding, "Ġca" included.
  EXPECT_EQ(tokenizer_->encode("ts", false), (Ids{5100}));
  const auto tokens = split_context_continuation(*tokenizer_, "Where is the ca", "ts");
  EXPECT_EQ(tokens.context, (Ids{kBos, 6381, 335, 272, 1630}));
  EXPECT_EQ(tokens.continuation, (Ids{2047}));
}

TEST_F(LoglikelihoodTest, AContinuationMergedIntoTheContextIsAnError) {
  // "Where is the ca" + "t" encodes as "... Ġcat": as many tokens as the context alone.
  testing::expect_error([&] { split_context_continuation(*tokenizer_, "Where is the ca", "t"); },
                        {"continuation 't'", "no token of its own"});
}

TEST_F(LoglikelihoodTest, EmptyContextBecomesThePrefixToken) {
  const auto tokens = split_context_continuation(*tokenizer_, "", "The quick brown fox");
  EXPECT_EQ(tokens.context, (Ids{kBos}));
  EXPECT_EQ(tokens.continuation, (Ids{405, 4289, 4595, 8713}));
  // A context of whitespace only is empty once its spaces have moved.
  const auto spaced = split_context_continuation(*tokenizer_, " ", "is");
  EXPECT_EQ(spaced.context, (Ids{kBos}));
  EXPECT_EQ(spaced.continuation, (Ids{335}));
}

TEST_F(LoglikelihoodTest, SpecialTokensFollowTheOption) {
  const auto tokens = split_context_continuation(*tokenizer_, "Answer:", " B", /*add_special_tokens=*/false);
  EXPECT_EQ(tokens.context, (Ids{609, 1059, 27}));
  EXPECT_EQ(tokens.continuation, (Ids{596}));
}

TEST_F(LoglikelihoodTest, SumEqualsTheLogSoftmaxOfOneForwardPass) {
  const Ids context = tokenizer_->encode("The quick brown fox", true);
  const Ids continuation{730, 7812, 1019, 272, 321, 2298, 90, 4399};  // " jumps over the lazy dog"
  const ContinuationScore score = score_continuation(*model_, context, continuation, 4096);
  const DirectScore direct = direct_score(*model_, context, continuation);
  EXPECT_NEAR(score.logprob, direct.logprob, 1e-4);
  EXPECT_LT(score.logprob, 0.0);
  EXPECT_EQ(score.is_greedy, direct.is_greedy);
  EXPECT_EQ(score.continuation_tokens, 8);
  EXPECT_EQ(score.context_tokens, 5);
  EXPECT_FALSE(score.truncated);
  // The string form splits to the same tokens and so gives the same number.
  const ContinuationScore from_text = loglikelihood(*model_, *tokenizer_, "The quick brown fox", " jumps over the lazy dog");
  EXPECT_DOUBLE_EQ(from_text.logprob, score.logprob);
}

TEST_F(LoglikelihoodTest, GreedyContinuationIsFlaggedGreedy) {
  // Build a continuation out of the model's own argmax tokens, one at a time.
  const Ids context = tokenizer_->encode("The quick brown fox", true);
  const std::size_t vocab = std::size_t(model_->config().vocab_size);
  Session session = model_->new_session(64);
  std::vector<float> logits(vocab);
  model_->forward(session, context, logits);
  Ids greedy;
  for (int step = 0; step < 4; ++step) {
    greedy.push_back(std::int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    model_->forward(session, Ids{greedy.back()}, logits);
  }
  const ContinuationScore score = score_continuation(*model_, context, greedy, 4096);
  EXPECT_TRUE(score.is_greedy);
  EXPECT_NEAR(score.logprob, direct_score(*model_, context, greedy).logprob, 1e-4);
  // One changed token (a different id from the argmax) breaks it.
  Ids changed = greedy;
  changed[2] = changed[2] == 15 ? 16 : 15;
  EXPECT_FALSE(score_continuation(*model_, context, changed, 4096).is_greedy);
}

TEST_F(LoglikelihoodTest, LongInputsAreCutFromTheLeftKeepingTheContinuation) {
  const Ids context = tokenizer_->encode("The quick brown fox jumps over the", true);  // 9 tokens
  ASSERT_EQ(context.size(), 9u);
  const Ids continuation{321, 2298, 90, 4399};  // " lazy dog"
  // max_length 6: of the 13 tokens the last 7 are kept, the last one only predicted; so the
  // model sees context[6..9) then the first three continuation tokens.
  const ContinuationScore score = score_continuation(*model_, context, continuation, 6);
  const Ids kept_context(context.begin() + 6, context.end());
  EXPECT_TRUE(score.truncated);
  EXPECT_EQ(score.context_tokens, 3);
  EXPECT_NEAR(score.logprob, direct_score(*model_, kept_context, continuation).logprob, 1e-4);
  // max_length 4: one context token is left to predict the first continuation token.
  EXPECT_NEAR(score_continuation(*model_, context, continuation, 4).logprob,
              direct_score(*model_, Ids{context.back()}, continuation).logprob, 1e-4);
  testing::expect_error([&] { score_continuation(*model_, context, continuation, 3); },
                        {"continuation has 4 tokens", "context of 3"});
  const LoglikelihoodOptions short_context{.max_length = 6};
  EXPECT_NEAR(loglikelihood(*model_, *tokenizer_, "The quick brown fox jumps over the", " lazy dog", short_context).logprob,
              score.logprob, 1e-9);
}

// A shared context runs once and each continuation continues a copy of its session: the scores
// equal separate fresh sessions' (up to the float rounding of a prefill cut elsewhere), for
// full attention, a window that wraps inside the context, and a recurrent state.
TEST_F(LoglikelihoodTest, SharedContextScoresEqualSeparateSessions) {
  const Ids context = tokenizer_->encode(
      "The quick brown fox jumps over the lazy dog. A second sentence follows the first one, and then "
      "a third one, so that a small window has to wrap around before the answer:", true);
  ASSERT_GT(context.size(), 30u);
  const std::vector<Ids> continuations{{730}, {321, 2298}, {730, 7812, 1019, 272, 321}, {90, 4399, 15, 16, 272, 321, 2298, 90, 4399}};
  for (const char* mixer : {"full", "swa:window=16,sinks=4", "mlstm"}) {
    SCOPED_TRACE(mixer);
    const Model model = Model::load(testing::testbed_model(), {.mixer = std::string(mixer)});
    const std::vector<ContinuationScore> shared = score_continuations(model, context, continuations, 4096);
    ASSERT_EQ(shared.size(), continuations.size());
    for (std::size_t i = 0; i < continuations.size(); ++i) {
      const ContinuationScore alone = score_continuation(model, context, continuations[i], 4096);
      EXPECT_NEAR(shared[i].logprob, alone.logprob, 1e-4 * std::max(1.0, std::abs(alone.logprob))) << "choice " << i;
      EXPECT_EQ(shared[i].is_greedy, alone.is_greedy);
      EXPECT_EQ(shared[i].continuation_tokens, alone.continuation_tokens);
      EXPECT_EQ(shared[i].context_tokens, alone.context_tokens);
      EXPECT_FALSE(shared[i].truncated);
    }
  }
}

TEST_F(LoglikelihoodTest, SharedContextFallsBackWhereAnInputIsCut) {
  const Ids context = tokenizer_->encode("The quick brown fox jumps over the", true);  // 9 tokens
  const std::vector<Ids> continuations{{321}, {321, 2298, 90, 4399}};                 // 10 and 13 tokens
  const std::vector<ContinuationScore> shared = score_continuations(*model_, context, continuations, 10);
  EXPECT_FALSE(shared[0].truncated);
  EXPECT_TRUE(shared[1].truncated);
  const ContinuationScore cut = score_continuation(*model_, context, continuations[1], 10);
  EXPECT_DOUBLE_EQ(shared[1].logprob, cut.logprob);
  EXPECT_EQ(shared[1].context_tokens, cut.context_tokens);
  EXPECT_NEAR(shared[0].logprob, score_continuation(*model_, context, continuations[0], 10).logprob, 1e-4);
  testing::expect_error([&] { score_continuations(*model_, context, std::vector<Ids>{{321}, {}}, 10); },
                        {"empty continuation"});
}

// A copy continues on its own: running tokens in it changes neither the source nor a second copy.
TEST_F(LoglikelihoodTest, ACopiedSessionIsIndependentOfItsSource) {
  const Ids prefix = tokenizer_->encode("The quick brown fox", true);
  const std::size_t vocab = std::size_t(model_->config().vocab_size);
  Session source = model_->new_session(32);
  std::vector<float> first(vocab), second(vocab), other(vocab);
  model_->forward(source, prefix, first);
  Session copy = model_->copy_session(source);
  EXPECT_EQ(copy.position(), source.position());
  model_->forward(copy, Ids{730, 7812}, first);
  model_->forward(copy, Ids{1019}, other);  // the copy moves on
  EXPECT_EQ(copy.position(), source.position() + 3);
  Session again = model_->copy_session(source);
  model_->forward(again, Ids{730, 7812}, second);
  EXPECT_EQ(first, second);  // bit for bit: the same state and the same computation
  EXPECT_EQ(source.position(), std::int64_t(prefix.size()));
}

TEST_F(LoglikelihoodTest, EmptyInputsAreErrors) {
  testing::expect_error([&] { score_continuation(*model_, Ids{kBos}, Ids{}, 16); }, {"empty continuation"});
  testing::expect_error([&] { score_continuation(*model_, Ids{}, Ids{405}, 16); }, {"empty context"});
}

}  // namespace
}  // namespace bifocal::eval
