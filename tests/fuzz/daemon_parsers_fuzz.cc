// Fuzz entry points of the table file, hccl-tuned's config file and its gRPC handlers (tests/fuzz/parser_fuzz.h).
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/daemon_config.h"
#include "daemon/handlers.h"
#include "daemon/live_ingest.h"
#include "db/memory_store.h"
#include "db/store_util.h"
#include "db/table_json.h"
#include "google/protobuf/stubs/logging.h"
#include "tests/fuzz/parser_fuzz.h"

namespace hccltune::fuzz {
namespace {

absl::string_view Text(const uint8_t* data, size_t size) {
  return absl::string_view(reinterpret_cast<const char*>(data), size);
}

absl::Status Broken(absl::string_view what) { return absl::InternalError(what); }

// Every table of `store` reads back with entries that validate as a write would.
absl::Status CheckStore(db::TuningStore& store) {
  auto tables = store.ListTables();
  if (!tables.ok()) return Broken(absl::StrCat("the store cannot list its tables: ", tables.status().message()));
  for (const db::TableSummary& s : *tables) {
    auto t = store.GetTable(s.topology.fingerprint, 0);
    if (!t.ok()) return Broken(absl::StrCat("a listed table does not read: ", t.status().message()));
    if (t->entries.size() > db::kMaxTableEntries) return Broken("a stored table over the entry limit");
    auto n = db::NormalizeEntries(t->entries);
    if (!n.ok()) return Broken(absl::StrCat("a stored table does not validate: ", n.status().message()));
  }
  return absl::OkStatus();
}

// Decodes a request of type Req from `bytes` and hands it to `call`; a request that does not decode is skipped.
template <typename Req, typename Call>
void Deliver(absl::string_view bytes, Call call) {
  Req req;
  if (req.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) (void)call(req);
}

void Dispatch(daemon::TunerHandlers& h, uint8_t method, absl::string_view bytes) {
  namespace v1 = ::hccltune::v1;
  switch (method % 13) {
    case 0:
      Deliver<v1::PutTableRequest>(bytes, [&](const auto& r) {
        v1::PutTableResponse o;
        return h.PutTable(r, &o);
      });
      break;
    case 1:
      Deliver<v1::GetTableRequest>(bytes, [&](const auto& r) {
        v1::GetTableResponse o;
        return h.GetTable(r, &o);
      });
      break;
    case 2:
      Deliver<v1::GetConfigRequest>(bytes, [&](const auto& r) {
        v1::GetConfigResponse o;
        return h.GetConfig(r, &o);
      });
      break;
    case 3:
      Deliver<v1::TimingBatch>(bytes, [&](const auto& r) {
        v1::ReportTimingsResponse o;
        return h.ReportBatch(r, &o);
      });
      break;
    case 4:
      Deliver<v1::DeleteTableRequest>(bytes, [&](const auto& r) {
        v1::DeleteTableResponse o;
        return h.DeleteTable(r, &o);
      });
      break;
    case 5:
      Deliver<v1::RollbackRequest>(bytes, [&](const auto& r) {
        v1::RollbackResponse o;
        return h.Rollback(r, &o);
      });
      break;
    case 6:
      Deliver<v1::PutSweepRequest>(bytes, [&](const auto& r) {
        v1::PutSweepResponse o;
        return h.PutSweep(r, &o);
      });
      break;
    case 7:
      Deliver<v1::AddSweepSamplesRequest>(bytes, [&](const auto& r) {
        v1::AddSweepSamplesResponse o;
        return h.AddSweepSamples(r, &o);
      });
      break;
    case 8:
      Deliver<v1::GetSweepSamplesRequest>(bytes, [&](const auto& r) {
        std::vector<v1::SweepSampleChunk> o;
        return h.GetSweepSamples(r, &o);
      });
      break;
    case 9:
      Deliver<v1::GetActivityRequest>(bytes, [&](const auto& r) {
        v1::GetActivityResponse o;
        return h.GetActivity(r, &o);
      });
      break;
    case 11:
      Deliver<v1::PutLinksRequest>(bytes, [&](const auto& r) {
        v1::PutLinksResponse o;
        return h.PutLinks(r, &o);
      });
      break;
    case 12:
      Deliver<v1::GetLinksRequest>(bytes, [&](const auto& r) {
        v1::LinksRecord o;
        return h.GetLinks(r, &o);
      });
      break;
    default: Deliver<v1::WatchTableRequest>(bytes, [&](const auto& r) { return h.CheckWatch(r); }); break;
  }
}

}  // namespace

absl::Status FuzzTableFile(const uint8_t* data, size_t size) {
  db::InMemoryTuningStore store;
  auto changed = db::ImportIntoStore(store, Text(data, size));
  if (!changed.ok()) {
    if (changed.status().message().empty()) return Broken("an import refused without a reason");
    auto listed = store.ListTables();
    if (listed.ok() && !listed->empty()) return Broken("a refused file stored tables");
    return absl::OkStatus();
  }
  if (absl::Status s = CheckStore(store); !s.ok()) return s;
  auto exported = db::ExportStore(store);
  if (!exported.ok()) return Broken(absl::StrCat("an imported store does not export: ", exported.status().message()));
  db::InMemoryTuningStore again;
  if (auto r = db::ImportIntoStore(again, *exported); !r.ok()) {
    return Broken(absl::StrCat("an export does not import: ", r.status().message()));
  }
  auto twice = db::ExportStore(again);
  if (!twice.ok() || *twice != *exported) return Broken("export -> import -> export changed the file");
  return absl::OkStatus();
}

absl::Status FuzzDaemonConfig(const uint8_t* data, size_t size) {
  daemon::DaemonConfig c;
  absl::Status s = daemon::ApplyConfigText(Text(data, size), "fuzz.conf", &c);
  if (!s.ok() && !absl::StartsWith(s.message(), "fuzz.conf")) {
    return Broken(absl::StrCat("a config error that does not name the file: ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status FuzzHandlers(const uint8_t* data, size_t size) {
  // Decoding random bytes makes protobuf log every invalid UTF-8 string; a refused decode is expected here.
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  db::InMemoryTuningStore store;
  daemon::LiveIngest ingest(&store, daemon::IngestOptions{4096, 1024, 1});
  daemon::TunerHandlers handlers(&store, &ingest, daemon::HandlerLimits{256, 256});
  size_t pos = 0;
  for (int i = 0; i < 8 && size - pos >= 3; ++i) {
    const uint8_t method = data[pos];
    const size_t len = std::min<size_t>(size - pos - 3, size_t{data[pos + 1]} | size_t{data[pos + 2]} << 8);
    Dispatch(handlers, method, Text(data + pos + 3, len));
    pos += 3 + len;
    if (absl::Status s = CheckStore(store); !s.ok()) return s;
  }
  ingest.Stop();
  return CheckStore(store);
}

}  // namespace hccltune::fuzz
