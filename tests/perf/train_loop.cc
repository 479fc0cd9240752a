// A training-like loop for the seed's case (docs/PERFORMANCE.md, "The seed's case on the emulated cluster"): every
// step runs a fixed amount of compute (a naive fp32 matrix multiply standing in for forward + backward), then
// one gradient allreduce (sum) through the communicator with configuration "auto" — so the choice comes from
// the usual layers: HCCL_TUNE_ALGO > HCCL_ALGO > the tuned table fetched from this node's hccl-tuned > built-in
// defaults. Run it once per rank under a launcher (deploy/cluster/launch.sh, torchrun, srun):
//
//   hccltune-train-loop [--bytes 32M] [--dtype fp16] [--steps 5] [--warmup 1] [--compute-reps 8] [--json]
//
// Timing (docs/CONVENTIONS.md): each step starts after a barrier; a step's compute, allreduce and total times are
// the maximum over ranks; the printed figures are medians over the timed steps (warm-up steps not counted).
// Every step checks the reduced gradient on every rank (sampled elements, exact: integer values), so a wrong
// result fails the run (exit 3) rather than producing a fast number. Rank 0 prints one line (or JSON) with the
// configuration that ran; the other ranks print nothing unless something fails.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/api/communicator.h"
#include "runtime/common/sizes.h"
#include "runtime/common/types.h"
#include "runtime/tuning_client/tuning_client.h"

namespace hccltune {
namespace {

struct Args {
  uint64_t bytes = 32ull << 20;
  DataType dtype = DataType::kFloat16;
  int steps = 5;
  int warmup = 1;
  int compute_reps = 8;  // 128x128x128 multiplies per step (fixed work, the same for every run)
  bool json = false;
};

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "hccltune-train-loop: %s\nusage: hccltune-train-loop [--bytes SIZE] [--dtype fp16|bf16|fp32] "
               "[--steps N>=1] [--warmup N>=0] [--compute-reps N>=0] [--json]\n",
               why.c_str());
  return 2;
}

// Element values are small integers (exact in fp16, bf16 and fp32, and so are their sums over <= 64 ranks).
uint16_t IntToHalfBits(uint32_t n) {  // n < 2048
  if (n == 0) return 0;
  int e = 31 - __builtin_clz(n);
  return static_cast<uint16_t>(((e + 15) << 10) | ((n << (10 - e)) & 0x3ff));
}
uint16_t IntToBf16Bits(uint32_t n) {  // n < 256
  const float f = static_cast<float>(n);
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof(u));
  return static_cast<uint16_t>(u >> 16);
}
uint32_t ValueOf(size_t i, int rank) { return static_cast<uint32_t>(i % 8) + static_cast<uint32_t>(rank); }

void Fill(std::vector<unsigned char>& buf, DataType t, size_t count, int rank) {
  for (size_t i = 0; i < count; ++i) {
    const uint32_t v = ValueOf(i, rank);
    if (t == DataType::kFloat16) {
      const uint16_t b = IntToHalfBits(v);
      std::memcpy(&buf[i * 2], &b, 2);
    } else if (t == DataType::kBfloat16) {
      const uint16_t b = IntToBf16Bits(v);
      std::memcpy(&buf[i * 2], &b, 2);
    } else {
      const float f = static_cast<float>(v);
      std::memcpy(&buf[i * 4], &f, 4);
    }
  }
}

// The first mismatching sampled element, or -1.
int64_t Check(const std::vector<unsigned char>& buf, DataType t, size_t count, int world) {
  const size_t stride = std::max<size_t>(1, count / 4099);
  for (size_t i = 0; i < count; i += stride) {
    uint32_t sum = 0;
    for (int r = 0; r < world; ++r) sum += ValueOf(i, r);
    bool ok = false;
    if (t == DataType::kFloat16 || t == DataType::kBfloat16) {
      uint16_t b = 0;
      std::memcpy(&b, &buf[i * 2], 2);
      ok = b == (t == DataType::kFloat16 ? IntToHalfBits(sum) : IntToBf16Bits(sum));
    } else {
      float f = 0;
      std::memcpy(&f, &buf[i * 4], 4);
      ok = f == static_cast<float>(sum);
    }
    if (!ok) return static_cast<int64_t>(i);
  }
  return -1;
}

// Fixed work standing in for forward + backward: `reps` naive 128^3 multiplies. Returns a value that depends
// on every result so the compiler cannot drop it.
float Compute(int reps, std::vector<float>& a, std::vector<float>& b, std::vector<float>& c) {
  constexpr int n = 128;
  for (int r = 0; r < reps; ++r) {
    for (int i = 0; i < n; ++i) {
      for (int k = 0; k < n; ++k) {
        const float aik = a[static_cast<size_t>(i * n + k)];
        for (int j = 0; j < n; ++j) c[static_cast<size_t>(i * n + j)] += aik * b[static_cast<size_t>(k * n + j)];
      }
    }
    std::swap(a, c);
    std::fill(c.begin(), c.end(), 0.0f);
    for (float& x : a) x = x * 1e-3f + 0.5f;  // keep values bounded
  }
  return a[0];
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int Run(const Args& a) {
  InstallDaemonTuning();
  auto env = Environment::Load();
  if (!env.ok()) return std::fprintf(stderr, "hccltune-train-loop: %s\n", env.status().ToString().c_str()), 1;
  auto comm_or = Communicator::FromEnvironment(*env);
  if (!comm_or.ok()) {
    std::fprintf(stderr, "hccltune-train-loop: %s\n", comm_or.status().ToString().c_str());
    return 1;
  }
  Communicator& comm = **comm_or;
  const size_t count = a.bytes / DataTypeSize(a.dtype);
  std::vector<unsigned char> grad(a.bytes), out(a.bytes);
  std::vector<float> ma(128 * 128, 0.25f), mb(128 * 128, 0.5f), mc(128 * 128, 0.0f);
  float sink = 0;
  std::vector<double> step_ms, compute_ms, allreduce_ms;
  for (int s = 0; s < a.warmup + a.steps; ++s) {
    if (absl::Status st = comm.Barrier(); !st.ok()) {
      std::fprintf(stderr, "hccltune-train-loop: rank %d: barrier: %s\n", comm.rank(), st.ToString().c_str());
      return 1;
    }
    const double t0 = Now();
    sink += Compute(a.compute_reps, ma, mb, mc);
    Fill(grad, a.dtype, count, comm.rank());  // this step's gradients
    const double t1 = Now();
    if (absl::Status st = comm.Allreduce(grad.data(), out.data(), count, a.dtype, ReduceOp::kSum); !st.ok()) {
      std::fprintf(stderr, "hccltune-train-loop: rank %d: allreduce: %s\n", comm.rank(), st.ToString().c_str());
      return 1;
    }
    const double t2 = Now();
    if (int64_t bad = Check(out, a.dtype, count, comm.size()); bad >= 0) {
      std::fprintf(stderr,
                   "hccltune-train-loop: rank %d: step %d: element %lld of the reduced gradient is wrong (%s)\n",
                   comm.rank(), s, static_cast<long long>(bad), comm.last_config().c_str());
      return 3;
    }
    double t[3] = {(t2 - t0) * 1e3, (t1 - t0) * 1e3, (t2 - t1) * 1e3};
    double m[3] = {0, 0, 0};
    if (absl::Status st = comm.Allreduce(t, m, 3, DataType::kFloat64, ReduceOp::kMax); !st.ok()) {
      std::fprintf(stderr, "hccltune-train-loop: rank %d: timing: %s\n", comm.rank(), st.ToString().c_str());
      return 1;
    }
    if (s < a.warmup) continue;
    step_ms.push_back(m[0]);
    compute_ms.push_back(m[1]);
    allreduce_ms.push_back(m[2]);
  }
  if (comm.rank() != 0) return sink == -1.0f ? 4 : 0;  // (sink keeps the compute alive)
  auto config = comm.ResolveConfig(Collective::kAllreduce, a.dtype, a.bytes, "auto");
  const std::string cfg = config.ok() ? *config : std::string(config.status().message());
  if (a.json) {
    nlohmann::json j = {{"ranks", comm.size()},
                        {"nodes", comm.num_nodes()},
                        {"bytes", a.bytes},
                        {"dtype", DataTypeName(a.dtype)},
                        {"steps", a.steps},
                        {"configuration", cfg},
                        {"step_ms", Median(step_ms)},
                        {"compute_ms", Median(compute_ms)},
                        {"allreduce_ms", Median(allreduce_ms)}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf(
        "train-loop ranks %d nodes %d bytes %llu %s steps %d step_ms %.1f compute_ms %.1f allreduce_ms %.1f "
        "config %s\n",
        comm.size(), comm.num_nodes(), static_cast<unsigned long long>(a.bytes),
        std::string(DataTypeName(a.dtype)).c_str(), a.steps, Median(step_ms), Median(compute_ms), Median(allreduce_ms),
        cfg.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace hccltune

int main(int argc, char** argv) {
  using namespace hccltune;
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "--json") {
      a.json = true;
      continue;
    }
    if (i + 1 >= argc) return Usage(absl::StrCat(f, ": missing value"));
    const std::string v = argv[++i];
    auto to_int = [&](int lo, int* out) {
      char* end = nullptr;
      const long x = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || x < lo || x > 1000000) return false;
      *out = static_cast<int>(x);
      return true;
    };
    if (f == "--bytes") {
      auto b = ParseBytes(v);
      if (!b.ok() || *b == 0) return Usage(absl::StrCat("--bytes '", v, "': expected a size such as 32M"));
      a.bytes = *b;
    } else if (f == "--dtype") {
      auto t = ParseDataType(v);
      if (!t.ok() || (*t != DataType::kFloat16 && *t != DataType::kBfloat16 && *t != DataType::kFloat32)) {
        return Usage(absl::StrCat("--dtype '", v, "': expected fp16, bf16 or fp32"));
      }
      a.dtype = *t;
    } else if (f == "--steps") {
      if (!to_int(1, &a.steps)) return Usage(absl::StrCat("--steps '", v, "': expected an integer >= 1"));
    } else if (f == "--warmup") {
      if (!to_int(0, &a.warmup)) return Usage(absl::StrCat("--warmup '", v, "': expected an integer >= 0"));
    } else if (f == "--compute-reps") {
      if (!to_int(0, &a.compute_reps)) return Usage(absl::StrCat("--compute-reps '", v, "': expected an integer >= 0"));
    } else {
      return Usage(absl::StrCat("unknown option '", f, "'"));
    }
  }
  if (a.bytes % DataTypeSize(a.dtype) != 0) {
    return Usage(absl::StrCat("--bytes ", a.bytes, " is not a multiple of the ", DataTypeName(a.dtype), " size"));
  }
  return Run(a);
}
