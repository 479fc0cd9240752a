// Who may call which RPC of hccltune.v1.Tuner (docs/SECURITY.md, "The daemon: roles").
//
// Two roles: kReader (read the tables, sweeps and activity, and report live timings) and kTuner (everything a
// reader may, plus every write: tables, sweeps, links). Every RPC of the service has exactly one role in
// RpcRoles(); an RPC missing from it is refused (fail closed) and a unit test enumerates the service descriptor.
//
// Callers on the unix socket are identified by SO_PEERCRED: the daemon accepts the socket itself, records each
// accepted connection's credentials (PeerRegistry, keyed by the fd gRPC then serves it on, whose peer string is
// "fd:N"), and hands the fd to gRPC. A caller is a tuner when its uid is 0 or the daemon's own uid, or when it
// belongs to the configured tuner group (its primary gid, or a supplementary group of its user); any other
// caller that can open the socket (mode 0660, the daemon's group) is a reader. On the TCP listener with TLS, a
// client certificate whose subject common name is listed (tls_tuner_names) is a tuner, any other a reader; on a
// plaintext TCP listener callers are not authenticated: they are tuners (loopback or --insecure only).
//
// Thread-safety: PeerRegistry and Authorizer are safe to use from any thread.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace grpc {
class ServerContextBase;
}

namespace hccltune::daemon {

enum class Role { kReader, kTuner };
const char* RoleName(Role role);

// RPC method name (as in the proto service, e.g. "PutTable") -> the role it needs.
const std::map<std::string, Role>& RpcRoles();

// Who called: the unix peer's credentials, or a TCP peer's address.
struct Caller {
  bool has_cred = false;  // from SO_PEERCRED
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
  std::string peer;              // grpc's peer string
  std::string tls_subject;       // a TLS client certificate's subject common name ("" = none)
  std::string Describe() const;  // "uid 1000 pid 4242", "certificate CN=x (peer)" or the peer string
};

class PeerRegistry {
 public:
  struct Cred {
    uid_t uid;
    gid_t gid;
    pid_t pid;
  };
  void Remember(int fd, Cred cred);
  // The credentials recorded for a "fd:N" peer string, else nullopt.
  std::optional<Cred> Lookup(absl::string_view peer) const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<int, Cred> by_fd_ ABSL_GUARDED_BY(mu_);
};

class Authorizer {
 public:
  // `tuner_group`: a group name or numeric gid whose members are tuners; "" = none. A name that is no group leaves
  // no tuner group (a warning says so): only root and the daemon's user are tuners.
  // `tls_tuner_names`: TLS client certificate common names that are tuners (other valid certificates: readers).
  static absl::StatusOr<Authorizer> Create(const PeerRegistry* registry, uid_t daemon_uid,
                                           const std::string& tuner_group,
                                           std::vector<std::string> tls_tuner_names = {});

  // The role of `caller`.
  Role RoleOf(const Caller& caller) const;
  // Identifies the caller of `ctx` into `*caller` and checks it may call `rpc`. PermissionDenied names the role
  // needed, the RPC and the caller's uid; an RPC without a role is refused too.
  absl::Status Check(const grpc::ServerContextBase& ctx, absl::string_view rpc, Caller* caller) const;

 private:
  Authorizer(const PeerRegistry* registry, uid_t daemon_uid, std::optional<gid_t> tuner_gid)
      : registry_(registry), daemon_uid_(daemon_uid), tuner_gid_(tuner_gid) {}
  static absl::StatusOr<Authorizer> MakeWithGroup(const PeerRegistry* registry, uid_t daemon_uid,
                                                  const std::string& tuner_group);
  bool InTunerGroup(uid_t uid, gid_t gid) const;

  const PeerRegistry* registry_;
  uid_t daemon_uid_;
  std::optional<gid_t> tuner_gid_;
  std::vector<std::string> tls_tuner_names_;
};

}  // namespace hccltune::daemon
