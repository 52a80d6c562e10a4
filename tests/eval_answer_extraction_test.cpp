// Final-answer extraction and comparison (src/eval/answer_extraction.h) on hand-written
// solutions: which answer is taken (box, "####", "answer is", last number), and which pairs of
// answers count as equal.
#include <gtest/gtest.h>

#include "eval/answer_extraction.h"

namespace bifocal::eval {
namespace {

TEST(AnswerExtraction, LastCompleteBoxWithNestedBraces) {
  EXPECT_EQ(last_boxed_content("so $\\boxed{\\frac{1}{576}}$."), "\\frac{1}{576}");
  EXPECT_EQ(last_boxed_content("first \\boxed{3}, then \\boxed{4}"), "4");
  EXPECT_EQ(last_boxed_content("\\boxed{{a}{b}}"), "{a}{b}");
  EXPECT_EQ(last_boxed_content("\\boxed { 12 }"), "12");
  EXPECT_EQ(last_boxed_content("\\fbox{7}"), "7");
  EXPECT_EQ(last_boxed_content("the answer is $\\boxed 5$."), "5");
  // A box cut off by the end of generation does not count; the earlier complete one does.
  EXPECT_EQ(last_boxed_content("\\boxed{10} but wait, \\boxed{\\frac{1}{2"), "10");
  // An empty box (the instruction's \boxed{} echoed) is no answer.
  EXPECT_EQ(last_boxed_content("put it in \\boxed{}"), std::nullopt);
  EXPECT_EQ(last_boxed_content("\\boxedsymbol{3}"), std::nullopt);
  EXPECT_EQ(last_boxed_content("no box here 42"), std::nullopt);
}

TEST(AnswerExtraction, NumbersAsWritten) {
  EXPECT_EQ(last_number("It costs $1,200.50."), "1,200.50");
  EXPECT_EQ(last_number("from 3 to 18 eggs"), "18");
  EXPECT_EQ(last_number("the result is -10"), "-10");
  EXPECT_EQ(last_number("pages 3-4"), "4");            // a hyphen between numbers is no sign
  EXPECT_EQ(last_number("1,2,3"), "3");                // not thousands groups: three numbers
  EXPECT_EQ(last_number("about 12,5000 of them"), "5000");
  EXPECT_EQ(last_number("So 2.5."), "2.5");            // the sentence's period is not a decimal point
  EXPECT_EQ(last_number("no digits at all"), std::nullopt);
  EXPECT_EQ(number_after_marker("9 * 2 = 18\n#### 18\nmore 7", "####"), "18");
  EXPECT_EQ(number_after_marker("#### $1,000", "####"), "1,000");
  EXPECT_EQ(number_after_marker("#### none\n5", "####"), std::nullopt);  // only the marker's own line
}

TEST(AnswerExtraction, OrderBoxThenMarkerThenPhraseThenLastNumber) {
  const auto boxed = extract_final_answer("#### 5\nThe answer is 6, so \\boxed{7}. Check: 8");
  EXPECT_EQ(boxed.text, "7");
  EXPECT_EQ(boxed.source, AnswerSource::boxed);

  const auto marked = extract_final_answer("She makes 9 * 2 = $18.\n#### 18\nQuestion 3 follows");
  EXPECT_EQ(marked.text, "18");
  EXPECT_EQ(marked.source, AnswerSource::hash_marker);

  // The testbed's worked solutions end "The answer is N."; numbers after that line do not count.
  const auto stated = extract_final_answer("Finally, a − 10 = 969 − 10 = 959.\nThe answer is 959.\nLet g = 4.");
  EXPECT_EQ(stated.text, "959");
  EXPECT_EQ(stated.source, AnswerSource::answer_phrase);
  EXPECT_EQ(extract_final_answer("THE ANSWER IS: 12").text, "12");

  const auto last = extract_final_answer("3 + 4 = 7, and 7 * 2 = 14.");
  EXPECT_EQ(last.text, "14");
  EXPECT_EQ(last.source, AnswerSource::last_number);

  const auto nothing = extract_final_answer("I do not know.");
  EXPECT_EQ(nothing.text, "");
  EXPECT_EQ(nothing.source, AnswerSource::none);
  EXPECT_EQ(answer_source_name(AnswerSource::hash_marker), "####");
}

TEST(AnswerExtraction, NumericValuesAreExactFractions) {
  const auto value = [](std::string_view text) { return parse_numeric_answer(text); };
  EXPECT_EQ(value("18"), (ExactNumber{18, 1}));
  EXPECT_EQ(value("1,450,000"), (ExactNumber{1450000, 1}));
  EXPECT_EQ(value("10{,}000"), (ExactNumber{10000, 1}));
  EXPECT_EQ(value("18.0"), (ExactNumber{18, 1}));
  EXPECT_EQ(value("0.50"), (ExactNumber{1, 2}));
  EXPECT_EQ(value("025"), (ExactNumber{25, 1}));
  EXPECT_EQ(value("$18"), (ExactNumber{18, 1}));
  EXPECT_EQ(value("\\$18.00"), (ExactNumber{18, 1}));
  EXPECT_EQ(value("50\\%"), (ExactNumber{50, 1}));
  EXPECT_EQ(value("-10"), (ExactNumber{-10, 1}));
  EXPECT_EQ(value("\\frac{1}{576}"), (ExactNumber{1, 576}));
  EXPECT_EQ(value("-\\dfrac{6}{8}"), (ExactNumber{-3, 4}));
  EXPECT_EQ(value("\\frac{-3}{4}"), (ExactNumber{-3, 4}));
  EXPECT_EQ(value("\\frac12"), (ExactNumber{1, 2}));
  EXPECT_EQ(value("3/4"), (ExactNumber{3, 4}));
  EXPECT_EQ(value("x = 5"), (ExactNumber{5, 1}));
  EXPECT_EQ(value("18 dollars."), (ExactNumber{18, 1}));
  EXPECT_EQ(value("18\\text{ dollars}"), (ExactNumber{18, 1}));
  EXPECT_EQ(value("$\\text{70}$"), (ExactNumber{70, 1}));
  EXPECT_EQ(value("1\\,000"), (ExactNumber{1000, 1}));
  EXPECT_EQ(value("8\\sqrt{10}"), std::nullopt);
  EXPECT_EQ(value("2^{25} \\cdot 26!"), std::nullopt);
  EXPECT_EQ(value("1,2"), std::nullopt);               // not a thousands group
  EXPECT_EQ(value("1/0"), std::nullopt);
  EXPECT_EQ(value("1234567890123456789"), std::nullopt);  // 19 significant digits
  EXPECT_EQ(value(""), std::nullopt);
}

TEST(AnswerExtraction, NumbersCompareByValue) {
  EXPECT_TRUE(answers_match("18", "18"));
  EXPECT_TRUE(answers_match("18.00", "18"));
  EXPECT_TRUE(answers_match("$18", "18"));
  EXPECT_TRUE(answers_match("2,125", "2125"));
  EXPECT_TRUE(answers_match("25", "025"));             // AIME 2024's published padding
  EXPECT_TRUE(answers_match("0.5", "\\frac{1}{2}"));
  EXPECT_TRUE(answers_match("2/4", "\\frac{1}{2}"));
  EXPECT_TRUE(answers_match("\\dfrac{1}{576}", "\\frac{1}{576}"));
  EXPECT_TRUE(answers_match("-10", "-10"));
  EXPECT_FALSE(answers_match("10", "-10"));
  EXPECT_FALSE(answers_match("18.5", "18"));
  EXPECT_FALSE(answers_match("1/576", "576"));
  EXPECT_FALSE(answers_match("", "0"));
}

TEST(AnswerExtraction, OtherAnswersCompareAsNormalizedText) {
  EXPECT_EQ(normalize_answer_text(" $\\left( 2, 3 \\right)$. "), "(2,3)");
  EXPECT_EQ(normalize_answer_text("\\tfrac{9 \\sqrt{23}}{23}"), "\\frac{9\\sqrt{23}}{23}");
  EXPECT_EQ(normalize_answer_text("a \\leftarrow b"), "a\\leftarrowb");  // \leftarrow is not \left
  EXPECT_TRUE(answers_match("\\frac{9\\sqrt{23}}{23}", "\\frac{9 \\sqrt{23}}{23}"));
  EXPECT_TRUE(answers_match("2^{25}\\cdot 26!", "2^{25} \\cdot 26!"));
  EXPECT_TRUE(answers_match("\\sqrt{23} - 2\\sqrt{3}", "\\sqrt{23}-2 \\sqrt{3}"));
  EXPECT_FALSE(answers_match("8\\sqrt{11}", "8\\sqrt{10}"));
  EXPECT_FALSE(answers_match("1-\\frac{2}{\\pi}", "1-\\frac{1}{\\pi}"));
}

TEST(AnswerExtraction, ListsMatchInAnyOrder) {
  const std::string pair = "\\frac{-1+\\sqrt{17}}{2}, \\frac{-1-\\sqrt{17}}{2}";  // HMMT Feb 2025, problem 10
  EXPECT_TRUE(answers_match("\\frac{-1-\\sqrt{17}}{2},\\frac{-1+\\sqrt{17}}{2}", pair));
  EXPECT_TRUE(answers_match(pair, pair));
  EXPECT_FALSE(answers_match("\\frac{-1-\\sqrt{17}}{2}", pair));
  EXPECT_FALSE(answers_match("\\frac{-1-\\sqrt{17}}{2}, \\frac{-1-\\sqrt{17}}{2}", pair));  // one twice
  EXPECT_TRUE(answers_match("3, 0.5", "\\frac{1}{2}, 3"));
  // A number with a thousands comma is one number, not a list.
  EXPECT_FALSE(answers_match("000, 1", "1,000"));
}

TEST(AnswerExtraction, WholeSolutionsEndToEnd) {
  const auto correct = [](std::string_view solution, std::string_view reference) {
    const ExtractedAnswer answer = extract_final_answer(solution);
    return answer.source != AnswerSource::none && answers_match(answer.text, reference);
  };
  EXPECT_TRUE(correct("Janet sells 16 - 3 - 4 = 9 duck eggs a day.\nShe makes 9 * 2 = $18 every day.\n#### 18", "18"));
  EXPECT_TRUE(correct(" The new value is $200,000, so he made 200,000 - 130,000 = $70,000.", "70000"));
  EXPECT_TRUE(correct("<think>maybe 3? no</think> Therefore $xy = \\boxed{25}$.", "025"));
  EXPECT_TRUE(correct("so the minimum is $\\boxed{\\dfrac{1}{576}}$", "\\frac{1}{576}"));
  EXPECT_FALSE(correct("so the minimum is $\\boxed{576}$", "\\frac{1}{576}"));
  EXPECT_FALSE(correct("I cannot solve this.", "0"));
}

}  // namespace
}  // namespace bifocal::eval
