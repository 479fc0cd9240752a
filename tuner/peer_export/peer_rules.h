// What the peer exporters (Open MPI rules, MPICH JSON) write for a range, beyond the table's winner.
//
// A range whose winner beat the library's own choice by less than kMinGainOverDefault in the sweep (the entry's
// default_margin) keeps the library's own choice: on a loaded node a winner by a few percent is as likely noise as
// gain, and a forced algorithm that is in fact slower costs more than the few percent it might save.
//
// Thread-safety: pure functions.
#pragma once

#include "db/tuning_store.h"

namespace hccltune::exporter {

inline constexpr double kMinGainOverDefault = 0.05;

// Whether the exported file leaves `e`'s range to the library's own choice although the entry names another.
inline bool KeepsOwnChoice(const db::TunedEntry& e) { return e.default_margin < kMinGainOverDefault; }

}  // namespace hccltune::exporter
