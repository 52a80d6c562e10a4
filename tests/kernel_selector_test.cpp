// core/kernel_selector.h: the --ablate specs that pick some launches of a kernel, and their errors.
#include <gtest/gtest.h>

#include <vector>

#include "bifocal/error.h"
#include "core/kernel_selector.h"

namespace bifocal {
namespace {

std::vector<int> taken(const KernelSelector& selector, int launches) {
  std::vector<int> occurrences;
  for (int o = 0; o < launches; ++o)
    if (selector.takes(o)) occurrences.push_back(o);
  return occurrences;
}

TEST(KernelSelector, ANameAloneTakesEveryLaunch) {
  const KernelSelector gemv = KernelSelector::parse("gemv");
  EXPECT_EQ(gemv.name, "gemv");
  EXPECT_TRUE(gemv.matches_name("gemv_kernel"));
  EXPECT_FALSE(gemv.matches_name("gate_up_swiglu_kernel"));
  EXPECT_EQ(taken(gemv, 4), (std::vector<int>{0, 1, 2, 3}));
}

TEST(KernelSelector, OneLaunchByItsNumber) {
  const KernelSelector lm_head = KernelSelector::parse("gemv#108");
  EXPECT_EQ(lm_head.name, "gemv");
  EXPECT_EQ(taken(lm_head, 109), (std::vector<int>{108}));
  EXPECT_TRUE(taken(lm_head, 100).empty());  // a step with fewer launches: none
}

TEST(KernelSelector, OneLaunchInEveryN) {
  EXPECT_EQ(taken(KernelSelector::parse("gemv#1/3"), 10), (std::vector<int>{1, 4, 7}));
  EXPECT_EQ(taken(KernelSelector::parse("gemv#0/3"), 7), (std::vector<int>{0, 3, 6}));
  EXPECT_EQ(taken(KernelSelector::parse("attention#0/1"), 3), (std::vector<int>{0, 1, 2}));
}

TEST(KernelSelector, MalformedSpecsSayWhatIsWrong) {
  const auto message = [](const char* spec) {
    try {
      KernelSelector::parse(spec);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("#1/3").find("give a kernel name"), std::string::npos) << message("#1/3");
  EXPECT_NE(message("").find("give a kernel name"), std::string::npos);
  for (const char* spec : {"gemv#", "gemv#x", "gemv#-1", "gemv#1.5", "gemv#/3"})
    EXPECT_NE(message(spec).find("the launch's number from 0"), std::string::npos) << spec << ": " << message(spec);
  for (const char* spec : {"gemv#1/0", "gemv#1/", "gemv#1/x", "gemv#1/-2"})
    EXPECT_NE(message(spec).find("at least 1"), std::string::npos) << spec << ": " << message(spec);
  EXPECT_NE(message("gemv#3/3").find("must be below N"), std::string::npos);
  EXPECT_EQ(message("gemv#1/3").find("no error"), 0u);
  EXPECT_EQ(message("gemv#3/3").rfind("--ablate: 'gemv#3/3': ", 0), 0u) << message("gemv#3/3");
}

TEST(KernelSelector, APlusBTakesTheLaunchesOfBoth) {
  const std::vector<KernelSelector> both = parse_kernel_selection("attention_decode_window+mlstm_decode#0/2");
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].name, "attention_decode_window");
  EXPECT_EQ(taken(both[0], 3), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(both[1].name, "mlstm_decode");
  EXPECT_EQ(taken(both[1], 4), (std::vector<int>{0, 2}));
  EXPECT_EQ(parse_kernel_selection("gemv").size(), 1u);
  for (const char* spec : {"gemv+", "+gemv", "gemv++gate_up", ""})
    EXPECT_THROW(parse_kernel_selection(spec), Error) << spec;
  try {
    parse_kernel_selection("gemv+gate_up#2/2");
    FAIL() << "a bad part is an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("'gate_up#2/2': I in NAME#I/N must be below N"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace bifocal
