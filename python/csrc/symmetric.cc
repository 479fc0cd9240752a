#include "python/csrc/symmetric.h"

#include <string>

namespace hccltune::torch_backend {

at::Tensor AllocSymmetricTensor(const c10::intrusive_ptr<ProcessGroupHcclTune>& pg, int64_t nbytes) {
  TORCH_CHECK(nbytes > 0, "hccltune: alloc_symmetric: nbytes must be positive, got ", nbytes);
  absl::StatusOr<void*> p = pg->communicator().AllocSymmetric(static_cast<size_t>(nbytes));
  TORCH_CHECK(p.ok(), "hccltune: ", std::string(p.status().message()));
  // The deleter keeps only a weak reference: a tensor that outlives its group must not keep the group alive.
  c10::weak_intrusive_ptr<ProcessGroupHcclTune> weak(pg);
  auto release = [weak](void* data) mutable {
    if (c10::intrusive_ptr<ProcessGroupHcclTune> alive = weak.lock()) {
      (void)alive->communicator().FreeSymmetric(data);
    }
  };
  return torch::from_blob(*p, {nbytes}, release, torch::TensorOptions().dtype(torch::kUInt8));
}

}  // namespace hccltune::torch_backend
