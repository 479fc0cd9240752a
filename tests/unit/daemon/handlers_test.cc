// TunerHandlers without a socket: request validation and status codes, caching, live ingest bounds.
#include "daemon/handlers.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "db/memory_store.h"
#include "rpc/proto_convert.h"
#include "runtime/common/configuration.h"
#include "runtime/common/fingerprint.h"
#include "tests/unit/db/test_util.h"

namespace hccltune::daemon {
namespace {

using db::testing::MakeEntry;
using db::testing::MakeTopology;

class HandlersTest : public ::testing::Test {
 protected:
  HandlersTest() : ingest_(&store_, IngestOptions{1000, 500, 10}), h_(&store_, &ingest_, HandlerLimits{2000, 100}) {}

  v1::PutTableRequest PutRequest(const db::Topology& topo, std::vector<db::TunedEntry> entries) {
    v1::PutTableRequest req;
    req.mutable_topology()->set_fingerprint(topo.fingerprint);
    req.mutable_topology()->set_json(topo.json);
    for (const auto& e : entries) rpc::EntryToProto(e, req.add_entries());
    return req;
  }
  int64_t Put(const db::Topology& topo, std::vector<db::TunedEntry> entries) {
    v1::PutTableResponse resp;
    EXPECT_TRUE(h_.PutTable(PutRequest(topo, entries), &resp).ok());
    return resp.version();
  }

  db::InMemoryTuningStore store_;
  LiveIngest ingest_;
  TunerHandlers h_;
  db::Topology topo_ = MakeTopology(2);
};

// Strings and counts in requests are bounded before anything is parsed, cached or stored.
TEST_F(HandlersTest, OversizedRequestFieldsAreRefusedNamingTheLimit) {
  auto entry = MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "ring");
  entry.sweep_id = std::string(db::kMaxTextBytes + 1, 's');
  v1::PutTableResponse put;
  absl::Status s = h_.PutTable(PutRequest(topo_, {entry}), &put);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "entry sweep_id of 4097 bytes is over the limit of 4096 bytes")) << s;
  entry = MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "ring");
  entry.configuration = "ring(chunk=1M" + std::string(5000, ' ') + ")";
  s = h_.PutTable(PutRequest(topo_, {entry}), &put);
  EXPECT_TRUE(absl::StrContains(s.message(), "winner of 5014 bytes is over the limit of 4096 bytes")) << s;
  db::Topology big = topo_;
  big.json = std::string(db::kMaxTopologyJsonBytes + 1, ' ');
  s = h_.PutTable(PutRequest(big, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "ring")}), &put);
  EXPECT_TRUE(absl::StrContains(s.message(), "topology JSON of 65537 bytes is over the limit of 65536 bytes")) << s;
  EXPECT_TRUE(absl::IsNotFound(store_.GetTable(topo_.fingerprint, 0).status())) << "a refused table was stored";

  Put(topo_, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "ring")});
  v1::TimingBatch batch;
  batch.mutable_topology()->set_fingerprint(topo_.fingerprint);
  batch.set_client_id(std::string(300, 'c'));
  auto* sample = batch.add_samples();
  sample->set_collective("allreduce");
  sample->set_dtype("fp32");
  sample->set_world_size(8);
  sample->set_bytes(1024);
  sample->set_configuration("ring");
  sample->set_duration_us(10);
  v1::ReportTimingsResponse resp;
  s = h_.ReportBatch(batch, &resp);
  EXPECT_TRUE(absl::StrContains(s.message(), "client_id of 300 bytes is over the limit of 256 bytes")) << s;
  batch.set_client_id("c");
  sample->set_configuration(std::string(5000, 'r'));
  s = h_.ReportBatch(batch, &resp);
  EXPECT_TRUE(absl::StrContains(s.message(), "samples[0]: configuration of 5000 bytes is over the limit of 4096 bytes"))
      << s;
  EXPECT_EQ(resp.accepted(), 0u);
}

TEST_F(HandlersTest, GetTableServesAndHonoursIfNewerThan) {
  Put(topo_, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "ring"),
              MakeEntry(Collective::kAllreduce, 4, 0, kUnbounded, "one_shot")});
  v1::GetTableRequest req;
  req.mutable_topology()->set_fingerprint(topo_.fingerprint);
  v1::GetTableResponse resp;
  ASSERT_TRUE(h_.GetTable(req, &resp).ok());
  EXPECT_FALSE(resp.unchanged());
  EXPECT_EQ(resp.table().version(), 1);
  EXPECT_EQ(resp.table().entries_size(), 2);
  EXPECT_EQ(resp.table().topology().json(), topo_.json);
  EXPECT_EQ(resp.table().content_hash().size(), 64u);

  req.set_world_size(4);
  v1::GetTableResponse only4;
  ASSERT_TRUE(h_.GetTable(req, &only4).ok());
  EXPECT_EQ(only4.table().entries_size(), 1);
  EXPECT_NE(only4.table().content_hash(), resp.table().content_hash());

  req.set_world_size(0);
  req.set_if_newer_than(1);
  v1::GetTableResponse same;
  ASSERT_TRUE(h_.GetTable(req, &same).ok());
  EXPECT_TRUE(same.unchanged());
  EXPECT_FALSE(same.has_table());

  Put(topo_, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "halving_doubling")});
  v1::GetTableResponse newer;
  ASSERT_TRUE(h_.GetTable(req, &newer).ok());  // the cache was invalidated
  EXPECT_FALSE(newer.unchanged());
  EXPECT_EQ(newer.table().version(), 2);
  EXPECT_EQ(newer.table().entries_size(), 1);

  req.set_if_newer_than(0);
  req.set_version(1);  // pinned
  v1::GetTableResponse pinned;
  ASSERT_TRUE(h_.GetTable(req, &pinned).ok());
  EXPECT_EQ(pinned.table().version(), 1);
}

TEST_F(HandlersTest, LinksAreStoredAndServedPerTopology) {
  v1::GetLinksRequest get;
  get.set_fingerprint(topo_.fingerprint);
  v1::LinksRecord got;
  absl::Status s = h_.GetLinks(get, &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find(topo_.fingerprint), std::string::npos) << s;

  v1::PutLinksRequest put;
  put.mutable_links()->set_fingerprint(topo_.fingerprint);
  put.mutable_links()->set_links_json(R"({"ranks":2,"links":[{"src":0,"dst":1}]})");
  put.mutable_links()->set_measured_unix_ms(42);
  put.mutable_links()->set_stored_unix_ms(7);  // the daemon's own clock decides
  v1::PutLinksResponse pr;
  ASSERT_TRUE(h_.PutLinks(put, &pr).ok());
  ASSERT_TRUE(h_.GetLinks(get, &got).ok());
  EXPECT_EQ(got.fingerprint(), topo_.fingerprint);
  EXPECT_EQ(got.links_json(), put.links().links_json());
  EXPECT_EQ(got.measured_unix_ms(), 42);
  EXPECT_GT(got.stored_unix_ms(), 7);

  // Bad requests are refused naming the RPC and the field; nothing stored changes.
  v1::PutLinksRequest bad = put;
  bad.mutable_links()->set_links_json("[1,2]");
  s = h_.PutLinks(bad, &pr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("PutLinks: link table: not a JSON object"), std::string::npos) << s;
  bad = put;
  bad.mutable_links()->set_fingerprint("nothex");
  EXPECT_EQ(h_.PutLinks(bad, &pr).code(), absl::StatusCode::kInvalidArgument);
  get.set_fingerprint("");
  s = h_.GetLinks(get, &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("GetLinks"), std::string::npos) << s;
  get.set_fingerprint(topo_.fingerprint);
  ASSERT_TRUE(h_.GetLinks(get, &got).ok());
  EXPECT_EQ(got.links_json(), put.links().links_json());
}

// A cost model of the profile JSON `json` stored for the class of `topo` through the RPC.
int64_t StoreModel(TunerHandlers& h, const db::Topology& topo, const std::string& json) {
  v1::PutModelRequest req;
  req.mutable_model()->set_topology_class(topo.topology_class);
  req.mutable_model()->set_profile_json(json);
  req.mutable_model()->set_source("test");
  req.mutable_model()->set_fitted_unix_ms(1000);
  v1::PutModelResponse resp;
  EXPECT_TRUE(h.PutModel(req, &resp).ok());
  return resp.version();
}

v1::GetTableRequest TableRequest(const db::Topology& topo) {
  v1::GetTableRequest req;
  req.mutable_topology()->set_fingerprint(topo.fingerprint);
  req.mutable_topology()->set_json(topo.json);
  return req;
}

constexpr char kNodeOnlyProfile[] =
    R"({"name":"here","intra":{"latency_us":1,"message_us":0.2,"bandwidth_GBps":5},"reduce_GBps":5})";
constexpr char kClusterProfile[] = R"({"name":"net","intra":{"latency_us":1,"message_us":0.2,"bandwidth_GBps":5},)"
                                   R"("inter":{"latency_us":20,"message_us":2,"bandwidth_GBps":1},"reduce_GBps":5})";

// A topology nobody measured gets the table its class's model predicts; every entry says so, holds no
// measurement, and covers every collective and dtype without gaps. A measured table is never replaced.
TEST_F(HandlersTest, AnUnmeasuredTopologyGetsItsClassModelsPrediction) {
  const db::Topology three = MakeTopology(1, 3);
  v1::GetTableResponse resp;
  EXPECT_EQ(h_.GetTable(TableRequest(three), &resp).code(), absl::StatusCode::kNotFound);  // no model yet
  const db::Topology two = MakeTopology(1, 2);
  ASSERT_EQ(two.topology_class, three.topology_class);
  Put(two, {MakeEntry(Collective::kAllreduce, 2, 0, kUnbounded, "ring")});
  ASSERT_EQ(StoreModel(h_, three, kNodeOnlyProfile), 1);
  ASSERT_EQ(StoreModel(h_, three, kNodeOnlyProfile), 2);

  absl::Status s = h_.GetTable(TableRequest(three), &resp);
  ASSERT_TRUE(s.ok()) << s;
  const v1::Table& t = resp.table();
  EXPECT_EQ(t.version(), 1);
  std::map<std::pair<std::string, std::string>, uint64_t> covered_to;  // (collective, dtype) -> end of coverage
  for (const v1::TableEntry& e : t.entries()) {
    EXPECT_EQ(e.model_version(), 2);
    EXPECT_EQ(e.samples(), 0u);
    EXPECT_EQ(e.rank_time_us(), 0);
    EXPECT_GT(e.time_us(), 0);
    EXPECT_EQ(e.key().world_size(), 3);
    EXPECT_TRUE(Configuration::Parse(e.configuration()).ok()) << e.configuration();
    EXPECT_GE(e.margin(), 0) << e.configuration();  // as a sweep's: never negative, also where the default was kept
    uint64_t& end = covered_to[{e.key().collective(), e.key().dtype()}];
    EXPECT_EQ(e.key().min_bytes(), end) << e.key().collective();  // no gap, no overlap
    end = e.key().max_bytes() == 0 ? kUnbounded : e.key().max_bytes();
  }
  EXPECT_EQ(covered_to.size(), static_cast<size_t>((kNumCollectives - 1) * kNumDataTypes));  // all but sendrecv
  for (const auto& [key, end] : covered_to) EXPECT_EQ(end, kUnbounded) << key.first;

  // The measured table of the class's other topology stays as it was.
  ASSERT_TRUE(h_.GetTable(TableRequest(two), &resp).ok());
  ASSERT_EQ(resp.table().entries_size(), 1);
  EXPECT_EQ(resp.table().entries(0).model_version(), 0);
}

// No prediction across nodes from a model that never measured a network, nor for uneven nodes; a model stored
// later is used for a topology refused before.
TEST_F(HandlersTest, NothingIsPredictedWhatTheModelNeverMeasured) {
  const db::Topology cluster = MakeTopology(2, 2);
  ASSERT_EQ(StoreModel(h_, cluster, kNodeOnlyProfile), 1);
  v1::GetTableResponse resp;
  EXPECT_EQ(h_.GetTable(TableRequest(cluster), &resp).code(), absl::StatusCode::kNotFound);
  ASSERT_EQ(StoreModel(h_, cluster, kClusterProfile), 2);
  absl::Status s = h_.GetTable(TableRequest(cluster), &resp);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_GT(resp.table().entries_size(), 0);
  EXPECT_EQ(resp.table().entries(0).model_version(), 2);

  db::Topology uneven = MakeTopology(2, 2);
  uneven.json = absl::StrReplaceAll(uneven.json, {{"[2,2]", "[1,2]"}});
  uneven.fingerprint = Sha256Hex(uneven.json).substr(0, 16);
  EXPECT_EQ(h_.GetTable(TableRequest(uneven), &resp).code(), absl::StatusCode::kNotFound);
}

TEST_F(HandlersTest, BadInputGetsProperCodes) {
  Put(topo_, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "ring")});
  v1::GetTableRequest gt;
  gt.mutable_topology()->set_fingerprint("nothex");
  v1::GetTableResponse gtr;
  EXPECT_EQ(h_.GetTable(gt, &gtr).code(), absl::StatusCode::kInvalidArgument);
  gt.mutable_topology()->set_fingerprint(MakeTopology(9).fingerprint);
  EXPECT_EQ(h_.GetTable(gt, &gtr).code(), absl::StatusCode::kNotFound);
  gt.mutable_topology()->set_fingerprint(topo_.fingerprint);
  gt.set_world_size(-3);
  EXPECT_EQ(h_.GetTable(gt, &gtr).code(), absl::StatusCode::kInvalidArgument);
  gt.set_world_size(0);
  gt.set_version(77);
  EXPECT_EQ(h_.GetTable(gt, &gtr).code(), absl::StatusCode::kNotFound);

  v1::GetConfigRequest gc;
  gc.mutable_topology()->set_fingerprint(topo_.fingerprint);
  gc.set_collective("allreduce");
  gc.set_dtype("fp32");
  gc.set_world_size(8);
  gc.set_bytes(1024);
  v1::GetConfigResponse gcr;
  ASSERT_TRUE(h_.GetConfig(gc, &gcr).ok());
  EXPECT_TRUE(gcr.found());
  EXPECT_EQ(gcr.table_version(), 1);
  gc.set_collective("allreduse");
  EXPECT_EQ(h_.GetConfig(gc, &gcr).code(), absl::StatusCode::kInvalidArgument);
  gc.set_collective("allreduce");
  gc.set_dtype("fp128");
  EXPECT_EQ(h_.GetConfig(gc, &gcr).code(), absl::StatusCode::kInvalidArgument);
  gc.set_dtype("fp32");
  gc.set_bytes(uint64_t(1) << 62);
  EXPECT_EQ(h_.GetConfig(gc, &gcr).code(), absl::StatusCode::kInvalidArgument);
  gc.set_bytes(10);
  gc.set_world_size(0);
  EXPECT_EQ(h_.GetConfig(gc, &gcr).code(), absl::StatusCode::kInvalidArgument);
  gc.set_world_size(3);
  v1::GetConfigResponse none;
  ASSERT_TRUE(h_.GetConfig(gc, &none).ok());
  EXPECT_FALSE(none.found());

  v1::PutTableResponse pr;
  auto bad_put = PutRequest(topo_, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "ring")});
  bad_put.mutable_entries(0)->mutable_key()->set_collective("warp");
  EXPECT_EQ(h_.PutTable(bad_put, &pr).code(), absl::StatusCode::kInvalidArgument);
  std::vector<db::TunedEntry> many;
  for (int i = 0; i < 101; ++i) many.push_back(MakeEntry(Collective::kAllreduce, 8, i, i + 1, "ring"));
  EXPECT_EQ(h_.PutTable(PutRequest(topo_, many), &pr).code(), absl::StatusCode::kInvalidArgument);  // > limit

  v1::RollbackRequest rb;
  rb.mutable_topology()->set_fingerprint(topo_.fingerprint);
  v1::RollbackResponse rbr;
  EXPECT_EQ(h_.Rollback(rb, &rbr).code(), absl::StatusCode::kFailedPrecondition);
  rb.set_to_version(-1);
  EXPECT_EQ(h_.Rollback(rb, &rbr).code(), absl::StatusCode::kInvalidArgument);

  v1::DeleteTableRequest del;
  del.mutable_topology()->set_fingerprint(MakeTopology(9).fingerprint);
  v1::DeleteTableResponse delr;
  EXPECT_EQ(h_.DeleteTable(del, &delr).code(), absl::StatusCode::kNotFound);
}

TEST_F(HandlersTest, PutTableCompareAndSwapOverTheRpc) {
  // expected_version reaches the store: a put against a version that is no longer the latest writes nothing.
  v1::PutTableRequest first = PutRequest(topo_, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "ring")});
  first.set_expected_version(-1);  // no table yet
  v1::PutTableResponse r;
  ASSERT_TRUE(h_.PutTable(first, &r).ok());
  EXPECT_EQ(r.version(), 1);
  v1::PutTableRequest stale = PutRequest(topo_, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "bruck")});
  stale.set_expected_version(-1);  // but version 1 exists now
  EXPECT_EQ(h_.PutTable(stale, &r).code(), absl::StatusCode::kAborted);
  stale.set_expected_version(1);
  ASSERT_TRUE(h_.PutTable(stale, &r).ok());
  EXPECT_EQ(r.version(), 2);
  stale.set_expected_version(1);  // 2 is the latest now
  EXPECT_EQ(h_.PutTable(stale, &r).code(), absl::StatusCode::kAborted);
  auto t = store_.GetTable(topo_.fingerprint, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->version, 2);
  stale.set_expected_version(-2);
  EXPECT_EQ(h_.PutTable(stale, &r).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(HandlersTest, PutReportsChangeAndRollbackMakesANewVersion) {
  v1::PutTableResponse r1, r2, r3;
  ASSERT_TRUE(h_.PutTable(PutRequest(topo_, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "ring")}), &r1).ok());
  EXPECT_TRUE(r1.changed());
  ASSERT_TRUE(h_.PutTable(PutRequest(topo_, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "ring")}), &r2).ok());
  EXPECT_FALSE(r2.changed());
  EXPECT_EQ(r2.version(), 1);
  ASSERT_TRUE(h_.PutTable(PutRequest(topo_, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "bruck")}), &r3).ok());
  v1::RollbackRequest rb;
  rb.mutable_topology()->set_fingerprint(topo_.fingerprint);
  v1::RollbackResponse rbr;
  ASSERT_TRUE(h_.Rollback(rb, &rbr).ok());
  EXPECT_EQ(rbr.new_version(), 3);
  v1::GetConfigRequest gc;
  gc.mutable_topology()->set_fingerprint(topo_.fingerprint);
  gc.set_collective("allreduce");
  gc.set_dtype("float32");
  gc.set_world_size(8);
  v1::GetConfigResponse gcr;
  ASSERT_TRUE(h_.GetConfig(gc, &gcr).ok());
  EXPECT_EQ(gcr.table_version(), 3);
  EXPECT_EQ(gcr.entry().configuration().rfind("ring(", 0), 0u) << gcr.entry().configuration();
  v1::ListTablesResponse lt;
  ASSERT_TRUE(h_.ListTables(v1::ListTablesRequest(), &lt).ok());
  ASSERT_EQ(lt.tables_size(), 1);
  EXPECT_EQ(lt.tables(0).versions_size(), 3);
}

v1::TimingBatch Batch(const db::Topology& topo, int n, const std::string& coll = "allreduce") {
  v1::TimingBatch b;
  b.mutable_topology()->set_fingerprint(topo.fingerprint);
  for (int i = 0; i < n; ++i) {
    auto* s = b.add_samples();
    s->set_collective(coll);
    s->set_dtype("fp32");
    s->set_world_size(8);
    s->set_bytes(4096);
    s->set_configuration("ring");
    s->set_duration_us(10 + i % 5);
  }
  return b;
}

TEST_F(HandlersTest, ReportTimingsPersistsAndBoundsTheQueue) {
  v1::ReportTimingsResponse resp;
  ASSERT_TRUE(h_.ReportBatch(Batch(topo_, 300), &resp).ok());
  EXPECT_EQ(resp.accepted(), 300u);
  // Flood: the queue holds 1000 samples; whatever does not fit is dropped and counted.
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(h_.ReportBatch(Batch(topo_, 1500), &resp).ok());
  EXPECT_GT(resp.dropped(), 0u);
  EXPECT_EQ(resp.accepted() + resp.dropped(), 300u + 20 * 1500);
  ingest_.Stop();
  EXPECT_EQ(ingest_.persisted(), resp.accepted());
  auto stats = store_.GetLiveStats(topo_.fingerprint);
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->size(), 1u);
  EXPECT_EQ((*stats)[0].count, resp.accepted());
  EXPECT_EQ((*stats)[0].configuration, Configuration::Parse("ring")->ToString());  // canonicalized
  v1::StatusResponse st;
  ASSERT_TRUE(h_.Status(v1::StatusRequest(), &st).ok());
  EXPECT_EQ(st.samples_dropped(), resp.dropped());
  EXPECT_EQ(st.live_samples(), resp.accepted());
}

TEST_F(HandlersTest, ReportTimingsRefusesBadSamples) {
  v1::ReportTimingsResponse resp;
  EXPECT_EQ(h_.ReportBatch(Batch(topo_, 3, "allreduse"), &resp).code(), absl::StatusCode::kInvalidArgument);
  auto neg = Batch(topo_, 1);
  neg.mutable_samples(0)->set_duration_us(-5);
  EXPECT_EQ(h_.ReportBatch(neg, &resp).code(), absl::StatusCode::kInvalidArgument);
  // A zero or non-finite duration is no measurement: refused naming the sample and the value.
  for (double bad : {0.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    auto zero = Batch(topo_, 2);
    zero.mutable_samples(1)->set_duration_us(bad);
    absl::Status s = h_.ReportBatch(zero, &resp);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(s.message(), "samples[1]")) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("duration_us ", bad))) << s;
  }
  auto cfg = Batch(topo_, 1);
  cfg.mutable_samples(0)->set_configuration("ring(chnk=1M)");
  EXPECT_EQ(h_.ReportBatch(cfg, &resp).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(h_.ReportBatch(Batch(topo_, 2001), &resp).code(), absl::StatusCode::kInvalidArgument);  // > cap
  EXPECT_EQ(resp.accepted(), 0u);
}

TEST_F(HandlersTest, WaitForTableWakesOnANewVersionAndOnShutdown) {
  v1::WatchTableRequest req;
  req.mutable_topology()->set_fingerprint(topo_.fingerprint);
  ASSERT_TRUE(h_.CheckWatch(req).ok());
  v1::Table t;
  EXPECT_FALSE(h_.WaitForTable(req, 0, absl::Milliseconds(20), &t));  // no table yet
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    Put(topo_, {MakeEntry(Collective::kAllreduce, 8, 0, kUnbounded, "ring")});
  });
  EXPECT_TRUE(h_.WaitForTable(req, 0, absl::Seconds(10), &t));
  writer.join();
  EXPECT_EQ(t.version(), 1);
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    h_.Shutdown();
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(h_.WaitForTable(req, 1, absl::Seconds(10), &t));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  stopper.join();
  EXPECT_EQ(h_.CheckWatch(req).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace hccltune::daemon
