// The decisions behind the RDMA link names (docs/TRANSPORTS.md), over what each rank published: its node's RDMA
// port count and the networks its usable ports reach (UsableRdmaLinks, runtime/net/rdma.h). Pure, so that they are
// tested with fake port lists: no machine here has an RDMA device.
//
//   link=roce@SUBNET / ib@SUBNET: every rank must have a usable port of that link layer in SUBNET
//   (CheckRdmaLink); each rank then uses its own port there (ChooseRdmaPort) with UCX restricted to it
//   (UcxRdmaSettings).
//   link=roce / ib: each pair of ranks uses the best network of that link layer both reach (RdmaNetworkBetween).
//   link=auto between nodes: that network of either link layer when there is one (PreferredRdmaLink), else TCP.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "runtime/common/fingerprint.h"
#include "runtime/common/rdma_env.h"
#include "runtime/net/rdma.h"

namespace hccltune {

// What one rank published about RDMA.
struct RdmaPeer {
  bool present = false;          // it published a block (a build without the RDMA links publishes none)
  int ports = 0;                 // RDMA ports on its node, usable or not
  std::vector<InterLink> links;  // UsableRdmaLinks of its node
};

// "RoCE" or "InfiniBand" for "roce" or "ib".
std::string RdmaLinkLayerName(const std::string& link);

// The networks of `links` of one link layer ("roce", "ib"; "" = both).
std::vector<InterLink> LinksOfLayer(const std::vector<InterLink>& links, const std::string& link);

// The network two ranks share, of link layer `link` ("" = either): fastest first (the slower end's rate), then ib
// before roce, then by subnet. A total order on the shared networks, so both ends of a pair get the same answer.
// None: no common network (link=auto then takes TCP).
std::optional<InterLink> PreferredRdmaLink(const std::vector<InterLink>& mine, const std::vector<InterLink>& theirs,
                                           const std::string& link = "");

// InvalidArgument when link=`link`@`network` (network "" = plain roce / ib) cannot serve these ranks: a rank
// without the RDMA links, a rank with no usable port of that link layer in the network, or (no network) two
// ranks with no network of that link layer in common. Named by link, subnet and rank, with what that rank's node
// has ("no RDMA device" when it has no port at all); the same verdict on every rank.
absl::Status CheckRdmaLink(const std::vector<RdmaPeer>& peers, const std::string& link, const std::string& network);

// The UCP context settings (ucp_config_modify keys) of an RDMA link on `choice`: NET_DEVICES its port, TLS "ib"
// (UCX's RDMA transports: rc, ud, dc over verbs and mlx5), IB_GID_INDEX (HCCL_TUNE_IB_GID_INDEX, else the
// subnet's RoCE v2 entry), IB_TRAFFIC_CLASS (HCCL_RDMA_TC) and IB_SL (HCCL_RDMA_SL) when set.
std::vector<std::pair<std::string, std::string>> UcxRdmaSettings(const RdmaChoice& choice, const RdmaEnv& env);

}  // namespace hccltune
