// The wrappers' choice between a tuning record's winner and their heuristic (ops/src/launch.cpp),
// and the row buckets records are kept for.
#include "kjit/templates/library.hpp"
#include "ops/src/launch.hpp"

#include <gtest/gtest.h>

namespace kjit::ops::detail {
namespace {

const RowShape heuristic = row_shape(8, 4096, 32);

TEST(Plans, WithoutARecordTheHeuristicIsUsed) {
  const RowShape chosen = choose_row_shape(heuristic, std::nullopt, 8, 32);
  EXPECT_EQ(chosen.vec, heuristic.vec);
  EXPECT_EQ(chosen.threads, heuristic.threads);
}

TEST(Plans, TheWinnerIsUsedWhenThePointersAllowItsVectors) {
  const TimedVariant winner{{{"VEC", 4}, {"THREADS", 512}}, 2.0};
  const RowShape chosen = choose_row_shape(heuristic, winner, 8, 32);
  EXPECT_EQ(chosen.vec, 4);
  EXPECT_EQ(chosen.threads, 512);
  EXPECT_EQ(chosen.rows_per_block, 1);
  // A winner of one warp a row shares its block with other rows, as the heuristic's do.
  EXPECT_EQ(choose_row_shape(heuristic, TimedVariant{{{"VEC", 8}, {"THREADS", 32}}, 1}, 8, 32)
                .rows_per_block,
            8);
}

TEST(Plans, AWinnerWiderThanThePointersAllowFallsBack) {
  const TimedVariant winner{{{"VEC", 8}, {"THREADS", 256}}, 2.0};
  const RowShape narrow = row_shape(2, 4096, 32);
  const RowShape chosen = choose_row_shape(narrow, winner, 2, 32);
  EXPECT_EQ(chosen.vec, 2);
  EXPECT_EQ(chosen.threads, narrow.threads);
  // A record missing a value is not used either.
  EXPECT_EQ(choose_row_shape(heuristic, TimedVariant{{{"VEC", 4}}, 1}, 8, 32).threads,
            heuristic.threads);
}

// choose_row_shape knows nothing of the template: a record's winner of VEC=3 passes it, and
// rt.kernel would then refuse the variant instead of the wrapper falling back to its heuristic.
// tuned_winner checks a winner against the template's schema first (winner_problem).
TEST(Plans, AWinnerTheTemplateRefusesIsCaughtBeforeItReachesALaunch) {
  const TimedVariant odd{{{"THREADS", 256}, {"VEC", 3}}, 1.0};
  EXPECT_EQ(choose_row_shape(heuristic, odd, 8, 32).vec, 3);
  const Template &rms_norm = templates::find("rms_norm");
  EXPECT_THROW(rms_norm.bind({{"T", "bfloat16"}, {"HIDDEN", 4096}, {"VEC", 3}, {"THREADS", 256}}),
               Error);
  const TuningKey key = TuningKey::of(rms_norm, {{"T", "bfloat16"}, {"HIDDEN", 4096}},
                                      {{"rows", 64}}, {"sm_90a", 132}, "nvrtc");
  EXPECT_NE(winner_problem(rms_norm, {key, odd, {}, 0}), "");
}

TEST(Plans, RowsAreBucketedToPowersOfTwo) {
  EXPECT_EQ(rows_bucket(1), 1);
  EXPECT_EQ(rows_bucket(0), 1);
  EXPECT_EQ(rows_bucket(64), 64);
  EXPECT_EQ(rows_bucket(65), 128);
  EXPECT_EQ(rows_bucket(65536), 65536);
}

// half and bfloat16 have one size: a plan remembered for one must not serve the other.
TEST(Plans, HalfAndBFloat16ShapesHaveTheirOwnPlans) {
  static const int op = 0;
  const PlanKey half = plan_key<Half>(7, &op, 4096, 3, 8);
  remember_plan(half, Plan{nullptr, 8, 32, 8});
  EXPECT_NE(find_plan(half), nullptr);
  EXPECT_EQ(find_plan(plan_key<BFloat16>(7, &op, 4096, 3, 8)), nullptr);
  EXPECT_EQ(find_plan(plan_key<float>(7, &op, 4096, 3, 8)), nullptr);
  EXPECT_NE(find_plan(plan_key<Half>(7, &op, 4096, 4, 8)), nullptr); // the same row bucket
}

} // namespace
} // namespace kjit::ops::detail
