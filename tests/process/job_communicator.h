// The job programs of the process tests (online_job, stall_job, doctor_job): this rank's communicator from its
// environment (RANK, WORLD_SIZE, HCCL_TUNE_STORE or a launcher's variables).
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "runtime/api/communicator.h"

namespace hccltune::testjobs {

// The communicator, or null after printing why on stderr.
inline std::unique_ptr<Communicator> CommunicatorFromEnvironment() {
  auto env = Environment::Load();
  if (!env.ok()) {
    std::fprintf(stderr, "%s\n", std::string(env.status().message()).c_str());
    return nullptr;
  }
  auto comm = Communicator::FromEnvironment(*env);
  if (!comm.ok()) {
    std::fprintf(stderr, "%s\n", std::string(comm.status().message()).c_str());
    return nullptr;
  }
  return *std::move(comm);
}

}  // namespace hccltune::testjobs
