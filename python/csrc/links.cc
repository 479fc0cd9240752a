#include "python/csrc/links.h"

#include <c10/util/Exception.h>

#include "links/link_inspector.h"
#include "runtime/common/config.h"
#include "runtime/tuning_client/stored_links.h"

namespace hccltune::torch_backend {

std::string MeasureLinksJson(ProcessGroupHcclTune& pg, uint64_t bytes, int iters) {
  auto env = Environment::Load();
  TORCH_CHECK(env.ok(), "hccltune link inspector: ", std::string(env.status().message()));
  LinkInspectorOptions opt;
  opt.bytes = bytes;
  opt.iters = iters;
  auto li = LinkInspector::Measure(pg.communicator(), *env, opt);
  TORCH_CHECK(li.ok(), "hccltune: ", std::string(li.status().message()));
  return li->ToJson().dump();
}

std::string StoredLinksJson(ProcessGroupHcclTune& pg) {
  auto env = Environment::Load();
  TORCH_CHECK(env.ok(), "hccltune link inspector: ", std::string(env.status().message()));
  const Communicator& comm = pg.communicator();
  auto reply = FetchStoredLinks(*env, comm.fingerprint());
  TORCH_CHECK(reply.ok(), "hccltune link inspector: ", std::string(reply.status().message()));
  nlohmann::json j = nlohmann::json::parse(reply->links_json, nullptr, /*allow_exceptions=*/false);
  auto li = LinkInspector::FromStored(j, comm.size());
  TORCH_CHECK(li.ok(), "hccltune link inspector: stored table from ", reply->daemon, ": ",
              std::string(li.status().message()));
  return li->ToJson().dump();
}

std::string LinksUsedJson(ProcessGroupHcclTune& pg) {
  nlohmann::json j = nlohmann::json::array();
  for (const UsedLink& u : LinkInspector::Used(pg.communicator())) j.push_back(u.ToJson());
  return j.dump();
}

}  // namespace hccltune::torch_backend
