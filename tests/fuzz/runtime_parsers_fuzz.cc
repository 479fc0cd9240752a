// Fuzz entry points of the runtime's parsers (tests/fuzz/parser_fuzz.h): store protocol, wire, rank table.
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/bootstrap/rank_table.h"
#include "runtime/bootstrap/store_protocol.h"
#include "runtime/transport/stream_endpoint.h"
#include "runtime/transport/tcp/tcp_transport.h"
#include "tests/fuzz/parser_fuzz.h"
#include "tests/fuzz/scripted_pair.h"

namespace hccltune::fuzz {
namespace {

absl::string_view Text(const uint8_t* data, size_t size) {
  return absl::string_view(reinterpret_cast<const char*>(data), size);
}

absl::Status Broken(absl::string_view what) { return absl::InternalError(what); }

}  // namespace

absl::Status FuzzStoreProtocol(const uint8_t* data, size_t size) {
  store_protocol::StoreLimits limits;
  limits.max_keys = 8;
  limits.max_stored_bytes = 512;
  store_protocol::StoreData store(limits);
  absl::string_view in = Text(data, size);
  while (!in.empty()) {
    store_protocol::Request req;
    auto used = store_protocol::ParseStoreRequest(in, &req);
    if (!used.ok()) {
      if (!absl::StartsWith(used.status().message(), "tcp store: ")) return Broken(used.status().message());
      return absl::OkStatus();  // the server answers the error and closes
    }
    if (*used == 0) return absl::OkStatus();  // incomplete: the server waits for more
    if (*used > in.size()) return Broken("a request took more bytes than there were");
    in.remove_prefix(*used);
    std::string reply;
    store.Apply(req, &reply);
    const uint8_t status = reply.empty() ? 0xff : static_cast<uint8_t>(reply[0]);
    if (status > 1 && status != store_protocol::kReplyError) return Broken("a reply without a valid status byte");
    if (store.keys() > limits.max_keys || store.stored_bytes() > limits.max_stored_bytes) {
      return Broken(absl::StrCat("the store holds ", store.keys(), " keys and ", store.stored_bytes(),
                                 " bytes, over its limits"));
    }
  }
  return absl::OkStatus();
}

absl::Status FuzzWire(const uint8_t* data, size_t size) {
  if (size < 2) return absl::OkStatus();
  const uint8_t mode = data[0];
  if (mode % 4 == 0) {
    auto hello = ParseTcpHelloHead(Text(data + 1, std::min<size_t>(size - 1, kTcpHelloHeadBytes)), 42, 1, 4);
    if (hello.ok() && (hello->rank < 0 || hello->rank >= 4 || hello->rank == 1 || hello->lane < 0 ||
                       hello->key_bytes > kMaxTcpHelloKeyBytes)) {
      return Broken("a hello out of bounds was accepted");
    }
    if (!hello.ok() && hello.status().message().empty()) return Broken("a hello refused without a reason");
    return absl::OkStatus();
  }
  // A receive of a size the input picks, at operation 5 of a 16-element fp32 allreduce, from rank 1.
  const size_t bytes = size_t{data[1]} * 4;
  const size_t chunk = mode % 4 == 1 ? SIZE_MAX : size_t{mode} / 4 + 1;
  ScriptedPair link(std::string(Text(data + 2, size - 2)), chunk);
  StreamEndpoint ep(0, {nullptr, &link}, nullptr, absl::Seconds(5));
  CallDescriptor call;
  call.sequence = 5;
  call.collective = Collective::kAllreduce;
  call.dtype = DataType::kFloat32;
  call.count = bytes / 4;
  ep.SetCall(call);
  std::vector<uint8_t> buf(bytes);
  absl::Status s = ep.Wait(ep.Irecv(1, buf.data(), buf.size()));
  if (!s.ok() && !absl::StrContains(s.message(), "rank 1") && !absl::StrContains(s.message(), "scripted link lost")) {
    return Broken(absl::StrCat("a receive failed without naming the peer: ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status FuzzRankTable(const uint8_t* data, size_t size) {
  auto t = ParseRankTable(Text(data, size), "fuzz.json");
  if (!t.ok()) {
    if (!absl::StartsWith(t.status().message(), "rank table fuzz.json: ")) return Broken(t.status().message());
    return absl::OkStatus();
  }
  if (t->ranks.empty() || t->ranks.size() > kMaxRankTableRanks) return Broken("a table of no or too many ranks");
  for (size_t r = 0; r < t->ranks.size(); ++r) {
    const RankTableEntry& e = t->ranks[r];
    if (e.rank_id != static_cast<int>(r)) return Broken("ranks are not dense");
    if (e.local_rank < 0 || e.local_rank >= e.local_size) return Broken("a local rank outside its server");
    if (e.device_id < 0 || e.device_id > kMaxDeviceId) return Broken("a device id out of range");
  }
  return absl::OkStatus();
}

}  // namespace hccltune::fuzz
