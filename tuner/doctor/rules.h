// The doctor's rules, one per step of the troubleshooting chain (tuner/doctor/dump_doctor.h lists them); each
// looks at one communicator's dumps (sorted by rank) and returns its findings, none when it sees nothing.
//
// Thread-safety: pure functions; DiagnoseAlgorithms and DiagnoseLinks only read the store.
#pragma once

#include <optional>
#include <vector>

#include "tuner/doctor/dump_doctor.h"
#include "tuner/doctor/dump_model.h"

namespace hccltune::doctor {

// (g) hang_rule.cc
std::optional<Finding> DiagnoseHang(const Comm& comm, double hang_after_s);
std::optional<Finding> DiagnoseMismatch(const Comm& comm);
// (b) algorithm_rule.cc
std::vector<Finding> DiagnoseAlgorithms(const Comm& comm, const DoctorOptions& options);
// (c) links_rule.cc
std::vector<Finding> DiagnoseLinks(const Comm& comm, const DoctorOptions& options);
// (a) and (f) timing_rules.cc
std::optional<Finding> DiagnoseExposure(const Comm& comm);
std::optional<Finding> DiagnoseStraggler(const Comm& comm);
// (d) and (e) host_rules.cc
std::optional<Finding> DiagnoseBuffers(const Comm& comm);
std::vector<Finding> DiagnoseBinding(const Comm& comm);

}  // namespace hccltune::doctor
