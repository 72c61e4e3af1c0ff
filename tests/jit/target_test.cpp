#include "kjit/error.hpp"
#include "kjit/jit/target.hpp"

#include <gtest/gtest.h>

namespace kjit::jit {
namespace {

TEST(TargetParse, AmdProcessorAlone) {
  Target target = Target::parse("gfx90a");
  EXPECT_EQ(target.vendor(), Vendor::amd);
  EXPECT_EQ(target.arch(), "gfx90a");
  EXPECT_TRUE(target.features().empty());
  EXPECT_EQ(target.id(), "gfx90a");
}

TEST(TargetParse, AmdFeaturesAreParsedAndSortedByName) {
  Target target = Target::parse("gfx90a:xnack-:sramecc+");
  EXPECT_EQ(target.arch(), "gfx90a");
  std::vector<TargetFeature> expected{{"sramecc", true}, {"xnack", false}};
  EXPECT_EQ(target.features(), expected);
  EXPECT_EQ(target.id(), "gfx90a:sramecc+:xnack-");
}

TEST(TargetParse, FeatureOrderDoesNotChangeTheTarget) {
  Target written_one_way = Target::parse("gfx90a:xnack-:sramecc+");
  Target written_the_other = Target::parse("gfx90a:sramecc+:xnack-");
  EXPECT_EQ(written_one_way, written_the_other);
  EXPECT_EQ(written_one_way.hash(), written_the_other.hash());
}

TEST(TargetParse, DifferentTargetsDiffer) {
  EXPECT_NE(Target::parse("gfx906"), Target::parse("gfx908"));
  EXPECT_NE(Target::parse("gfx906").hash(), Target::parse("gfx908").hash());
  EXPECT_NE(Target::parse("gfx90a"), Target::parse("gfx90a:xnack-"));
  EXPECT_NE(Target::parse("gfx90a:xnack+"), Target::parse("gfx90a:xnack-"));
  EXPECT_NE(Target::parse("sm_90"), Target::parse("sm_90a"));
}

TEST(TargetParse, NvidiaTargets) {
  for (const char *text : {"sm_75", "sm_90", "sm_90a", "sm_100f", "sm_121"}) {
    Target target = Target::parse(text);
    EXPECT_EQ(target.vendor(), Vendor::nvidia) << text;
    EXPECT_EQ(target.arch(), text);
    EXPECT_EQ(target.id(), text);
    EXPECT_TRUE(target.features().empty());
  }
}

TEST(TargetParse, RdnaProcessorNamesParse) {
  EXPECT_EQ(Target::parse("gfx1030").arch(), "gfx1030");
  EXPECT_EQ(Target::parse("gfx1100").arch(), "gfx1100"); // parses; support is the compiler's call
}

TEST(TargetParse, GenericTargetsParseWithTheirFeaturesAndWavefront) {
  for (const char *name : {"gfx9-generic", "gfx9-4-generic", "gfx10-1-generic", "gfx10-3-generic",
                           "gfx11-generic", "gfx12-generic"}) {
    Target target = Target::parse(name);
    EXPECT_EQ(target.id(), name);
    EXPECT_TRUE(target.is_generic()) << name;
  }
  EXPECT_EQ(Target::parse("gfx9-4-generic:xnack-:sramecc+").id(), "gfx9-4-generic:sramecc+:xnack-");
  EXPECT_EQ(Target::parse("gfx9-generic").warp_size(), 64);
  EXPECT_EQ(Target::parse("gfx9-4-generic").warp_size(), 64);
  EXPECT_EQ(Target::parse("gfx11-generic").warp_size(), 32);
  EXPECT_EQ(Target::parse("gfx12-generic").warp_size(), 32);
  EXPECT_FALSE(Target::parse("gfx1101").is_generic());
}

TEST(TargetParse, GenericTargetRefusesAFeatureItLacks) {
  try {
    Target::parse("gfx11-generic:xnack+");
    FAIL() << "gfx11-generic:xnack+ parsed";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_target);
    EXPECT_NE(std::string(error.what()).find("gfx11-generic takes no feature 'xnack'"),
              std::string::npos)
        << error.what();
  }
}

TEST(GenericFamily, EachProcessorMapsToTheGenericTargetThatServesIt) {
  EXPECT_EQ(generic_family("gfx1101"), "gfx11-generic");
  EXPECT_EQ(generic_family("gfx1151"), "gfx11-generic");
  EXPECT_EQ(generic_family("gfx1201"), "gfx12-generic");
  EXPECT_EQ(generic_family("gfx942"), "gfx9-4-generic");
  EXPECT_EQ(generic_family("gfx950"), "gfx9-4-generic");
  EXPECT_EQ(generic_family("gfx906"), "gfx9-generic");
  EXPECT_EQ(generic_family("gfx1013"), "gfx10-1-generic");
  EXPECT_EQ(generic_family("gfx1036"), "gfx10-3-generic");
  EXPECT_EQ(generic_family("gfx90a"), std::nullopt); // no generic target serves it
  EXPECT_EQ(generic_family("gfx11-generic"), std::nullopt);
  EXPECT_EQ(generic_family("sm_90"), std::nullopt);
}

std::vector<std::string> serving_ids(const char *target) {
  std::vector<std::string> ids;
  for (const Target &serving : serving_targets(Target::parse(target)))
    ids.push_back(serving.id());
  return ids;
}

TEST(ServingTargets, ExactFirstThenFewerFeaturesThenTheGenericFamily) {
  using Ids = std::vector<std::string>;
  EXPECT_EQ(serving_ids("gfx1101"), (Ids{"gfx1101", "gfx11-generic"}));
  EXPECT_EQ(serving_ids("gfx942:sramecc+:xnack-"),
            (Ids{"gfx942:sramecc+:xnack-", "gfx942:xnack-", "gfx942:sramecc+", "gfx942",
                 "gfx9-4-generic:sramecc+:xnack-", "gfx9-4-generic:xnack-",
                 "gfx9-4-generic:sramecc+", "gfx9-4-generic"}));
  // gfx9-generic takes no sramecc: code for it names none, which runs under either setting.
  EXPECT_EQ(serving_ids("gfx906:sramecc-:xnack+"),
            (Ids{"gfx906:sramecc-:xnack+", "gfx906:xnack+", "gfx906:sramecc-", "gfx906",
                 "gfx9-generic:xnack+", "gfx9-generic"}));
  EXPECT_EQ(serving_ids("gfx90a"), (Ids{"gfx90a"})); // no family
  EXPECT_EQ(serving_ids("gfx11-generic"), (Ids{"gfx11-generic"}));
  EXPECT_EQ(serving_ids("sm_90a"), (Ids{"sm_90a", "sm_90"}));
  EXPECT_EQ(serving_ids("sm_100f"), (Ids{"sm_100f", "sm_100"}));
  EXPECT_EQ(serving_ids("sm_90"), (Ids{"sm_90"}));
}

class BadTarget : public ::testing::TestWithParam<const char *> {};

TEST_P(BadTarget, IsRefusedWithTheTextAndTheExpectedForms) {
  try {
    Target::parse(GetParam());
    FAIL() << "'" << GetParam() << "' parsed";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_target);
    std::string message = error.what();
    EXPECT_NE(message.find(std::string("'") + GetParam() + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("gfx90a:sramecc+:xnack-"), std::string::npos) << message;
    EXPECT_NE(message.find("sm_90a"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
  }
}

INSTANTIATE_TEST_SUITE_P(TargetParse, BadTarget,
                         ::testing::Values("", "gfx", "gfx90g", "GFX90A", "gfx90A", " gfx90a",
                                           "gfx90a ", "gfx090a", "gfx90a:", "gfx90a:xnack",
                                           "gfx90a:xnack+:", "gfx90a:+", "gfx90a:Xnack+",
                                           "gfx90a:xnack+:xnack-", "gfx90a:xnack+:xnack+",
                                           "gfx90a::xnack+", "sm_", "sm_9x", "sm_090", "sm_90b",
                                           "sm_90af", "sm_90:xnack+", "SM_90", "compute_90", "90",
                                           "nvidia", "sm90", "gfx11-Generic", "gfx13-generic",
                                           "gfx11-generic:", "gfx9-generic:sramecc+"));

TEST(TargetParse, DuplicateFeatureIsNamedInTheMessage) {
  try {
    Target::parse("gfx90a:xnack+:xnack-");
    FAIL();
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what()).find("feature 'xnack' is given twice"), std::string::npos)
        << error.what();
  }
}

} // namespace
} // namespace kjit::jit
