#include "kjit/error.hpp"
#include "kjit/templates/template.hpp"

#include <gtest/gtest.h>
#include <string>
#include <utility>
#include <vector>

namespace kjit {
namespace {

std::vector<std::pair<std::string, Value>> pairs(const ParamValues &params) {
  return {params.begin(), params.end()};
}

TEST(ParamValues, KeepsABraceListInItsOrder) {
  const ParamValues params = {{"T", "half"}, {"N", 4096}};
  ASSERT_EQ(params.size(), 2u);
  EXPECT_FALSE(params.empty());
  const std::vector<std::pair<std::string, Value>> expected = {{"T", "half"}, {"N", 4096}};
  EXPECT_EQ(pairs(params), expected);
  EXPECT_TRUE(ParamValues().empty());
  EXPECT_TRUE(ParamValues{}.empty());
}

TEST(ParamValues, RefusesANameGivenTwice) {
  try {
    const ParamValues params = {{"T", "half"}, {"N", 1}, {"T", "float"}};
    FAIL() << "accepted T twice: " << params.to_string();
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_parameter);
    EXPECT_EQ(error.summary(), "parameter 'T' is given twice");
  }
  ParamValues params = {{"N", 1}};
  EXPECT_THROW(params.add("N", 2), Error);
  EXPECT_THROW(params.add(ParamValues{{"M", 1}, {"N", 2}}), Error);
  EXPECT_EQ(params.get("N").integer(), 1);
}

TEST(ParamValues, GetsAndFindsByName) {
  const ParamValues params = {{"T", "half"}, {"N", 4096}};
  EXPECT_EQ(params.get("T").type(), "half");
  EXPECT_EQ(params.get("N").integer(), 4096);
  ASSERT_NE(params.find("N"), nullptr);
  EXPECT_EQ(params.find("N"), &params.get("N"));
  EXPECT_EQ(params.find("VEC"), nullptr);
  EXPECT_EQ(params.find("n"), nullptr); // names are case-sensitive
}

TEST(ParamValues, AMissingNameIsAnErrorNamingIt) {
  const ParamValues params = {{"T", "half"}, {"N", 4096}};
  try {
    params.get("VEC");
    FAIL() << "found VEC";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_parameter);
    EXPECT_EQ(error.summary(), "parameter 'VEC' has no value among (N=4096,T=half)");
  }
  EXPECT_THROW(ParamValues().get("T"), Error);
}

TEST(ParamValues, SetReplacesInPlaceOrAppends) {
  ParamValues params = {{"T", "half"}, {"N", 4096}};
  params.set("T", "float");
  params.set("VEC", 4);
  const std::vector<std::pair<std::string, Value>> expected = {
      {"T", "float"}, {"N", 4096}, {"VEC", 4}};
  EXPECT_EQ(pairs(params), expected);
  params.set("N", "int"); // a value may change kind
  EXPECT_TRUE(params.get("N").is_type());
  EXPECT_EQ(params.size(), 3u);
}

TEST(ParamValues, AddAppendsEachOfAnother) {
  ParamValues params = {{"T", "half"}};
  params.add(ParamValues{{"VEC", 4}, {"THREADS", 128}});
  params.add("N", 64);
  const std::vector<std::pair<std::string, Value>> expected = {
      {"T", "half"}, {"VEC", 4}, {"THREADS", 128}, {"N", 64}};
  EXPECT_EQ(pairs(params), expected);
}

TEST(ParamValues, EqualityIgnoresOrderButNotValuesOrNames) {
  const ParamValues params = {{"T", "half"}, {"N", 64}};
  EXPECT_EQ(params, (ParamValues{{"N", 64}, {"T", "half"}}));
  EXPECT_NE(params, (ParamValues{{"T", "half"}, {"N", 65}}));
  EXPECT_NE(params, (ParamValues{{"T", "half"}, {"M", 64}}));
  EXPECT_NE(params, (ParamValues{{"T", "half"}}));
  EXPECT_NE(params, (ParamValues{{"T", "half"}, {"N", 64}, {"VEC", 4}}));
  EXPECT_NE(params, (ParamValues{{"T", "half"}, {"N", "64"}})); // a type named 64 is no integer
  EXPECT_EQ(ParamValues(), ParamValues{});
}

TEST(ParamValues, TheTextFormIsOrderedByName) {
  EXPECT_EQ((ParamValues{{"T", "half"}, {"N", 4096}}).to_string(), "N=4096,T=half");
  EXPECT_EQ((ParamValues{{"N", 4096}, {"T", "half"}}).to_string(), "N=4096,T=half");
  EXPECT_EQ((ParamValues{{"b_kmajor", 0}, {"K", -1}}).to_string(), "K=-1,b_kmajor=0");
  EXPECT_EQ(ParamValues().to_string(), "");
}

TEST(ParamValues, SortedOrdersByNameAndKeepsTheValues) {
  const ParamValues params = {{"VEC", 4}, {"T", "half"}, {"N", 64}};
  const std::vector<std::pair<std::string, Value>> expected = {
      {"N", 64}, {"T", "half"}, {"VEC", 4}};
  EXPECT_EQ(pairs(params.sorted()), expected);
  EXPECT_EQ(params.sorted(), params);
}

TEST(ParamValues, CanonicalParamsIsTheTextForm) {
  const Template scale(
      "scale", "",
      {{"T", ParamSchema::type({"float", "half"})}, {"N", ParamSchema::integer(1, 1 << 20, 256)}});
  const Instance instance = scale.bind({{"T", "half"}});
  EXPECT_EQ(instance.canonical_params(), instance.values().to_string());
  EXPECT_EQ(instance.canonical_params(), "N=256,T=half");
}

} // namespace
} // namespace kjit
