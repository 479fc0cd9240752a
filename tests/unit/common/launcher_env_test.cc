// The launcher variables: Slurm's compressed forms, Open MPI's and MPICH's variables, the rendezvous each implies,
// HCCL_TUNE_PORT_RANGE; every bad value named.
#include "runtime/common/launcher_env.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"

namespace hccltune {
namespace {

using Vars = std::map<std::string, std::string>;

TEST(LauncherEnv, SlurmTasksPerNodeCompressedForms) {
  auto a = ParseSlurmTasksPerNode("V", "2(x3),1");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, (std::vector<int>{2, 2, 2, 1}));
  auto b = ParseSlurmTasksPerNode("V", "4");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (std::vector<int>{4}));
  auto c = ParseSlurmTasksPerNode("V", "1,3(x2),2");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, (std::vector<int>{1, 3, 3, 2}));
  for (const char* bad : {"", "2(x0)", "2(3)", "2(x3", "0", "a", "2,,1", "-1"}) {
    auto r = ParseSlurmTasksPerNode("SLURM_STEP_TASKS_PER_NODE", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("SLURM_STEP_TASKS_PER_NODE='"), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find("2(x3),1"), std::string::npos) << r.status();
  }
}

TEST(LauncherEnv, FirstSlurmHost) {
  const std::pair<const char*, const char*> cases[] = {
      {"node[01-04,07]", "node01"},
      {"node[07,01-04]", "node07"},
      {"gpu5,node[1-2]", "gpu5"},
      {"rack[2-3]-n[010-012]", "rack2-n010"},
      {" vm ", "vm"},
      {"a[3]", "a3"},
  };
  for (const auto& [list, want] : cases) {
    auto h = FirstSlurmHost("V", list);
    ASSERT_TRUE(h.ok()) << list << ": " << h.status();
    EXPECT_EQ(*h, want) << list;
  }
  for (const char* bad : {"", "node[01-04", "node[]", "node[x-y]", ",a"}) {
    auto h = FirstSlurmHost("SLURM_STEP_NODELIST", bad);
    ASSERT_FALSE(h.ok()) << bad;
    EXPECT_NE(h.status().message().find("SLURM_STEP_NODELIST='"), std::string::npos) << h.status();
  }
}

TEST(LauncherEnv, PortsAndRanges) {
  EXPECT_EQ(*FirstReservedPort("V", "12000-12003"), 12000);
  EXPECT_EQ(*FirstReservedPort("V", "12005,12000"), 12005);
  EXPECT_FALSE(FirstReservedPort("SLURM_STEP_RESV_PORTS", "0-3").ok());
  EXPECT_FALSE(FirstReservedPort("SLURM_STEP_RESV_PORTS", "ports").ok());
  auto r = ParsePortRange("V", "30000-30009");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first, 30000);
  EXPECT_EQ(r->second, 30009);
  for (const char* bad : {"30009-30000", "0-10", "1-70000", "30000", "a-b", "1-2-3"}) {
    auto b = ParsePortRange("HCCL_TUNE_PORT_RANGE", bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find("HCCL_TUNE_PORT_RANGE='"), std::string::npos);
    EXPECT_NE(b.status().message().find("LO-HI"), std::string::npos);
  }
  // Every rank derives the same port; it lies in the range; different steps spread.
  std::set<int> ports;
  for (int step = 0; step < 50; ++step) {
    const int p = DerivedPort(absl::StrCat("4711.", step), 30000, 30099);
    EXPECT_EQ(p, DerivedPort(absl::StrCat("4711.", step), 30000, 30099));
    EXPECT_GE(p, 30000);
    EXPECT_LE(p, 30099);
    ports.insert(p);
  }
  EXPECT_GT(ports.size(), 30u);
  EXPECT_EQ(DerivedPort("anything", 5000, 5000), 5000);
}

TEST(LauncherEnv, OmpiHnpHost) {
  EXPECT_EQ(*OmpiHnpHost("V", "1253900288.0;tcp://192.0.2.2:36181;tcp6://[fd00::2]:38391"), "192.0.2.2");
  EXPECT_EQ(*OmpiHnpHost("V", "1.0;tcp://10.0.0.1,192.0.2.2:36181"), "10.0.0.1");
  auto bad = OmpiHnpHost("OMPI_MCA_orte_hnp_uri", "1.0;tcp6://[fd00::2]:1");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("OMPI_MCA_orte_hnp_uri='"), std::string::npos);
}

// What srun exports to task 4 of "srun -N 3 -n 7" (3, 2, 2 tasks), without reserved ports.
TEST(LauncherEnv, SlurmStepUnevenWithDerivedPort) {
  Vars v = {{"SLURM_PROCID", "4"},
            {"SLURM_NTASKS", "7"},
            {"SLURM_LOCALID", "1"},
            {"SLURM_NODEID", "1"},
            {"SLURM_STEP_TASKS_PER_NODE", "3,2(x2)"},
            {"SLURM_STEP_NODELIST", "node[07-09]"},
            {"SLURMD_NODENAME", "node08"},
            {"SLURM_JOB_ID", "812"},
            {"SLURM_STEP_ID", "3"},
            {"HCCL_TUNE_PORT_RANGE", "40000-40999"}};
  auto e = Environment::LoadFrom(v);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->launcher, "slurm");
  EXPECT_EQ(*e->rank, 4);
  EXPECT_EQ(*e->world_size, 7);
  EXPECT_EQ(*e->local_rank, 1);
  EXPECT_EQ(*e->local_world_size, 2);
  EXPECT_EQ(e->launcher_rdzv_host, "node07");
  EXPECT_EQ(*e->launcher_rdzv_port, DerivedPort("812.3", 40000, 40999));
  EXPECT_TRUE(e->port_range_set);
  EXPECT_EQ(e->port_range_lo, 40000);
  EXPECT_EQ(e->port_range_hi, 40999);
  auto unset = Environment::LoadFrom(std::map<std::string, std::string>{});
  ASSERT_TRUE(unset.ok()) << unset.status();
  EXPECT_FALSE(unset->port_range_set);  // the data listeners then keep kernel-chosen ports
  EXPECT_EQ(e->slurmd_nodename, "node08");
  EXPECT_NE(e->launcher_rdzv_origin.find("SLURM_STEP_NODELIST"), std::string::npos);
  // A reserved port wins over the derived one.
  v["SLURM_STEP_RESV_PORTS"] = "12010-12013";
  e = Environment::LoadFrom(v);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(*e->launcher_rdzv_port, 12010);
  // A node id past the list is named.
  v["SLURM_NODEID"] = "3";
  e = Environment::LoadFrom(v);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("SLURM_NODEID=3"), std::string::npos) << e.status();
  // Only --ntasks-per-node: that is the local size.
  e = Environment::LoadFrom(Vars{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_NTASKS_PER_NODE", "4"}});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(*e->local_world_size, 4);
  EXPECT_TRUE(e->launcher_rdzv_host.empty());
}

TEST(LauncherEnv, OpenMpiAndMpich) {
  auto o = Environment::LoadFrom(Vars{{"OMPI_COMM_WORLD_RANK", "1"},
                                      {"OMPI_COMM_WORLD_SIZE", "2"},
                                      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                      {"OMPI_MCA_ess_base_jobid", "1253900289"},
                                      {"OMPI_MCA_orte_hnp_uri", "1253900288.0;tcp://192.0.2.2:36181"},
                                      {"SLURM_PROCID", "0"}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->launcher, "openmpi");
  EXPECT_EQ(*o->local_world_size, 2);
  EXPECT_EQ(o->launcher_rdzv_host, "192.0.2.2");
  EXPECT_EQ(*o->launcher_rdzv_port,
            DerivedPort("1253900289", Environment::kDefaultPortRangeLo, Environment::kDefaultPortRangeHi));
  // Hydra inside an sbatch allocation: PMI_RANK and MPI_LOCALRANKID win over the batch step's SLURM_PROCID.
  auto m = Environment::LoadFrom(Vars{{"PMI_RANK", "3"},
                                      {"PMI_SIZE", "4"},
                                      {"MPI_LOCALRANKID", "3"},
                                      {"MPI_LOCALNRANKS", "4"},
                                      {"PMI_FD", "8"},
                                      {"SLURM_PROCID", "0"},
                                      {"SLURM_NTASKS", "1"}});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->launcher, "mpich");
  EXPECT_EQ(*m->rank, 3);
  EXPECT_EQ(*m->world_size, 4);
  EXPECT_EQ(*m->local_world_size, 4);
  EXPECT_EQ(*m->pmi_fd, 8);
  // Slurm's own PMI-2 sets PMI_RANK but not MPI_LOCALRANKID: that is srun.
  auto s =
      Environment::LoadFrom(Vars{{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->launcher, "slurm");
}

TEST(LauncherEnv, BadLauncherValuesNamed) {
  const std::pair<Vars, const char*> cases[] = {
      {{{"PMI_RANK", "x"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "0"}}, "PMI_RANK='x'"},
      {{{"PMI_RANK", "2"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "0"}}, "not below the world size"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_TASKS_PER_NODE", "2(x)"}},
       "SLURM_STEP_TASKS_PER_NODE='2(x)'"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_NODELIST", "n[1-2"}}, "SLURM_STEP_NODELIST='n[1-2'"},
      {{{"HCCL_TUNE_PORT_RANGE", "9-1"}}, "HCCL_TUNE_PORT_RANGE='9-1'"},
  };
  for (const auto& [vars, want] : cases) {
    auto e = Environment::LoadFrom(vars);
    ASSERT_FALSE(e.ok()) << want;
    EXPECT_NE(e.status().message().find(want), std::string::npos) << e.status();
  }
}

}  // namespace
}  // namespace hccltune

namespace hccltune {
namespace {

// docs/CONVENTIONS.md, Job id: the first launcher id set, as KIND:ID.
TEST(LauncherEnv, JobIdFromEachLauncher) {
  auto id = [](const std::map<std::string, std::string>& vars) {
    auto e = Environment::LoadFrom(vars);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? e->launcher_job_id : std::string("?");
  };
  EXPECT_EQ(id({{"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "0"}, {"RANK", "0"}, {"WORLD_SIZE", "1"}}), "slurm:4242.0");
  EXPECT_EQ(id({{"SLURM_JOB_ID", "4242"}}), "slurm:4242");
  EXPECT_EQ(id({{"OMPI_MCA_ess_base_jobid", "1253900289"}}), "openmpi:1253900289");
  EXPECT_EQ(id({{"PMIX_NAMESPACE", "prterun-node1-123@1"}}), "pmix:prterun-node1-123@1");
  EXPECT_EQ(id({{"TORCHELASTIC_RUN_ID", "abc"}}), "torchrun:abc");
  EXPECT_EQ(id({{"TORCHELASTIC_RUN_ID", "none"}, {"MASTER_ADDR", "n1"}, {"MASTER_PORT", "29500"}}),
            "torchrun:none@n1:29500");
  EXPECT_EQ(id({{"RANK", "0"}, {"WORLD_SIZE", "2"}}), "");
}

}  // namespace
}  // namespace hccltune

namespace hccltune {
namespace {

// PMIx: Open MPI's and Slurm's rendezvous goes through their PMIx server when PMIX_NAMESPACE and PMIX_RANK are
// set (the derived one is still filled in, for a build without PMIx); HCCL_TUNE_PMIX=off keeps the derived one;
// torchrun and MPICH never use it; PMIx alone is a launcher of its own.
TEST(LauncherEnv, PmixPrecedence) {
  const Vars pmix = {{"PMIX_NAMESPACE", "1211105281"}, {"PMIX_RANK", "1"}};
  auto with = [&pmix](Vars v) {
    v.insert(pmix.begin(), pmix.end());
    return v;
  };
  const Vars ompi = {{"OMPI_COMM_WORLD_RANK", "1"},
                     {"OMPI_COMM_WORLD_SIZE", "2"},
                     {"OMPI_MCA_ess_base_jobid", "1211105281"},
                     {"OMPI_MCA_orte_hnp_uri", "1211105280.0;tcp://192.0.2.2:50385"}};
  auto o = Environment::LoadFrom(with(ompi));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->launcher, "openmpi");
  EXPECT_TRUE(o->launcher_pmix);
  EXPECT_EQ(o->pmix_namespace, "1211105281");
  EXPECT_EQ(*o->pmix_rank, 1);
  EXPECT_EQ(o->launcher_rdzv_host, "192.0.2.2");  // the fallback stays
  auto plain = Environment::LoadFrom(ompi);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->launcher_pmix);
  Vars off = with(ompi);
  off["HCCL_TUNE_PMIX"] = " OFF ";
  auto o_off = Environment::LoadFrom(off);
  ASSERT_TRUE(o_off.ok()) << o_off.status();
  EXPECT_FALSE(o_off->launcher_pmix);
  off["HCCL_TUNE_PMIX"] = "auto";
  EXPECT_TRUE(Environment::LoadFrom(off)->launcher_pmix);

  // srun --mpi=pmix.
  auto s = Environment::LoadFrom(with({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_NODELIST", "vm"}}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->launcher, "slurm");
  EXPECT_TRUE(s->launcher_pmix);
  // torchrun (first) and MPICH keep their own rendezvous.
  auto t = Environment::LoadFrom(with({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "1"}}));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->launcher, "torchrun");
  EXPECT_FALSE(t->launcher_pmix);
  auto m = Environment::LoadFrom(with({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "1"}}));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->launcher, "mpich");
  EXPECT_FALSE(m->launcher_pmix);

  // PMIx alone: the rank from PMIX_RANK; the world size comes from the server later.
  auto alone = Environment::LoadFrom(pmix);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(alone->launcher, "pmix");
  EXPECT_TRUE(alone->launcher_pmix);
  EXPECT_EQ(*alone->rank, 1);
  EXPECT_FALSE(alone->world_size.has_value());
  auto alone_off = Environment::LoadFrom(Vars{{"PMIX_NAMESPACE", "ns"}, {"PMIX_RANK", "0"}, {"HCCL_TUNE_PMIX", "off"}});
  ASSERT_TRUE(alone_off.ok());
  EXPECT_FALSE(alone_off->launcher_pmix);
  // A namespace without a rank (or the reverse) is no PMIx server.
  auto half = Environment::LoadFrom(Vars{{"PMIX_NAMESPACE", "ns"}});
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(half->launcher, "");
  EXPECT_FALSE(half->launcher_pmix);
}

TEST(LauncherEnv, BadPmixValuesNamed) {
  const std::pair<Vars, const char*> cases[] = {
      {{{"HCCL_TUNE_PMIX", "on"}}, "HCCL_TUNE_PMIX='on' is invalid: expected auto (the default) or off"},
      {{{"PMIX_NAMESPACE", "ns"}, {"PMIX_RANK", "x"}}, "PMIX_RANK='x'"},
      {{{"PMIX_NAMESPACE", "ns"}, {"PMIX_RANK", "-1"}}, "PMIX_RANK='-1'"},
  };
  for (const auto& [vars, want] : cases) {
    auto e = Environment::LoadFrom(vars);
    ASSERT_FALSE(e.ok()) << want;
    EXPECT_NE(e.status().message().find(want), std::string::npos) << e.status();
  }
}

}  // namespace
}  // namespace hccltune
