// all_reduce of sparse COO tensors for the torch backend, as torch 1.13's gloo backend does it: every rank
// coalesces its input, the ranks allgather their metadata (nnz, sparse/dense dims, dtype, shape), then their
// indices and values (allgatherv: ranks contribute different nnz), and every rank builds the sum of all ranks'
// tensors from the gathered pieces and coalesces it (duplicate indices add up). SUM only, like gloo.
//
// Every rank computes the result from the same gathered bytes in the same order, so the ranks end with
// bit-identical tensors. Ranks whose tensors disagree in shape, sparse/dense split or dtype all fail with an
// error naming the first rank that differs from rank 0 and both descriptions.
//
// Thread-safety: SparseAllreduceSum runs on the communicator's progress thread (it issues collectives).
#pragma once

#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "runtime/api/communicator.h"

namespace hccltune::torch_backend {

// REQUIRES: `input` is a coalesced sparse COO CPU tensor. On success `output` (a sparse COO tensor, may be the
// user's tensor that `input` was coalesced from) holds the coalesced sum over all ranks.
absl::Status SparseAllreduceSum(Communicator& comm, const at::Tensor& input, at::Tensor& output);

}  // namespace hccltune::torch_backend
