// The link inspector for the torch backend (hccl_tune_torch.LinkInspector): links/link_inspector.h over a
// ProcessGroupHcclTune's communicator, as JSON text that the Python package turns into objects.
#pragma once

#include <cstdint>
#include <string>

#include "python/csrc/process_group.h"

namespace hccltune::torch_backend {

// Collective over `pg`'s ranks: LinkInspector::Measure's table (LinkInspector::ToJson). Throws c10::Error with
// the runtime's message (a bad argument, a rank that failed or never came).
std::string MeasureLinksJson(ProcessGroupHcclTune& pg, uint64_t bytes, int iters);
// Not collective: the table this rank's node daemon stored for the group's topology (LinkInspector::FromStored's
// ToJson, every link's source "stored"). Throws c10::Error naming the daemon and the topology when there is none.
std::string StoredLinksJson(ProcessGroupHcclTune& pg);
// Not collective: this rank's pairs' links in use (LinkInspector::Used), a JSON array.
std::string LinksUsedJson(ProcessGroupHcclTune& pg);

}  // namespace hccltune::torch_backend
