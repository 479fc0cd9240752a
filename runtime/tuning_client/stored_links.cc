#include "runtime/tuning_client/stored_links.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "hccltune/v1/tuner.grpc.pb.h"
#include "rpc/channel.h"
#include "runtime/common/daemon_discovery.h"

namespace hccltune {

absl::StatusOr<StoredLinksReply> FetchStoredLinks(const Environment& env, const std::string& fingerprint,
                                                  absl::Duration timeout) {
  auto target = ResolveDaemonTarget(env, "", ::getuid());
  if (!target.ok()) return target.status();
  if (target->disabled) {
    return absl::FailedPreconditionError("stored links: the daemon is disabled (HCCL_TUNE_DAEMON=off)");
  }
  auto stub = v1::Tuner::NewStub(rpc::MakeChannel(target->grpc_target));
  grpc::ClientContext cc;
  cc.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
  v1::GetLinksRequest req;
  req.set_fingerprint(fingerprint);
  v1::LinksRecord resp;
  grpc::Status s = stub->GetLinks(&cc, req, &resp);
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
    return absl::NotFoundError(absl::StrCat("hccl-tuned at ", target->grpc_target,
                                            " has no link measurement for topology ", fingerprint,
                                            " (`hccl-tune links` on this topology stores one)"));
  }
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat("GetLinks from ", target->grpc_target, ": ", s.error_message()));
  }
  return StoredLinksReply{resp.links_json(), resp.measured_unix_ms(), resp.stored_unix_ms(), target->grpc_target};
}

}  // namespace hccltune
