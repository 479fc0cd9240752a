#include "runtime/common/config.h"

#include <gtest/gtest.h>

#include <csignal>

namespace hccltune {
namespace {

TEST(Environment, Defaults) {
  auto e = Environment::LoadFrom(std::map<std::string, std::string>{});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->buffsize_bytes, 200u << 20);
  EXPECT_EQ(e->connect_timeout_s, 120);
  EXPECT_EQ(e->exec_timeout_s, 1836);
  EXPECT_EQ(e->mode, TuneMode::kOnline);
  EXPECT_EQ(e->log_level, LogLevel::kWarn);
  EXPECT_TRUE(e->torch_alias);
  EXPECT_TRUE(e->single_copy);
  EXPECT_FALSE(e->rank.has_value());
  EXPECT_EQ(e->launcher, "");
}

TEST(Environment, ParsesEveryVariable) {
  auto e = Environment::LoadFrom(std::map<std::string, std::string>{
      {"HCCL_ALGO", "level0:ring"},
      {"HCCL_BUFFSIZE", "64"},
      {"HCCL_CONNECT_TIMEOUT", "5"},
      {"HCCL_EXEC_TIMEOUT", "7"},
      {"HCCL_SOCKET_IFNAME", "eth1"},
      {"HCCL_TUNE_ALGO", "allreduce:0-=ring"},
      {"HCCL_TUNE_MODE", "static"},
      {"HCCL_TUNE_SAMPLE_RATE", "1"},
      {"HCCL_TUNE_LOG_LEVEL", "DEBUG"},
      {"HCCL_TUNE_DEVICE", "3"},
      {"HCCL_TUNE_MASTER_PORT", "29600"},
      {"HCCL_TUNE_STORE", "file:///tmp/x"},
      {"HCCL_TUNE_TABLE_VERSION", "12"},
      {"HCCL_TUNE_TORCH_ALIAS", "0"},
      {"HCCL_TUNE_SINGLE_COPY", "Off"},
      {"HCCL_TUNE_NT_STORES", "16M"},
      {"HCCL_TUNE_HUGE_PAGES", "8M"},
      {"HCCL_TUNE_THP", "6M"},
      {"RANK", "1"},
      {"WORLD_SIZE", "4"},
      {"LOCAL_RANK", "1"},
      {"MASTER_ADDR", "127.0.0.1"},
      {"MASTER_PORT", "29500"},
  });
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->buffsize_bytes, 64u << 20);
  EXPECT_EQ(e->connect_timeout_s, 5);
  EXPECT_EQ(e->exec_timeout_s, 7);
  EXPECT_EQ(e->mode, TuneMode::kStatic);
  EXPECT_DOUBLE_EQ(e->sample_rate, 1.0);
  EXPECT_EQ(e->log_level, LogLevel::kDebug);
  EXPECT_EQ(*e->device, 3);
  EXPECT_EQ(*e->master_port, 29600);
  EXPECT_EQ(*e->table_version, 12);
  EXPECT_FALSE(e->torch_alias);
  EXPECT_FALSE(e->single_copy);
  EXPECT_EQ(e->nt_stores_bytes, 16u << 20);
  EXPECT_EQ(e->huge_pages_bytes, 8u << 20);
  EXPECT_EQ(e->thp_bytes, 6u << 20);
  EXPECT_EQ(e->launcher, "torchrun");
  EXPECT_EQ(*e->rank, 1);
  EXPECT_EQ(*e->world_size, 4);
  EXPECT_EQ(*e->launcher_master_port, 29500);
}

TEST(Environment, AutoOffOrSize) {
  // HCCL_TUNE_NT_STORES, HCCL_TUNE_HUGE_PAGES and HCCL_TUNE_THP: absent or "auto" is the default, "off" never, a size
  // itself.
  const struct {
    const char* var;
    uint64_t Environment::*field;
    uint64_t automatic;
  } vars[] = {{"HCCL_TUNE_NT_STORES", &Environment::nt_stores_bytes, Environment::kDefaultNtStoresBytes},
              {"HCCL_TUNE_HUGE_PAGES", &Environment::huge_pages_bytes, Environment::kDefaultHugePagesBytes},
              {"HCCL_TUNE_THP", &Environment::thp_bytes, Environment::kDefaultThpBytes}};
  for (const auto& v : vars) {
    const std::pair<const char*, uint64_t> cases[] = {
        {nullptr, v.automatic}, {" OFF ", kUnbounded}, {"auto", v.automatic}, {"0", kUnbounded}, {"3m", 3u << 20}};
    for (const auto& [value, want] : cases) {
      std::map<std::string, std::string> m;
      if (value != nullptr) m[v.var] = value;
      auto e = Environment::LoadFrom(m);
      ASSERT_TRUE(e.ok()) << v.var << "=" << (value ? value : "(unset)") << ": " << e.status();
      EXPECT_EQ((*e).*(v.field), want) << v.var << "=" << (value ? value : "(unset)");
    }
  }
}

TEST(Environment, SingleCopyAutoOffOrTheSmallestMessage) {
  const struct {
    const char* value;
    bool on;
    uint64_t min_bytes;  // 0: measured at init
  } cases[] = {{nullptr, true, 0}, {"auto", true, 0},        {"on", true, 0},         {"off", false, 0},
               {"0", false, 0},    {"64K", true, 64u << 10}, {" 4m ", true, 4u << 20}};
  for (const auto& c : cases) {
    std::map<std::string, std::string> m;
    if (c.value != nullptr) m["HCCL_TUNE_SINGLE_COPY"] = c.value;
    auto e = Environment::LoadFrom(m);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(e->single_copy, c.on) << (c.value ? c.value : "(unset)");
    EXPECT_EQ(e->single_copy_min_bytes, c.min_bytes) << (c.value ? c.value : "(unset)");
  }
}

TEST(Environment, OnlyAnAutomaticNtStoresThresholdFollowsTheCache) {
  // Unset or auto: the communicator may lower the reductions' threshold to the cache's share; an explicit size or
  // off (even 32M, the default's value) is taken for every collective as written.
  const std::pair<const char*, bool> cases[] = {{nullptr, true}, {" Auto ", true}, {"32M", false}, {"off", false}};
  for (const auto& [value, want] : cases) {
    std::map<std::string, std::string> m;
    if (value != nullptr) m["HCCL_TUNE_NT_STORES"] = value;
    auto e = Environment::LoadFrom(m);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(e->nt_stores_auto, want) << (value ? value : "(unset)");
  }
}

TEST(Environment, LauncherPrecedence) {
  auto ompi = Environment::LoadFrom(std::map<std::string, std::string>{
      {"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "3"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  ASSERT_TRUE(ompi.ok());
  EXPECT_EQ(ompi->launcher, "openmpi");
  EXPECT_EQ(*ompi->rank, 2);
  auto slurm = Environment::LoadFrom(
      std::map<std::string, std::string>{{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}});
  ASSERT_TRUE(slurm.ok());
  EXPECT_EQ(slurm->launcher, "slurm");
  EXPECT_EQ(*slurm->world_size, 8);
  EXPECT_EQ(*slurm->local_rank, 1);
}

TEST(Environment, BadValuesNameVariableValueAndAccepted) {
  struct Case {
    const char* var;
    const char* value;
    const char* accepted;
  } cases[] = {
      {"HCCL_BUFFSIZE", "0", "an integer from 1"},
      {"HCCL_BUFFSIZE", "lots", "an integer from 1"},
      {"HCCL_CONNECT_TIMEOUT", "-3", "an integer from 1"},
      {"HCCL_TUNE_MODE", "sometimes", "off, static or online"},
      {"HCCL_TUNE_SAMPLE_RATE", "2", "from 0 to 1"},
      {"HCCL_TUNE_LOG_LEVEL", "loud", "error, warn, info, debug or trace"},
      {"HCCL_TUNE_MASTER_PORT", "70000", "to 65535"},
      {"HCCL_TUNE_STORE", "/tmp/x", "file:///"},
      {"HCCL_TUNE_STORE", "tcp://127.0.0.1:99999", "PORT from 1 to 65535"},
      {"HCCL_TUNE_STORE", "tcp://127.0.0.1:0", "PORT from 1 to 65535"},
      {"HCCL_TUNE_STORE", "tcp://127.0.0.1", "PORT from 1 to 65535"},
      {"HCCL_TUNE_STORE", "tcp://:29500", "PORT from 1 to 65535"},
      {"HCCL_TUNE_TORCH_ALIAS", "maybe", "0 or 1"},
      {"HCCL_TUNE_SINGLE_COPY", "yes", "auto, off or the smallest message"},
      {"HCCL_TUNE_SINGLE_COPY", "-4K", "auto, off or the smallest message"},
      {"HCCL_TUNE_NT_STORES", "lots", "auto, off or a call size"},
      {"HCCL_TUNE_NT_STORES", "0B", "auto, off or a call size"},
      {"HCCL_TUNE_HUGE_PAGES", "always", "auto, off or an allocation size"},
      {"HCCL_TUNE_THP", "madvise", "auto, off or a buffer size"},
      {"HCCL_TUNE_FETCH_TIMEOUT_MS", "61000", "an integer from 0 to 60000"},
      {"HCCL_TUNE_KILL_GRACE", "-1", "an integer from 0 to 3600"},
      {"HCCL_TUNE_KILL_GRACE", "2.5", "an integer from 0 to 3600"},
      {"HCCL_TUNE_KILL_GRACE", "3601", "an integer from 0 to 3600"},
      {"HCCL_TUNE_FR_ENTRIES", "-1", "an integer from 0 to 1048576"},
      {"HCCL_TUNE_FR_ENTRIES", "1048577", "an integer from 0 to 1048576"},
      {"HCCL_TUNE_FR_SIGNAL", "SIGKILL", "SIGUSR1, SIGUSR2 or off"},
      {"HCCL_TUNE_FR_SIGNAL", "10", "SIGUSR1, SIGUSR2 or off"},
      {"RANK", "x", "an integer"},
  };
  for (const auto& c : cases) {
    auto e = Environment::LoadFrom(std::map<std::string, std::string>{{c.var, c.value}});
    ASSERT_FALSE(e.ok()) << c.var << "=" << c.value;
    const std::string msg(e.status().message());
    EXPECT_NE(msg.find(c.var), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.value), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.accepted), std::string::npos) << msg;
  }
  for (const char* store : {"tcp://127.0.0.1:1", "tcp://node-0:65535"}) {
    auto ok = Environment::LoadFrom(std::map<std::string, std::string>{{"HCCL_TUNE_STORE", store}});
    ASSERT_TRUE(ok.ok()) << store << ": " << ok.status();
    EXPECT_EQ(ok->store, store);
  }
  auto e = Environment::LoadFrom(std::map<std::string, std::string>{{"RANK", "4"}, {"WORLD_SIZE", "4"}});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("not below the world size 4"), std::string::npos);
}

// The torch backend reads HCCL_TUNE_TORCH_ALIAS alone: a bad value elsewhere must not drop the `hccl` name.
TEST(Environment, TorchAliasIsReadAlone) {
  auto from = [](std::map<std::string, std::string> vars) {
    return Environment::LoadTorchAliasFrom([vars](const std::string& name) -> std::optional<std::string> {
      auto it = vars.find(name);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    });
  };
  auto on = from({{"HCCL_EXEC_TIMEOUT", "abc"}});
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(*on);
  auto off = from({{"HCCL_EXEC_TIMEOUT", "abc"}, {"HCCL_TUNE_TORCH_ALIAS", " Off "}});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(*off);
  auto bad = from({{"HCCL_TUNE_TORCH_ALIAS", "maybe"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(
      bad.status().message(),
      Environment::LoadFrom(std::map<std::string, std::string>{{"HCCL_TUNE_TORCH_ALIAS", "maybe"}}).status().message());
}

TEST(Environment, FetchTimeout) {
  auto d = Environment::LoadFrom(std::map<std::string, std::string>{});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->fetch_timeout_ms, 2000);
  auto e = Environment::LoadFrom(std::map<std::string, std::string>{{"HCCL_TUNE_FETCH_TIMEOUT_MS", "500"}});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->fetch_timeout_ms, 500);
}

TEST(Environment, KillGrace) {
  auto d = Environment::LoadFrom(std::map<std::string, std::string>{});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->kill_grace_s, 10);
  for (const auto& [text, seconds] : std::vector<std::pair<std::string, int>>{{"0", 0}, {" 3 ", 3}, {"3600", 3600}}) {
    auto e = Environment::LoadFrom(std::map<std::string, std::string>{{"HCCL_TUNE_KILL_GRACE", text}});
    ASSERT_TRUE(e.ok()) << text << ": " << e.status();
    EXPECT_EQ(e->kill_grace_s, seconds) << text;
  }
}

TEST(Environment, FlightRecorder) {
  auto d = Environment::LoadFrom(std::map<std::string, std::string>{});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->fr_entries, 2048u);
  EXPECT_EQ(d->fr_dump_dir, "");
  EXPECT_EQ(d->fr_signal, 0);
  auto e = Environment::LoadFrom(std::map<std::string, std::string>{
      {"HCCL_TUNE_FR_ENTRIES", "0"}, {"HCCL_TUNE_FR_DUMP_DIR", " /var/tmp/fr "}, {"HCCL_TUNE_FR_SIGNAL", "usr2"}});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->fr_entries, 0u);
  EXPECT_EQ(e->fr_dump_dir, "/var/tmp/fr");
  EXPECT_EQ(e->fr_signal, SIGUSR2);
  for (const auto& [text, signo] :
       std::vector<std::pair<std::string, int>>{{"SIGUSR1", SIGUSR1}, {"USR1", SIGUSR1}, {"off", 0}}) {
    auto f = Environment::LoadFrom(std::map<std::string, std::string>{{"HCCL_TUNE_FR_SIGNAL", text}});
    ASSERT_TRUE(f.ok()) << text << ": " << f.status();
    EXPECT_EQ(f->fr_signal, signo) << text;
  }
}

TEST(Environment, TestDelayHook) {
  auto e = Environment::LoadFrom(std::map<std::string, std::string>{
      {"HCCL_TUNE_TEST_DELAY", "allreduce:ring=200us,ring(chunk=64K)=2ms/allgather:one_shot=1s"}});
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->test_delays.size(), 3u);
  EXPECT_EQ(e->test_delays[0].collective, Collective::kAllreduce);
  EXPECT_EQ(e->test_delays[0].match, "ring");
  EXPECT_DOUBLE_EQ(e->test_delays[0].delay_us, 200);
  EXPECT_EQ(e->test_delays[1].match, "ring(chunk=64K,channels=1,link=auto)");  // canonical
  EXPECT_DOUBLE_EQ(e->test_delays[1].delay_us, 2000);
  EXPECT_EQ(e->test_delays[2].collective, Collective::kAllgather);
  EXPECT_DOUBLE_EQ(e->test_delays[2].delay_us, 1e6);
  for (const char* bad : {"allreduce=ring=1ms", "allreduce:ring=1", "warp:ring=1ms", "allreduce:ring=-1ms",
                          "allreduce:ring", "allreduce:ring=20s", "allreduce:rng(=1ms"}) {
    auto b = Environment::LoadFrom(std::map<std::string, std::string>{{"HCCL_TUNE_TEST_DELAY", bad}});
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find("HCCL_TUNE_TEST_DELAY"), std::string::npos) << b.status();
  }
}

}  // namespace
}  // namespace hccltune
