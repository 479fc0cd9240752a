// Gloo's init time from C++ (Debian's libgloo-dev), timed as tests/perf/init_time.cc times hccl-tune's: each rank
// times what torch's ProcessGroupGloo does at init — a rendezvous store, a gloo::transport::tcp device on
// 127.0.0.1, gloo::rendezvous::Context::connectFullMesh — and a first gloo::barrier, and prints
// "init_ms RANK MS START END" (wall-clock seconds). Then, untimed, one 4-byte allreduce whose sum every rank checks.
//
// The store is the one hccl-tune's own init uses under the same launcher (ConnectLauncherRendezvous: a TCP store
// served by one rank, every other rank its client), wrapped as a gloo::rendezvous::Store the way torch wraps its
// c10d::TCPStore for Gloo — so only the library differs between the two drivers, not the launcher or the store.
// Usage: mpirun -np N hccltune-init-time-gloo   (or srun, mpiexec)
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/tcp/device.h"
#include "runtime/bootstrap/launcher_rendezvous.h"
#include "runtime/common/config.h"

namespace {

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// hccl-tune's store as Gloo's: Gloo reports store failures by exception.
class GlooStore final : public gloo::rendezvous::Store {
 public:
  GlooStore(std::shared_ptr<hccltune::Store> store, absl::Duration timeout)
      : store_(std::move(store)), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    Check(store_->Set(key, std::string(data.begin(), data.end())));
  }
  std::vector<char> get(const std::string& key) override {
    auto v = store_->Get(key, timeout_);
    Check(v.status());
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override { Check(store_->Wait(keys, timeout_)); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& t) override {
    Check(store_->Wait(keys, absl::FromChrono(t)));
  }

 private:
  static void Check(const absl::Status& s) {
    if (!s.ok()) throw std::runtime_error(std::string(s.message()));
  }
  std::shared_ptr<hccltune::Store> store_;
  absl::Duration timeout_;
};

// Store, device, full mesh: what ProcessGroupGloo's constructor does, with its one device.
std::shared_ptr<gloo::rendezvous::Context> Connect(const hccltune::Environment& env,
                                                   std::shared_ptr<hccltune::Store>* store) {
  if (!env.rank || !env.world_size || !hccltune::HasLauncherRendezvous(env)) {
    throw std::runtime_error("run under mpirun, srun or mpiexec (the launcher's rendezvous)");
  }
  auto served = hccltune::ConnectLauncherRendezvous(env);
  if (!served.ok()) throw std::runtime_error(std::string(served.status().message()));
  *store = served->store;
  const hccltune::Environment& joined = served->env;  // rank and size as the rendezvous confirmed them
  const absl::Duration timeout = absl::Seconds(joined.connect_timeout_s);
  GlooStore gloo_store(*store, timeout);
  gloo::transport::tcp::attr attr("127.0.0.1");
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<gloo::rendezvous::Context>(*joined.rank, *joined.world_size);
  context->setTimeout(absl::ToChronoMilliseconds(timeout));
  context->connectFullMesh(gloo_store, device);
  return context;
}

// One 4-byte sum allreduce: every rank must read 0 + 1 + ... + (size - 1).
bool AllreduceChecks(const std::shared_ptr<gloo::Context>& context) {
  int value = context->rank;
  gloo::AllreduceOptions opts(context);
  opts.setOutput(&value, 1);
  opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<int>));
  gloo::allreduce(opts);
  const int n = context->size;
  return value == n * (n - 1) / 2;
}

}  // namespace

int main() {
  const double start = WallSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  auto env = hccltune::Environment::Load();
  if (!env.ok()) {
    std::fprintf(stderr, "init_time_gloo: %s\n", std::string(env.status().message()).c_str());
    return 2;
  }
  try {
    std::shared_ptr<hccltune::Store> store;  // outlives the context: rank 0 may serve it
    auto context = Connect(*env, &store);
    gloo::BarrierOptions barrier(context);
    gloo::barrier(barrier);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const double end = WallSeconds();
    if (!AllreduceChecks(context)) {
      std::fprintf(stderr, "init_time_gloo: rank %d: the allreduce's sum is wrong\n", context->rank);
      return 1;
    }
    std::printf("init_ms %d %.1f %.6f %.6f\n", context->rank, ms, start, end);
    gloo::barrier(barrier);  // nobody closes the store's server while a rank still reads it
  } catch (const std::exception& e) {
    std::fprintf(stderr, "init_time_gloo: %s\n", e.what());
    return 1;
  }
  return 0;
}
