// Declarations of every algorithm implementation (one .cc each under <collective>/). Internal: the runtime
// reaches them through the registry (registry.h).
#pragma once

#include "runtime/algorithms/algorithm.h"

namespace hccltune::algo {

#define HT_DECLARE_ALGORITHM(fn) \
  absl::Status fn(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx)
// The mailbox form (ExchangeFn, algorithm.h) of the algorithms that have one.
#define HT_DECLARE_EXCHANGE(fn) \
  absl::Status fn(const CollectiveArgs& args, MailboxEndpoint& ep, int rank, int size, const void** blocks)

HT_DECLARE_ALGORITHM(AllreduceRing);
HT_DECLARE_ALGORITHM(AllreduceDoubleRing);
HT_DECLARE_ALGORITHM(AllreduceHalvingDoubling);
HT_DECLARE_ALGORITHM(AllreduceRecursiveDoubling);
HT_DECLARE_ALGORITHM(AllreduceBinomialTree);
HT_DECLARE_ALGORITHM(AllreduceDoubleBinaryTree);
HT_DECLARE_ALGORITHM(AllreduceOneShot);
HT_DECLARE_EXCHANGE(AllreduceOneShotExchange);
HT_DECLARE_ALGORITHM(AllreduceSymmetric);
HT_DECLARE_ALGORITHM(AllreduceHierarchical);

HT_DECLARE_ALGORITHM(AllgatherRing);
HT_DECLARE_ALGORITHM(AllgatherRecursiveDoubling);
HT_DECLARE_ALGORITHM(AllgatherBruck);
HT_DECLARE_ALGORITHM(AllgatherDirect);
HT_DECLARE_EXCHANGE(AllgatherDirectExchange);
HT_DECLARE_ALGORITHM(AllgatherSymmetric);
HT_DECLARE_ALGORITHM(AllgatherHierarchical);
HT_DECLARE_ALGORITHM(AllgathervRing);
HT_DECLARE_ALGORITHM(AllgathervDirect);

HT_DECLARE_ALGORITHM(ReducescatterRing);
HT_DECLARE_ALGORITHM(ReducescatterHalvingDoubling);
HT_DECLARE_ALGORITHM(ReducescatterDirect);
HT_DECLARE_EXCHANGE(ReducescatterDirectExchange);
HT_DECLARE_ALGORITHM(ReducescatterSymmetric);
HT_DECLARE_ALGORITHM(ReducescatterHierarchical);

HT_DECLARE_ALGORITHM(BroadcastBinomialTree);
HT_DECLARE_ALGORITHM(BroadcastChain);
HT_DECLARE_ALGORITHM(BroadcastLinear);
HT_DECLARE_ALGORITHM(BroadcastScatterAllgather);
HT_DECLARE_ALGORITHM(BroadcastSymmetric);
HT_DECLARE_ALGORITHM(BroadcastHierarchical);

HT_DECLARE_ALGORITHM(ReduceBinomialTree);
HT_DECLARE_ALGORITHM(ReduceReducescatterGather);

HT_DECLARE_ALGORITHM(AlltoallPairwise);
HT_DECLARE_ALGORITHM(AlltoallBruck);
HT_DECLARE_ALGORITHM(AlltoallDirect);
HT_DECLARE_EXCHANGE(AlltoallDirectExchange);
HT_DECLARE_ALGORITHM(AlltoallvPairwise);

HT_DECLARE_ALGORITHM(BarrierDissemination);
HT_DECLARE_ALGORITHM(BarrierOneShot);
HT_DECLARE_EXCHANGE(BarrierOneShotExchange);

HT_DECLARE_ALGORITHM(GatherBinomialTree);
HT_DECLARE_ALGORITHM(GatherLinear);
HT_DECLARE_ALGORITHM(ScatterBinomialTree);
HT_DECLARE_ALGORITHM(ScatterLinear);

#undef HT_DECLARE_ALGORITHM

}  // namespace hccltune::algo
