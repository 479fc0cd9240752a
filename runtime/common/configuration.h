// A configuration names one way to run a collective: an algorithm and its tunable parameters. Its one text
// form (docs/CONVENTIONS.md) is used everywhere — bench output, registry, DB, logs, overrides:
//
//   ring(chunk=1M,channels=2,link=shm)
//   hierarchical(intra=ring(link=shm),inter=halving_doubling(link=tcp@10.20.0.0/16),form=leader)
//
// Parsing fills parameters left out with the algorithm's defaults. ToString() prints the canonical form:
// every tunable parameter of the algorithm, in the catalogue's order, sizes with the largest exact binary
// suffix, so two configurations are equal exactly when their canonical strings are. One exception keeps the
// strings stored before it existed canonical: a hierarchical `form` is printed only when it is not `auto`.
//
// Thread-safety: values; the catalogue is immutable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace hccltune {

enum class LinkKind : uint8_t { kAuto, kShm, kTcp, kRoce, kUcx, kIb };

// "auto" (route-based choice), "shm", "tcp", "tcp@10.20.0.0/16", "roce", "roce@NET", "ib", "ib@NET", "ucx",
// "ucx@NET".
struct LinkSpec {
  LinkKind kind = LinkKind::kAuto;
  std::string network;  // CIDR subnet, only for tcp/roce/ib/ucx; empty = route to the peer (ucx: every device)

  friend bool operator==(const LinkSpec& a, const LinkSpec& b) { return a.kind == b.kind && a.network == b.network; }
};
absl::StatusOr<LinkSpec> ParseLink(absl::string_view text);
std::string FormatLink(const LinkSpec& link);
absl::string_view LinkKindName(LinkKind kind);

// Catalogue of algorithm names and their tunable parameters (the vocabulary; which collective supports which
// algorithm is the runtime registry's business).
enum class ParamKind : uint8_t { kChunk, kChannels, kLink, kIntra, kInter, kForm };
absl::string_view ParamName(ParamKind p);

// How a hierarchical configuration crosses nodes (runtime/algorithms/hierarchy.h): kParallel, every local rank
// over its own connections (needs the same number of ranks on every node); kLeader, one leader per node; kAuto,
// parallel where every node has as many ranks, else leader.
enum class HierForm : uint8_t { kAuto, kParallel, kLeader };
absl::string_view HierFormName(HierForm f);  // "auto", "parallel", "leader"

struct AlgorithmSpec {
  absl::string_view name;
  std::vector<ParamKind> params;  // in canonical order
  absl::string_view summary;
};
absl::Span<const AlgorithmSpec> AlgorithmCatalogue();
const AlgorithmSpec* FindAlgorithmSpec(absl::string_view name);

inline constexpr uint64_t kDefaultChunkBytes = 512 * 1024;
inline constexpr int kMaxChannels = 16;

struct Configuration {
  std::string algorithm;
  uint64_t chunk = kDefaultChunkBytes;         // meaningful when the algorithm has kChunk
  int channels = 1;                            // meaningful when the algorithm has kChannels
  LinkSpec link;                               // meaningful when the algorithm has kLink
  std::shared_ptr<const Configuration> intra;  // hierarchical: step inside a node (level0)
  std::shared_ptr<const Configuration> inter;  // hierarchical: step between nodes (level1)
  HierForm form = HierForm::kAuto;             // hierarchical: how the ranks cross nodes

  // Canonical text form.
  std::string ToString() const;
  bool Has(ParamKind p) const;

  // Errors point at the position: "configuration 'ring(chnk=1M)' at 5: unknown parameter 'chnk' for ring;
  // accepted: chunk, channels, link".
  static absl::StatusOr<Configuration> Parse(absl::string_view text);
  // The algorithm with every parameter at its default.
  static absl::StatusOr<Configuration> Default(absl::string_view algorithm);

  friend bool operator==(const Configuration& a, const Configuration& b) { return a.ToString() == b.ToString(); }
};

}  // namespace hccltune
