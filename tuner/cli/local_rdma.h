// This node's RDMA facts for the CLI (`hccl-tune links`, `hccl-tune algorithms`): the ports from libibverbs,
// HCCL_TUNE_IB_HCA, and this rank's device_ip when a rank table (RANK_TABLE_FILE, RANK_ID) names one.
//
// Thread-safety: reads the system on every call.
#pragma once

#include "links/rdma_facts.h"
#include "runtime/common/config.h"

namespace hccltune::cli {

RdmaFacts LocalRdmaFacts(const Environment& env);

}  // namespace hccltune::cli
