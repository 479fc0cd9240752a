// A sweep's journal row names its owning process; the busy check can tell when that process died.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>

#include "db/store_util.h"
#include "db/tuning_store.h"

namespace hccltune::db {
namespace {

using json = nlohmann::json;

Sweep RunningRow(const json& owner) {
  Sweep s;
  s.id = "sw-test";
  s.status = SweepStatus::kRunning;
  s.started_unix_ms = NowUnixMs();
  json params = {{"spec", json::object()}};
  if (!owner.is_null()) params["owner"] = owner;
  s.params_json = params.dump();
  return s;
}

// A child that has exited and been reaped: its pid names no process (until reused, which start time catches).
json DeadChildOwner() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  json owner = json::parse(ThisProcessOwnerJson());
  owner["pid"] = static_cast<long>(child);
  return owner;
}

TEST(SweepOwner, ThisProcessIsAliveAndInProgress) {
  const Sweep s = RunningRow(json::parse(ThisProcessOwnerJson()));
  EXPECT_FALSE(SweepOwnerGone(s));
  EXPECT_TRUE(SweepInProgress(s, NowUnixMs()));
}

TEST(SweepOwner, ADeadOwnerReleasesTheNode) {
  const Sweep s = RunningRow(DeadChildOwner());
  EXPECT_TRUE(SweepOwnerGone(s));
  EXPECT_FALSE(SweepInProgress(s, NowUnixMs()));
}

TEST(SweepOwner, AReusedPidIsNotTheOwner) {
  json owner = json::parse(ThisProcessOwnerJson());
  owner["start"] = owner["start"].get<unsigned long long>() + 1;  // our pid, but not the process that started
  EXPECT_TRUE(SweepOwnerGone(RunningRow(owner)));
}

TEST(SweepOwner, WhatItCannotTellKeepsTheHorizonRule) {
  // Another boot (another machine), another pid namespace, no owner at all, unreadable parameters.
  json other_boot = DeadChildOwner();
  other_boot["boot_id"] = "00000000-0000-0000-0000-000000000000";
  json other_ns = DeadChildOwner();
  other_ns["pid_ns"] = "pid:[1]";
  for (const json& owner : {other_boot, other_ns, json()}) {
    const Sweep s = RunningRow(owner);
    EXPECT_FALSE(SweepOwnerGone(s)) << owner.dump();
    EXPECT_TRUE(SweepInProgress(s, NowUnixMs())) << owner.dump();
    EXPECT_FALSE(SweepInProgress(s, NowUnixMs() + int64_t{7} * 3600 * 1000)) << "past the 6 h horizon";
  }
  Sweep garbled = RunningRow(json());
  garbled.params_json = "{not json";
  EXPECT_FALSE(SweepOwnerGone(garbled));
  // Fields of the wrong type (any client can store a row): unknown owner, no exception (which aborted the daemon
  // on every restart, the row still in its database).
  json wrong_types = json::parse(ThisProcessOwnerJson());
  wrong_types["boot_id"] = 5;
  json wrong_start = json::parse(ThisProcessOwnerJson());
  wrong_start["start"] = "yesterday";
  for (const json& owner : {wrong_types, wrong_start}) {
    const Sweep s = RunningRow(owner);
    EXPECT_NO_THROW(EXPECT_FALSE(SweepOwnerGone(s)) << owner.dump());
    EXPECT_NO_THROW(EXPECT_TRUE(SweepInProgress(s, NowUnixMs())) << owner.dump());
  }
  // Not running: never in progress, whoever owned it.
  Sweep done = RunningRow(json::parse(ThisProcessOwnerJson()));
  done.status = SweepStatus::kDone;
  EXPECT_FALSE(SweepInProgress(done, NowUnixMs()));
}

}  // namespace
}  // namespace hccltune::db
