// Profiles and measurements the cost model's tests share (model_test.cc, pulled_test.cc).
#pragma once

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/fit.h"
#include "model/predict.h"
#include "model/profile.h"

namespace hccltune::model {

// Version 1: intra 1 us/round, 0.5 us/message, 10 GB/s; inter 10 us, 2 us, 1 GB/s; 2 NICs, reduce 5 GB/s, 4 cores.
inline constexpr char kProfile[] = R"({"name": "t",
  "intra": {"latency_us": 1, "message_us": 0.5, "bandwidth_GBps": 10},
  "inter": {"latency_us": 10, "message_us": 2, "bandwidth_GBps": 1},
  "nics_per_node": 2, "reduce_GBps": 5, "cores_per_node": 4})";

inline ClusterProfile TestProfile() {
  auto p = ParseProfile(kProfile, "test");
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : ClusterProfile{};
}

// The same as version 2, with a mailbox, a wait for a core and tcp inside a node.
inline constexpr char kProfileV2[] = R"({"name": "t2", "version": 2,
  "intra": {"latency_us": 1, "message_us": 0.5, "bandwidth_GBps": 10},
  "inter": {"latency_us": 10, "message_us": 2, "bandwidth_GBps": 1},
  "nics_per_node": 2, "reduce_GBps": 5, "cores_per_node": 4, "mailbox_us": 0.25,
  "oversubscribed": {"call_us": 3, "round_us": 0.75, "byte_ns": 0.5},
  "intra_tcp": {"latency_us": 8, "message_us": 4, "bandwidth_GBps": 2}})";

inline ClusterProfile TestProfileV2() {
  auto p = ParseProfile(kProfileV2, "test");
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : ClusterProfile{};
}

// Measurements the model itself predicts for `truth` on every valid candidate of a few collectives, shapes, sizes.
inline std::vector<Measurement> Synthetic(const ClusterProfile& truth, const std::vector<Shape>& shapes) {
  std::vector<Measurement> out;
  for (const Shape& shape : shapes) {
    for (Collective c : {Collective::kAllreduce, Collective::kAllgather, Collective::kBroadcast}) {
      for (uint64_t b = 8; b <= (uint64_t{16} << 20); b *= 8) {
        for (const Candidate& cand : RankCandidates(truth, c, shape, b)) {
          out.push_back({c, cand.config, shape, b, cand.seconds});
        }
      }
    }
  }
  return out;
}

}  // namespace hccltune::model
