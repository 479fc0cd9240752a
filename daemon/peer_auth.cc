#include "daemon/peer_auth.h"

#include <grp.h>
#include <grpcpp/server_context.h>
#include <pwd.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/common/logging.h"

namespace hccltune::daemon {

const char* RoleName(Role role) { return role == Role::kTuner ? "tuner" : "reader"; }

const std::map<std::string, Role>& RpcRoles() {
  static const auto* roles = new std::map<std::string, Role>{
      {"GetTable", Role::kReader},      {"WatchTable", Role::kReader},     {"GetConfig", Role::kReader},
      {"ReportTimings", Role::kReader}, {"ListTables", Role::kReader},     {"Status", Role::kReader},
      {"GetSweep", Role::kReader},      {"ListSweeps", Role::kReader},     {"GetSweepSamples", Role::kReader},
      {"WatchSweep", Role::kReader},    {"GetActivity", Role::kReader},    {"GetLinks", Role::kReader},
      {"PutTable", Role::kTuner},       {"DeleteTable", Role::kTuner},     {"Rollback", Role::kTuner},
      {"PutSweep", Role::kTuner},       {"AddSweepSamples", Role::kTuner}, {"StartSweep", Role::kTuner},
      {"CancelSweep", Role::kTuner},    {"PutLinks", Role::kTuner},        {"Heartbeat", Role::kReader},
      {"GetJobs", Role::kReader},       {"DumpJob", Role::kReader},        {"GetModel", Role::kReader},
      {"ListModels", Role::kReader},    {"PutModel", Role::kTuner},
  };
  return *roles;
}

std::string Caller::Describe() const {
  if (!tls_subject.empty()) return absl::StrCat("certificate CN=", tls_subject, " (", peer, ")");
  if (!has_cred) return peer;
  return absl::StrCat("uid ", uid, " pid ", pid);
}

void PeerRegistry::Remember(int fd, Cred cred) {
  absl::MutexLock lock(&mu_);
  by_fd_[fd] = cred;
}

std::optional<PeerRegistry::Cred> PeerRegistry::Lookup(absl::string_view peer) const {
  int fd = -1;
  if (!absl::ConsumePrefix(&peer, "fd:") || !absl::SimpleAtoi(peer, &fd)) return std::nullopt;
  absl::MutexLock lock(&mu_);
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<Authorizer> Authorizer::Create(const PeerRegistry* registry, uid_t daemon_uid,
                                              const std::string& tuner_group,
                                              std::vector<std::string> tls_tuner_names) {
  auto made = MakeWithGroup(registry, daemon_uid, tuner_group);
  if (made.ok()) made->tls_tuner_names_ = std::move(tls_tuner_names);
  return made;
}

absl::StatusOr<Authorizer> Authorizer::MakeWithGroup(const PeerRegistry* registry, uid_t daemon_uid,
                                                     const std::string& tuner_group) {
  if (tuner_group.empty()) return Authorizer(registry, daemon_uid, std::nullopt);
  gid_t gid = 0;
  if (absl::SimpleAtoi(tuner_group, &gid)) return Authorizer(registry, daemon_uid, gid);
  std::vector<char> buf(16384);
  group g{};
  group* found = nullptr;
  if (::getgrnam_r(tuner_group.c_str(), &g, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    // Fail closed, but keep serving readers: a package's group may not exist yet on a plain install.
    Log(LogLevel::kWarn, "tuner_group = '", tuner_group,
        "': no such group; only root and the daemon's user may write tables and start sweeps");
    return Authorizer(registry, daemon_uid, std::nullopt);
  }
  return Authorizer(registry, daemon_uid, found->gr_gid);
}

bool Authorizer::InTunerGroup(uid_t uid, gid_t gid) const {
  if (!tuner_gid_.has_value()) return false;
  if (gid == *tuner_gid_) return true;
  // The user's supplementary groups (SO_PEERCRED carries only the primary gid).
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return false;
  int n = 64;
  std::vector<gid_t> groups(n);
  if (::getgrouplist(found->pw_name, found->pw_gid, groups.data(), &n) < 0) {
    groups.resize(n);
    if (::getgrouplist(found->pw_name, found->pw_gid, groups.data(), &n) < 0) return false;
  }
  for (int i = 0; i < n; ++i) {
    if (groups[i] == *tuner_gid_) return true;
  }
  return false;
}

Role Authorizer::RoleOf(const Caller& caller) const {
  if (!caller.tls_subject.empty()) {
    for (const std::string& n : tls_tuner_names_) {
      if (n == caller.tls_subject) return Role::kTuner;
    }
    return Role::kReader;
  }
  if (!caller.has_cred) return Role::kTuner;  // plaintext TCP: loopback or --insecure only
  if (caller.uid == 0 || caller.uid == daemon_uid_) return Role::kTuner;
  return InTunerGroup(caller.uid, caller.gid) ? Role::kTuner : Role::kReader;
}

absl::Status Authorizer::Check(const grpc::ServerContextBase& ctx, absl::string_view rpc, Caller* caller) const {
  caller->peer = ctx.peer();
  if (std::optional<PeerRegistry::Cred> cred = registry_->Lookup(caller->peer)) {
    caller->has_cred = true;
    caller->uid = cred->uid;
    caller->gid = cred->gid;
    caller->pid = cred->pid;
  } else if (absl::StartsWith(caller->peer, "fd:")) {
    return absl::PermissionDeniedError(absl::StrCat(rpc, ": unknown caller ", caller->peer));
  }
  if (!caller->has_cred) {
    std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
    if (auth != nullptr && auth->IsPeerAuthenticated()) {
      std::vector<grpc::string_ref> cn = auth->FindPropertyValues("x509_common_name");
      caller->tls_subject = cn.empty() ? "(no common name)" : std::string(cn[0].data(), cn[0].size());
    }
  }
  auto it = RpcRoles().find(std::string(rpc));
  if (it == RpcRoles().end()) {
    return absl::PermissionDeniedError(absl::StrCat(rpc, " has no role; refused"));
  }
  if (it->second == Role::kTuner && RoleOf(*caller) != Role::kTuner) {
    return absl::PermissionDeniedError(absl::StrCat(rpc, " needs the tuner role (root, the daemon's user or the ",
                                                    "tuner_group); the caller ", caller->Describe(), " is a reader"));
  }
  return absl::OkStatus();
}

}  // namespace hccltune::daemon
