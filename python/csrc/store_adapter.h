// Adapts the c10d::Store that torch hands a backend to hccl-tune's Store interface, so the communicator
// rendezvouses through torch's own store (no second rendezvous port). Wait/Get poll check() rather than block in
// the store (a blocking TCPStore wait holds the client's lock and stalls the process's other threads).
//
// Thread-safety: as the wrapped c10d::Store (torch's TCPStore, FileStore, HashStore and PrefixStore are safe
// for concurrent use).
#pragma once

#include <memory>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "runtime/bootstrap/store.h"

namespace hccltune::torch_backend {

std::shared_ptr<Store> AdaptC10dStore(c10::intrusive_ptr<c10d::Store> store);

}  // namespace hccltune::torch_backend
