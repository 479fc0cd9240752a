#include "runtime/selector/tuning.h"

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace hccltune {
namespace {
std::mutex g_mu;
TuningClientFactory& Factory() {
  static auto* f = new TuningClientFactory();
  return *f;
}
}  // namespace

namespace {
constexpr size_t kMaxInterned = 65536;
struct Interner {
  std::mutex mu;
  std::unordered_map<std::string, uint32_t> ids;
  std::vector<std::string> names{std::string()};  // id 0 = unknown
};
Interner& TheInterner() {
  static auto* i = new Interner();
  return *i;
}
}  // namespace

uint32_t InternConfiguration(const std::string& canonical) {
  Interner& in = TheInterner();
  std::lock_guard<std::mutex> lock(in.mu);
  auto it = in.ids.find(canonical);
  if (it != in.ids.end()) return it->second;
  if (in.names.size() > kMaxInterned) return 0;
  const auto id = static_cast<uint32_t>(in.names.size());
  in.names.push_back(canonical);
  in.ids.emplace(canonical, id);
  return id;
}

std::string InternedConfiguration(uint32_t id) {
  Interner& in = TheInterner();
  std::lock_guard<std::mutex> lock(in.mu);
  return id < in.names.size() ? in.names[id] : std::string();
}

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
