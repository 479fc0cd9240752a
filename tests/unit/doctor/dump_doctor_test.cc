// hccl-tune doctor on dumps (tuner/doctor/dump_doctor.h): each seeded problem is the first finding with its fix —
// a hang (a rank that never entered the operation the others wait in), a mismatch (a rank that called another
// collective at the same operation), an override; a healthy job gets nothing above info; bad input is an error
// naming what is wrong.
#include "tuner/doctor/dump_doctor.h"

#include <gtest/gtest.h>

#include "tests/unit/doctor/dump_fixture.h"

namespace hccltune::doctor {
namespace {

using DumpDoctorTest = DumpFixture;

TEST_F(DumpDoctorTest, AHangNamesTheRanksThatNeverEnteredTheOperation) {
  // Ranks 0 and 1 wait in operation 6 for 30 s; rank 2 completed 5 and never entered 6; rank 3 left no dump.
  Write(0, 4, 5, {Entry(6, "allreduce", 8, "started", "default", 30)});
  Write(1, 4, 5, {Entry(6, "allreduce", 8, "started", "default", 30)});
  Write(2, 4, 5);
  const std::vector<Finding> f = Diagnose();
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "hang");
  EXPECT_EQ(f[0].severity, Severity::kError);
  EXPECT_EQ(f[0].title, "hang at operation 6 (allreduce of 8 B): ranks 2, 3 never entered it");
  ASSERT_EQ(f[0].evidence.size(), 4u);
  EXPECT_NE(f[0].evidence[0].find("waiting in operation 6"), std::string::npos) << f[0].evidence[0];
  EXPECT_NE(f[0].evidence[0].find("blocked 30.0 s before its dump"), std::string::npos) << f[0].evidence[0];
  EXPECT_NE(f[0].evidence[2].find("last completed 5; never entered operation 6"), std::string::npos);
  EXPECT_EQ(f[0].evidence[3], "rank 3: no dump (a stopped, stuck or dead process writes none)");
  EXPECT_NE(f[0].fix.find("ranks 2, 3"), std::string::npos) << f[0].fix;
}

TEST_F(DumpDoctorTest, AMismatchComesFirstNamingEachRanksCall) {
  Write(0, 2, 5, {Entry(6, "allreduce", 8, "started", "default", 10)});
  Write(1, 2, 5, {Entry(6, "allgather", 16, "started", "default", 10)});
  const std::vector<Finding> f = Diagnose();
  ASSERT_GE(f.size(), 2u);
  EXPECT_EQ(f[0].kind, "mismatch");
  EXPECT_EQ(f[0].title, "the ranks called different collectives at operation 6: allgather of 16 B / allreduce of 8 B");
  EXPECT_EQ(f[0].evidence, (std::vector<std::string>{"rank 1: operation 6 is allgather of 16 B",
                                                     "rank 0: operation 6 is allreduce of 8 B"}));
  EXPECT_EQ(f[1].kind, "hang");
}

TEST_F(DumpDoctorTest, AnOverrideIsAWarningWithTheCommandToCheckIt) {
  Write(0, 2, 20, {}, "HCCL_TUNE_ALGO");
  Write(1, 2, 20, {}, "HCCL_TUNE_ALGO");
  const std::vector<Finding> f = Diagnose();
  ASSERT_EQ(f.size(), 1u);  // no table to judge it by: named as an override
  EXPECT_EQ(f[0].kind, "override");
  EXPECT_EQ(f[0].severity, Severity::kWarn);
  EXPECT_EQ(f[0].title, "20 allreduce calls of 8 B ran ring(chunk=1M,channels=1,link=auto), forced by HCCL_TUNE_ALGO");
  EXPECT_NE(f[0].fix.find("hccl-tune bench --coll allreduce --ranks 2 --min-bytes 8 --max-bytes 8 --algo "
                          "'ring(chunk=1M,channels=1,link=auto)'"),
            std::string::npos)
      << f[0].fix;
  EXPECT_NE(f[0].fix.find("HCCL_TUNE_ALGO"), std::string::npos);
}

TEST_F(DumpDoctorTest, AHealthyJobGetsNothingAboveInfo) {
  // A rank waiting a little (0.2 s, under --hang-after) in the call it runs is a healthy job.
  Write(0, 2, 50, {Entry(51, "allreduce", 8, "started", "default", 0.2)});
  Write(1, 2, 50);
  const std::vector<Finding> f = Diagnose();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::kInfo);
  EXPECT_EQ(f[0].kind, "summary");
  EXPECT_NE(FormatFindings(f).find("1. [info] summary: communicator 00000000000000ab: dumps of 2 of 2 ranks"),
            std::string::npos)
      << FormatFindings(f);
}

TEST_F(DumpDoctorTest, BadInputIsAnErrorNamingIt) {
  auto empty = DiagnoseDumpDir(dir_);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("holds no flight-recorder dump"), absl::string_view::npos);
  std::ofstream(dir_ + "/fr-x-r0.json") << "{\"version\":\"other\"}";
  auto bad = DiagnoseDumpDir(dir_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fr-x-r0.json: not a flight-recorder dump"), absl::string_view::npos)
      << bad.status();
  auto missing = DiagnoseDumpDir(dir_ + "/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot read directory"), absl::string_view::npos);
}

}  // namespace
}  // namespace hccltune::doctor
