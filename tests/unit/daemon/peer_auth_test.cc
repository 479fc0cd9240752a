// daemon/peer_auth: every RPC of the service has a role; who is a tuner; "fd:N" peers map to their credentials.
#include "daemon/peer_auth.h"

#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>
#include <string>

#include "hccltune/v1/tuner.grpc.pb.h"

namespace hccltune::daemon {
namespace {

TEST(PeerAuth, EveryRpcOfTheServiceHasExactlyTheRolesTable) {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName("hccltune.v1.Tuner");
  ASSERT_NE(service, nullptr);
  std::set<std::string> methods;
  for (int i = 0; i < service->method_count(); ++i) {
    methods.insert(service->method(i)->name());
    EXPECT_TRUE(RpcRoles().contains(service->method(i)->name()))
        << "RPC " << service->method(i)->name() << " has no role in daemon/peer_auth.cc RpcRoles()";
  }
  for (const auto& [rpc, role] : RpcRoles()) EXPECT_TRUE(methods.contains(rpc)) << rpc << " is not an RPC";
  // The writes are the tuner's, the reads and live reports the reader's.
  for (const char* w : {"PutTable", "Rollback", "DeleteTable", "PutSweep", "AddSweepSamples", "StartSweep",
                        "CancelSweep", "PutLinks", "PutModel"}) {
    EXPECT_EQ(RpcRoles().at(w), Role::kTuner) << w;
  }
  for (const char* r : {"GetTable", "WatchTable", "ReportTimings", "Status", "GetActivity", "WatchSweep", "Heartbeat",
                        "GetJobs", "DumpJob", "GetModel", "ListModels"}) {
    EXPECT_EQ(RpcRoles().at(r), Role::kReader) << r;
  }
}

Caller Unix(uid_t uid, gid_t gid) {
  Caller c;
  c.has_cred = true;
  c.uid = uid;
  c.gid = gid;
  return c;
}

TEST(PeerAuth, RootTheDaemonsUserAndTheTunerGroupAreTunersOthersReaders) {
  PeerRegistry registry;
  auto auth = Authorizer::Create(&registry, /*daemon_uid=*/4242, /*tuner_group=*/"4343");
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_EQ(auth->RoleOf(Unix(0, 100)), Role::kTuner);
  EXPECT_EQ(auth->RoleOf(Unix(4242, 100)), Role::kTuner);
  EXPECT_EQ(auth->RoleOf(Unix(5000, 4343)), Role::kTuner);  // primary gid
  EXPECT_EQ(auth->RoleOf(Unix(5000, 100)), Role::kReader);
  auto no_group = Authorizer::Create(&registry, 4242, "");
  ASSERT_TRUE(no_group.ok());
  EXPECT_EQ(no_group->RoleOf(Unix(5000, 4343)), Role::kReader);
}

TEST(PeerAuth, AnUnknownTunerGroupLeavesOnlyRootAndTheDaemonsUserAsTuners) {
  PeerRegistry registry;
  auto auth = Authorizer::Create(&registry, /*daemon_uid=*/4242, "no-such-group-hcclt");
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_EQ(auth->RoleOf(Unix(0, 100)), Role::kTuner);
  EXPECT_EQ(auth->RoleOf(Unix(4242, 100)), Role::kTuner);
  EXPECT_EQ(auth->RoleOf(Unix(5000, 100)), Role::kReader);
}

TEST(PeerAuth, RegistryMapsFdPeersOnly) {
  PeerRegistry registry;
  registry.Remember(7, {1000, 1001, 55});
  auto cred = registry.Lookup("fd:7");
  ASSERT_TRUE(cred.has_value());
  EXPECT_EQ(cred->uid, 1000u);
  EXPECT_EQ(cred->pid, 55);
  registry.Remember(7, {2000, 2001, 66});  // the fd reused by a later connection
  EXPECT_EQ(registry.Lookup("fd:7")->uid, 2000u);
  EXPECT_FALSE(registry.Lookup("fd:8").has_value());
  EXPECT_FALSE(registry.Lookup("ipv4:127.0.0.1:7").has_value());
  EXPECT_FALSE(registry.Lookup("fd:x").has_value());
}

}  // namespace
}  // namespace hccltune::daemon
