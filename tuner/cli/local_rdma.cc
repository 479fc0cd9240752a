#include "tuner/cli/local_rdma.h"

#include "runtime/bootstrap/rank_table.h"

namespace hccltune::cli {

RdmaFacts LocalRdmaFacts(const Environment& env) {
  std::string device_ip;
  if (!env.rank_table_file.empty() && env.rank_id) {
    auto table = LoadRankTable(env.rank_table_file);  // a bad table is reported where the job starts from it
    if (table.ok() && *env.rank_id < table->world_size()) {
      device_ip = table->ranks[static_cast<size_t>(*env.rank_id)].device_ip;
    }
  }
  return ReadRdmaFacts(*NewLibibverbsApi(), ListInterfaces(), env.rdma.hca, device_ip);
}

}  // namespace hccltune::cli
