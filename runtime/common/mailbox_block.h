// The payload one shared-memory mailbox exchange carries per rank: the one definition the shm transport sizes its
// mailbox slots from (runtime/transport/shm: a slot is this block plus the endpoint's header) and the built-in
// defaults derive their small-call bounds from (policies/defaults.cc, `MAILBOX`). A call whose per-rank block
// fits is one exchange.
#pragma once

#include <cstdint>

namespace hccltune {

inline constexpr uint64_t kMailboxBlockBytes = 16u << 10;

}  // namespace hccltune
