// hccl-tuned-bench: measures the daemon from a separate client process over its socket (docs/PERFORMANCE.md).
//   1. GetTable latency with a table of --entries entries (p50/p99/max over --gets sequential calls).
//   2. ReportTimings throughput: batches of --batch samples streamed for --seconds, then the time until the daemon
//      has persisted all of them into live statistics (Status.live_samples) -> persisted samples/s.
// Prints one line per figure; with --check, exits 1 when GetTable p99 > 1 ms or persisted < 50,000 samples/s.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "db/store_util.h"
#include "hccltune/version.h"
#include "rpc/channel.h"
#include "rpc/proto_convert.h"
#include "rpc/remote_store.h"
#include "runtime/common/fingerprint.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = hccltune::v1;

double Us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

int Fail(const std::string& what, const grpc::Status& s) {
  std::fprintf(stderr, "hccl-tuned-bench: %s: %s\n", what.c_str(), s.error_message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hccl-tuned-bench — GetTable latency and ReportTimings throughput of a running hccl-tuned"};
  app.set_version_flag("--version", std::string("hccl-tuned-bench ") + HCCL_TUNE_VERSION);
  std::string target;
  int entries = 1000, gets = 2000, batch = 1000;
  double seconds = 3;
  bool check = false;
  app.add_option("--daemon", target, "gRPC target, e.g. unix:/run/hccl-tune/tuned.sock")->required();
  app.add_option("--entries", entries, "Entries in the benchmark table");
  app.add_option("--gets", gets, "GetTable calls measured");
  app.add_option("--batch", batch, "Samples per TimingBatch");
  app.add_option("--seconds", seconds, "How long to stream timings");
  app.add_flag("--check", check, "Exit 1 when a target (p99 <= 1 ms, >= 50,000 samples/s) is missed");
  CLI11_PARSE(app, argc, argv);

  auto channel = hccltune::rpc::MakeChannel(target);
  auto stub = v1::Tuner::NewStub(channel);

  // A topology of its own (one node of a rank count taken from the clock), so repeated runs do not collide.
  hccltune::TopologyDescription topology;
  topology.ranks_per_node = {1 + static_cast<int>(Clock::now().time_since_epoch().count() % (1 << 20))};
  topology.release = "0.0";
  const hccltune::TopologyKeys keys = hccltune::KeysOf(topology);
  const std::string& json = keys.json;
  const std::string& fp = keys.fingerprint;
  v1::PutTableRequest put;
  put.mutable_topology()->set_fingerprint(fp);
  put.mutable_topology()->set_json(json);
  for (int i = 0; i < entries; ++i) {
    hccltune::db::TunedEntry e;
    e.key = hccltune::db::EntryKey{hccltune::Collective::kAllreduce, hccltune::DataType::kFloat32, 8,
                                   hccltune::ByteRange{uint64_t(i) * 4096, uint64_t(i + 1) * 4096}};
    e.configuration = i % 2 ? "ring(chunk=1M,channels=2,link=shm)" : "halving_doubling";
    e.runner_up = "one_shot";
    e.time_us = 10 + i;
    e.busbw_gbps = 3.5;
    e.samples = 50;
    e.sweep_id = "bench";
    e.library_version = "0.1";
    e.measured_unix_ms = 1700000000000;
    hccltune::rpc::EntryToProto(e, put.add_entries());
  }
  {
    grpc::ClientContext ctx;
    v1::PutTableResponse resp;
    if (auto s = stub->PutTable(&ctx, put, &resp); !s.ok()) return Fail("PutTable", s);
  }

  v1::GetTableRequest get;
  get.mutable_topology()->set_fingerprint(fp);
  std::vector<double> lat;
  for (int i = 0; i < gets + 100; ++i) {
    grpc::ClientContext ctx;
    google::protobuf::Arena arena;  // what a table client does: one arena per reply, no per-string malloc
    auto* resp = google::protobuf::Arena::CreateMessage<v1::GetTableResponse>(&arena);
    auto t0 = Clock::now();
    auto s = stub->GetTable(&ctx, get, resp);
    auto t1 = Clock::now();
    if (!s.ok()) return Fail("GetTable", s);
    if (resp->table().entries_size() != entries) {
      std::fprintf(stderr, "GetTable returned %d entries\n", resp->table().entries_size());
      return 1;
    }
    if (i >= 100) lat.push_back(Us(t1 - t0));
  }
  std::sort(lat.begin(), lat.end());
  auto pct = [&](double q) { return lat[std::min(lat.size() - 1, static_cast<size_t>(q * lat.size()))]; };
  const double p99 = pct(0.99);
  std::printf("GetTable entries=%d calls=%d p50_us=%.1f p99_us=%.1f max_us=%.1f\n", entries, gets, pct(0.5), p99,
              lat.back());

  auto status = [&]() -> v1::StatusResponse {
    grpc::ClientContext ctx;
    v1::StatusResponse resp;
    stub->Status(&ctx, v1::StatusRequest(), &resp);
    return resp;
  };
  const uint64_t base = status().live_samples();
  const char* configs[] = {"ring", "one_shot", "halving_doubling", "ring(chunk=1M)"};
  v1::TimingBatch tb;
  tb.mutable_topology()->set_fingerprint(fp);
  tb.set_client_id("bench");
  for (int i = 0; i < batch; ++i) {
    v1::TimingSample* s = tb.add_samples();
    s->set_collective("allreduce");
    s->set_dtype("fp32");
    s->set_world_size(8);
    s->set_bytes(uint64_t(1024) << (i % 16));
    s->set_configuration(configs[i % 4]);
    s->set_duration_us(5.0 + (i % 97));
    s->set_rank(i % 8);
  }
  grpc::ClientContext ctx;
  v1::ReportTimingsResponse rresp;
  const auto start = Clock::now();
  auto writer = stub->ReportTimings(&ctx, &rresp);
  uint64_t sent = 0;
  while (Us(Clock::now() - start) < seconds * 1e6) {
    if (!writer->Write(tb)) break;
    sent += static_cast<uint64_t>(batch);
  }
  writer->WritesDone();
  if (auto s = writer->Finish(); !s.ok()) return Fail("ReportTimings", s);
  const auto sent_done = Clock::now();
  uint64_t persisted = 0;
  while (Us(Clock::now() - sent_done) < 60e6) {
    persisted = status().live_samples() - base;
    if (persisted >= rresp.accepted()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const double elapsed_s = Us(Clock::now() - start) / 1e6;
  const double rate = static_cast<double>(persisted) / elapsed_s;
  std::printf(
      "ReportTimings batch=%d sent=%llu accepted=%llu dropped=%llu persisted=%llu seconds=%.2f "
      "persisted_per_s=%.0f\n",
      batch, static_cast<unsigned long long>(sent), static_cast<unsigned long long>(rresp.accepted()),
      static_cast<unsigned long long>(rresp.dropped()), static_cast<unsigned long long>(persisted), elapsed_s, rate);
  {
    grpc::ClientContext dctx;
    v1::DeleteTableRequest del;
    del.mutable_topology()->set_fingerprint(fp);
    v1::DeleteTableResponse dresp;
    stub->DeleteTable(&dctx, del, &dresp);
  }
  if (check && (p99 > 1000 || rate < 50000)) {
    std::fprintf(stderr, "hccl-tuned-bench: target missed (p99 %.1f us, %.0f samples/s)\n", p99, rate);
    return 1;
  }
  return 0;
}
