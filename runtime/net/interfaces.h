// This host's IPv4 interfaces and subnet arithmetic, for the TCP transport's address choice, the rank table's
// "which entry is me" and the link inspector. Networks are named by subnet (docs/CONVENTIONS.md), never by an
// interface name.
//
// Thread-safety: stateless; ListInterfaces reads the kernel's list on every call.
#pragma once

#include <string>
#include <vector>

namespace hccltune {

struct InterfaceAddress {
  std::string name;            // eth0
  std::string address;         // 10.20.0.2
  int prefix = 32;             // 16
  std::string Subnet() const;  // 10.20.0.0/16
};
// IPv4 interfaces that are up (loopback included, last).
std::vector<InterfaceAddress> ListInterfaces();
// Whether `address` lies in `subnet` ("10.20.0.0/16"); false for a malformed subnet.
bool InSubnet(const std::string& address, const std::string& subnet);
// Whether `host` is one of this host's IPv4 addresses (or "localhost" or a 127.x address). A host name other than
// "localhost" is never local: it may resolve differently here and on other nodes.
bool IsLocalAddress(const std::string& host);

}  // namespace hccltune
