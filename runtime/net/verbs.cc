// VerbsApi over libibverbs and sysfs (runtime/net/rdma.h). The devices are opened once, when the list is first
// asked for, and closed with the object.
#include <infiniband/verbs.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/net/rdma.h"

namespace hccltune {
namespace {

std::string ReadLine(const std::filesystem::path& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

class LibibverbsApi final : public VerbsApi {
 public:
  ~LibibverbsApi() override {
    for (auto& [name, ctx] : open_) ibv_close_device(ctx);
    if (list_ != nullptr) ibv_free_device_list(list_);
  }

  std::vector<std::string> Devices() override {
    std::vector<std::string> names;
    if (list_ == nullptr) {
      int n = 0;
      list_ = ibv_get_device_list(&n);  // NULL (errno ENOSYS) without kernel support
      count_ = list_ != nullptr ? n : 0;
    }
    for (int i = 0; i < count_; ++i) names.emplace_back(ibv_get_device_name(list_[i]));
    return names;
  }

  absl::StatusOr<int> PortCount(const std::string& device) override {
    auto ctx = Open(device);
    if (!ctx.ok()) return ctx.status();
    ibv_device_attr attr{};
    if (int rc = ibv_query_device(*ctx, &attr); rc != 0) return Failed(device, "ibv_query_device", rc);
    return static_cast<int>(attr.phys_port_cnt);
  }

  absl::StatusOr<VerbsPort> QueryPort(const std::string& device, int port) override {
    auto ctx = Open(device);
    if (!ctx.ok()) return ctx.status();
    ibv_port_attr a{};
    if (int rc = ibv_query_port(*ctx, static_cast<uint8_t>(port), &a); rc != 0) {
      return Failed(device, absl::StrCat("ibv_query_port(", port, ")"), rc);
    }
    return VerbsPort{a.state, a.link_layer, a.active_speed, a.active_width, a.active_mtu};
  }

  absl::StatusOr<std::vector<VerbsGid>> GidTable(const std::string& device) override {
    auto ctx = Open(device);
    if (!ctx.ok()) return ctx.status();
    // Room for every port's whole table (ibv_query_gid_table fails when the entries do not fit).
    ibv_device_attr dev{};
    if (int rc = ibv_query_device(*ctx, &dev); rc != 0) return Failed(device, "ibv_query_device", rc);
    size_t room = 0;
    for (int port = 1; port <= dev.phys_port_cnt; ++port) {
      ibv_port_attr a{};
      if (int rc = ibv_query_port(*ctx, static_cast<uint8_t>(port), &a); rc != 0) {
        return Failed(device, absl::StrCat("ibv_query_port(", port, ")"), rc);
      }
      room += static_cast<size_t>(a.gid_tbl_len);
    }
    std::vector<ibv_gid_entry> entries(std::max<size_t>(room, 1));
    const ssize_t n = ibv_query_gid_table(*ctx, entries.data(), entries.size(), 0);
    if (n < 0) return Failed(device, "ibv_query_gid_table", static_cast<int>(-n));
    std::vector<VerbsGid> out;
    for (ssize_t i = 0; i < n; ++i) {
      const ibv_gid_entry& e = entries[static_cast<size_t>(i)];
      VerbsGid g;
      g.port = static_cast<int>(e.port_num);
      g.index = static_cast<int>(e.gid_index);
      std::memcpy(g.gid.data(), e.gid.raw, g.gid.size());
      g.type = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? 2 : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? 1 : 0;
      char name[IF_NAMESIZE] = {};
      if (e.ndev_ifindex != 0 && ::if_indextoname(e.ndev_ifindex, name) != nullptr) g.netdev = name;
      out.push_back(std::move(g));
    }
    return out;
  }

  int NumaNode(const std::string& device) override {
    int node = -1;
    if (!absl::SimpleAtoi(ReadLine(absl::StrCat("/sys/class/infiniband/", device, "/device/numa_node")), &node)) {
      return -1;
    }
    return node;
  }

  std::vector<std::string> PortNetdevs(const std::string& device, int port) override {
    std::vector<std::string> out;
    std::error_code ec;
    const std::filesystem::path net = absl::StrCat("/sys/class/infiniband/", device, "/device/net");
    for (const auto& e : std::filesystem::directory_iterator(net, ec)) {
      int dev_port = 0;  // 0-based; older kernels name it dev_id
      if (!absl::SimpleAtoi(ReadLine(e.path() / "dev_port"), &dev_port)) dev_port = 0;
      if (dev_port + 1 == port) out.push_back(e.path().filename().string());
    }
    return out;
  }

 private:
  absl::StatusOr<ibv_context*> Open(const std::string& device) {
    if (auto it = open_.find(device); it != open_.end()) return it->second;
    Devices();
    for (int i = 0; i < count_; ++i) {
      if (device != ibv_get_device_name(list_[i])) continue;
      ibv_context* ctx = ibv_open_device(list_[i]);
      if (ctx == nullptr) return Failed(device, "ibv_open_device", errno);
      open_[device] = ctx;
      return ctx;
    }
    return absl::NotFoundError(absl::StrCat("RDMA device ", device, " is not in ibv_get_device_list"));
  }

  static absl::Status Failed(const std::string& device, const std::string& call, int err) {
    return absl::UnavailableError(absl::StrCat("RDMA device ", device, ": ", call, " failed: ", std::strerror(err)));
  }

  ibv_device** list_ = nullptr;
  int count_ = 0;
  std::map<std::string, ibv_context*> open_;
};

}  // namespace

std::unique_ptr<VerbsApi> NewLibibverbsApi() { return std::make_unique<LibibverbsApi>(); }

}  // namespace hccltune
