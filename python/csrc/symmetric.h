// Tensors in symmetric memory for the torch backend (hccl_tune_torch.empty_symmetric): collectives on them run
// the runtime's `symmetric` algorithms (peers' buffers read and written directly, no transport).
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "python/csrc/process_group.h"

namespace hccltune::torch_backend {

// Collective over `pg`'s ranks (every rank asks for the same `nbytes`; they must all be on one node): a 1-D
// uint8 CPU tensor over this rank's region of a new symmetric allocation. The region is released when the last
// tensor on its storage is destroyed, provided the group still exists (destroying the group unmaps all of its
// regions: tensors on them must not be used afterwards). Throws c10::Error with the runtime's message.
at::Tensor AllocSymmetricTensor(const c10::intrusive_ptr<ProcessGroupHcclTune>& pg, int64_t nbytes);

}  // namespace hccltune::torch_backend
