#include "runtime/selector/tuning.h"

#include <mutex>

namespace hccltune {
namespace {
std::mutex g_mu;
TuningClientFactory& Factory() {
  static auto* f = new TuningClientFactory();
  return *f;
}
}  // namespace

void InstallTuningClientFactory(TuningClientFactory factory) {
  std::lock_guard<std::mutex> lock(g_mu);
  Factory() = std::move(factory);
}

bool TuningClientFactoryInstalled() {
  std::lock_guard<std::mutex> lock(g_mu);
  return static_cast<bool>(Factory());
}

std::unique_ptr<TuningClient> MakeTuningClient(const TuningContext& ctx) {
  TuningClientFactory f;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    f = Factory();
  }
  return f ? f(ctx) : nullptr;
}

}  // namespace hccltune
