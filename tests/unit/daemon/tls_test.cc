// hccl-tuned's TCP listener with TLS and client certificates (docs/SECURITY.md): certificates made by the openssl
// CLI in a temp dir; a client with a certificate of the configured CA is served (its role from the common name),
// one without a certificate or with one of another CA is refused at the handshake.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "daemon/server.h"
#include "hccltune/v1/tuner.grpc.pb.h"
#include "rpc/remote_store.h"
#include "tests/unit/db/test_util.h"

namespace hccltune::daemon {
namespace {

using db::testing::TempDir;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Makes CA `ca` (ca.pem, ca.key) unless present, then a certificate CN=`cn` signed by it: name.pem, name.key.
void MakeCert(const TempDir& dir, const std::string& ca, const std::string& name, const std::string& cn) {
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string cmd = "cd " + dir.path() + " && { [ -f " + ca + ".pem ] || openssl req -x509 " + key + " -keyout " +
                          ca + ".key -out " + ca + ".pem -days 1 -subj /CN=" + ca +
                          "; } && printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > ext.cnf && openssl req " +
                          key + " -keyout " + name + ".key -out " + name + ".csr -subj /CN=" + cn +
                          " && openssl x509 -req -in " + name + ".csr -CA " + ca + ".pem -CAkey " + ca +
                          ".key -CAcreateserial -out " + name + ".pem -days 1 -extfile ext.cnf 2>/dev/null";
  ASSERT_EQ(std::system((cmd + " > /dev/null 2>&1").c_str()), 0) << cmd;
}

class DaemonTls : public ::testing::Test {
 protected:
  void SetUp() override {
    MakeCert(dir_, "ca", "server", "localhost");
    MakeCert(dir_, "ca", "admin", "tuner-admin");
    MakeCert(dir_, "ca", "alice", "alice");
    MakeCert(dir_, "otherca", "mallory", "tuner-admin");
    DaemonConfig c;
    c.socket = dir_.File("run/tuned.sock");
    c.db = dir_.File("state/tuning.db");
    c.log_level = LogLevel::kError;
    c.listen = "127.0.0.1:0";
    c.tls_cert = dir_.File("server.pem");
    c.tls_key = dir_.File("server.key");
    c.tls_client_ca = dir_.File("ca.pem");
    c.tls_tuner_names = {"tuner-admin"};
    auto server = TunerServer::Start(c);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  // A stub over TLS trusting the server's CA, presenting `client` (name.pem/.key) unless empty.
  std::unique_ptr<v1::Tuner::Stub> Stub(const std::string& client) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = Read(dir_.File("ca.pem"));
    if (!client.empty()) {
      o.pem_cert_chain = Read(dir_.File(client + ".pem"));
      o.pem_private_key = Read(dir_.File(client + ".key"));
    }
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    return v1::Tuner::NewStub(
        grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(server_->tcp_port()), grpc::SslCredentials(o), args));
  }

  static grpc::Status List(v1::Tuner::Stub& stub) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ListTablesRequest req;
    v1::ListTablesResponse resp;
    return stub.ListTables(&ctx, req, &resp);
  }
  static grpc::Status Delete(v1::Tuner::Stub& stub) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::DeleteTableRequest req;
    req.mutable_topology()->set_fingerprint("0123456789abcdef");
    v1::DeleteTableResponse resp;
    return stub.DeleteTable(&ctx, req, &resp);
  }

  TempDir dir_;
  std::unique_ptr<TunerServer> server_;
};

TEST_F(DaemonTls, AValidClientCertificateIsServedWithTheRoleOfItsCommonName) {
  auto admin = Stub("admin");
  EXPECT_TRUE(List(*admin).ok()) << List(*admin).error_message();
  EXPECT_NE(Delete(*admin).error_code(), grpc::StatusCode::PERMISSION_DENIED) << Delete(*admin).error_message();
  auto alice = Stub("alice");
  EXPECT_TRUE(List(*alice).ok()) << List(*alice).error_message();
  grpc::Status refused = Delete(*alice);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(refused.error_message().find("needs the tuner role"), std::string::npos) << refused.error_message();
  EXPECT_NE(refused.error_message().find("CN=alice"), std::string::npos) << refused.error_message();
}

TEST_F(DaemonTls, NoClientCertificateOrOneOfAnotherCaIsRefused) {
  auto anonymous = Stub("");
  EXPECT_EQ(List(*anonymous).error_code(), grpc::StatusCode::UNAVAILABLE);
  auto mallory = Stub("mallory");
  EXPECT_EQ(List(*mallory).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Delete(*mallory).error_code(), grpc::StatusCode::UNAVAILABLE);
  // A plaintext client gets nothing either.
  auto plain = v1::Tuner::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->tcp_port()), grpc::InsecureChannelCredentials()));
  EXPECT_FALSE(List(*plain).ok());
}

// The client side: rpc::MakeChannel (every client) reads HCCL_TUNE_DAEMON_TLS_* for a TCP target.
TEST_F(DaemonTls, ClientsPresentTheCertificateNamedByTheEnvironment) {
  const std::string target = "localhost:" + std::to_string(server_->tcp_port());
  ::unsetenv("HCCL_TUNE_DAEMON_TLS_CA");
  EXPECT_FALSE(rpc::RemoteTuningStore(target).ListTables().ok());  // plaintext: refused
  ::setenv("HCCL_TUNE_DAEMON_TLS_CA", dir_.File("ca.pem").c_str(), 1);
  ::setenv("HCCL_TUNE_DAEMON_TLS_CERT", dir_.File("alice.pem").c_str(), 1);
  ::setenv("HCCL_TUNE_DAEMON_TLS_KEY", dir_.File("alice.key").c_str(), 1);
  auto listed = rpc::RemoteTuningStore(target).ListTables();
  EXPECT_TRUE(listed.ok()) << listed.status();
  auto del = rpc::RemoteTuningStore(target).DeleteTable("0123456789abcdef");
  EXPECT_EQ(del.status().code(), absl::StatusCode::kPermissionDenied) << del.status();
  for (const char* v : {"HCCL_TUNE_DAEMON_TLS_CA", "HCCL_TUNE_DAEMON_TLS_CERT", "HCCL_TUNE_DAEMON_TLS_KEY"}) {
    ::unsetenv(v);
  }
}

}  // namespace
}  // namespace hccltune::daemon
