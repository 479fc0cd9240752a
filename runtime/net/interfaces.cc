#include "runtime/net/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hccltune {
namespace {

uint32_t ParseIp(const std::string& s) {
  in_addr a{};
  if (::inet_pton(AF_INET, s.c_str(), &a) != 1) return 0;
  return ntohl(a.s_addr);
}

}  // namespace

std::string InterfaceAddress::Subnet() const {
  const uint32_t ip = ParseIp(address);
  const uint32_t mask = prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
  in_addr a{};
  a.s_addr = htonl(ip & mask);
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a, buf, sizeof(buf));
  return absl::StrCat(buf, "/", prefix);
}

bool InSubnet(const std::string& address, const std::string& subnet) {
  const size_t slash = subnet.find('/');
  if (slash == std::string::npos) return false;
  int prefix = 0;
  if (!absl::SimpleAtoi(subnet.substr(slash + 1), &prefix) || prefix < 0 || prefix > 32) return false;
  const uint32_t mask = prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
  return (ParseIp(address) & mask) == (ParseIp(subnet.substr(0, slash)) & mask);
}

std::vector<InterfaceAddress> ListInterfaces() {
  std::vector<InterfaceAddress> out, loop;
  ifaddrs* ifa = nullptr;
  if (::getifaddrs(&ifa) != 0) return out;
  for (ifaddrs* p = ifa; p != nullptr; p = p->ifa_next) {
    if (p->ifa_addr == nullptr || p->ifa_addr->sa_family != AF_INET || !(p->ifa_flags & IFF_UP)) continue;
    char buf[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(p->ifa_addr)->sin_addr, buf, sizeof(buf));
    int prefix = 32;
    if (p->ifa_netmask != nullptr) {
      prefix = __builtin_popcount(reinterpret_cast<sockaddr_in*>(p->ifa_netmask)->sin_addr.s_addr);
    }
    InterfaceAddress a{p->ifa_name, buf, prefix};
    ((p->ifa_flags & IFF_LOOPBACK) ? loop : out).push_back(a);
  }
  ::freeifaddrs(ifa);
  out.insert(out.end(), loop.begin(), loop.end());
  return out;
}

bool IsLocalAddress(const std::string& host) {
  if (host == "localhost" || host.rfind("127.", 0) == 0) return true;
  for (const InterfaceAddress& a : ListInterfaces()) {
    if (a.address == host) return true;
  }
  return false;
}

}  // namespace hccltune
