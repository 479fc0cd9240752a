#include "tuner/bench/bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tuner/bench/call.h"
#include "tuner/bench/check.h"

namespace hccltune::bench {
namespace {

// Applies --link to a configuration string that has a link parameter.
absl::StatusOr<std::string> WithLink(const std::string& config, const std::string& link) {
  if (link.empty()) return config;
  auto c = Configuration::Parse(config);
  if (!c.ok()) return c.status();
  auto l = ParseLink(link);
  if (!l.ok()) return l.status();
  if (c->Has(ParamKind::kLink)) c->link = *l;
  return c->ToString();
}

}  // namespace

absl::StatusOr<std::vector<BenchRow>> RunBench(Communicator& comm, const BenchOptions& o) {
  const int n = comm.size();
  if (o.min_bytes > o.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("--min-bytes ", o.min_bytes, " is above --max-bytes ", o.max_bytes));
  }
  std::vector<std::string> configs;
  if (o.algo == "all") {
    for (const std::string& a : comm.ValidAlgorithms(o.collective)) {
      auto d = Configuration::Default(a);
      if (!d.ok()) return d.status();
      configs.push_back(d->ToString());
    }
    if (configs.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("no algorithm of ", CollectiveName(o.collective), " applies to ", n, " ranks here"));
    }
  } else {
    configs.push_back(o.algo);
  }
  std::vector<BenchRow> rows;
  std::vector<uint64_t> sizes;
  for (uint64_t b = std::max<uint64_t>(o.min_bytes, 0); b <= o.max_bytes; b = b == 0 ? 1 : b * 2) {
    sizes.push_back(b);
    if (b == 0 && o.max_bytes == 0) break;
  }
  // One pair of buffers for the largest size, reused by every size (as the peers' benchmark does: fresh
  // allocations per size put each size on different, freshly faulted pages, which moved large-size times by
  // ~10% between runs).
  const size_t es = DataTypeSize(o.dtype);
  auto send_bytes = [&](size_t count) {
    const CheckCase cc{o.collective, o.dtype, o.op, comm.rank(), n, o.root, count};
    return std::max<size_t>(1, std::max(SendElements(cc), count) * es);
  };
  auto recv_bytes = [&](size_t count) {
    const CheckCase cc{o.collective, o.dtype, o.op, comm.rank(), n, o.root, count};
    return std::max<size_t>(1, std::max(RecvElements(cc), count * static_cast<size_t>(n)) * es);
  };
  Buffers b;
  for (uint64_t bytes : sizes) {
    const size_t count = CountFor(o.collective, bytes, o.dtype, n);
    b.send.resize(std::max(b.send.size(), send_bytes(count)));
    b.recv.resize(std::max(b.recv.size(), recv_bytes(count)));
  }
  // --symmetric: the same sizes from symmetric memory, freed when the bench ends (also on errors).
  std::vector<void*> symmetric;
  struct Release {
    Communicator& comm;
    std::vector<void*>& regions;
    ~Release() {
      for (void* p : regions) (void)comm.FreeSymmetric(p);
    }
  } release{comm, symmetric};
  if (o.symmetric) {
    for (ByteBuffer* buf : {&b.send, &b.recv}) {
      absl::StatusOr<void*> p = comm.AllocSymmetric(buf->size());
      if (!p.ok()) return p.status();
      symmetric.push_back(*p);
      buf->View(static_cast<uint8_t*>(*p), buf->size());
    }
  }
  for (uint64_t bytes : sizes) {
    const size_t count = CountFor(o.collective, bytes, o.dtype, n);
    CheckCase cc{o.collective, o.dtype, o.op, comm.rank(), n, o.root, count};
    b.counts.clear();
    b.displs.clear();
    for (int r = 0; r < n; ++r) {
      b.counts.push_back(count);
      b.displs.push_back(static_cast<size_t>(r) * count);
    }
    for (const std::string& cfg0 : configs) {
      std::string cfg = cfg0;
      if (cfg == "auto") {
        auto resolved = comm.ResolveConfig(o.collective, o.dtype, bytes, "auto");
        if (!resolved.ok()) return resolved.status();
        cfg = o.link.empty() ? "auto" : *resolved;
      }
      auto linked = WithLink(cfg, o.link);
      if (!linked.ok()) return linked.status();
      CallOptions co;
      co.config = *linked;
      BenchRow row;
      row.collective = std::string(CollectiveName(o.collective));
      row.ranks = n;
      row.bytes = bytes;
      // Broadcast is timed in place, like MPI_Bcast in the peers' benchmark (and torch's broadcast); --check
      // verifies the out-of-place call first, then the in-place one.
      const CallSpec spec{o.collective, o.dtype, o.op, o.root, o.collective == Collective::kBroadcast};
      if (o.check) {
        FillInput(cc, b.send.data());
        std::fill(b.recv.begin(), b.recv.end(), uint8_t{0xcd});
        CallSpec out_of_place = spec;
        out_of_place.in_place = false;
        if (absl::Status s = Call(comm, out_of_place, count, b, co); !s.ok()) return s;
        if (o.collective != Collective::kSendRecv) {
          row.error = Verify(cc, b.recv.data());
        } else if (comm.rank() == 0 && n > 1 &&
                   std::memcmp(b.recv.data(), b.send.data(), count * DataTypeSize(o.dtype)) != 0) {
          row.error = "sendrecv: rank 0 got back different bytes than it sent to rank 1";
        }
        if (spec.in_place && row.error.empty()) {
          std::fill(b.recv.begin(), b.recv.end(), uint8_t{0xcd});
          if (comm.rank() == o.root) std::memcpy(b.recv.data(), b.send.data(), count * DataTypeSize(o.dtype));
          if (absl::Status s = Call(comm, spec, count, b, co); !s.ok()) return s;
          row.error = Verify(cc, b.recv.data());
          if (!row.error.empty()) row.error = "in place: " + row.error;
        }
        row.checked = true;
      } else if (spec.in_place && comm.rank() == o.root) {
        std::memcpy(b.recv.data(), b.send.data(), count * DataTypeSize(o.dtype));
      }
      // Adaptive counts as in the peers' benchmark (the MPI benchmark compare-peers.sh runs): 200 iterations below
      // 1 MiB, 40 below 16 MiB, 10 above, after 5 warm-up calls.
      const int iters = o.iters > 0 ? o.iters : (bytes < (1u << 20) ? 200 : bytes < (16u << 20) ? 40 : 10);
      const int warmup = o.warmup > 0 ? o.warmup : 5;
      std::vector<double> durations;
      CallOptions barrier_opt;
      for (int it = 0; it < warmup + iters; ++it) {
        if (absl::Status s = comm.Barrier(barrier_opt); !s.ok()) return s;
        const auto t0 = std::chrono::steady_clock::now();
        if (absl::Status s = Call(comm, spec, count, b, co); !s.ok()) return s;
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        if (it >= warmup) durations.push_back(us);
      }
      // Point-to-point has no algorithm: it runs over the default link.
      row.algo = o.collective == Collective::kSendRecv ? std::string("p2p(link=auto)") : comm.last_config();
      // Time of an iteration = max over ranks.
      std::vector<double> maxed(durations.size());
      if (absl::Status s = comm.Allreduce(durations.data(), maxed.data(), durations.size(), DataType::kFloat64,
                                          ReduceOp::kMax, barrier_opt);
          !s.ok()) {
        return s;
      }
      std::sort(maxed.begin(), maxed.end());
      row.time_us = maxed.empty() ? 0 : maxed[maxed.size() / 2];
      row.algbw = row.time_us > 0 ? static_cast<double>(bytes) / row.time_us / 1e3 : 0;
      row.busbw = row.algbw * BusBandwidthFactor(o.collective, n);
      rows.push_back(row);
    }
  }
  return rows;
}

std::string FormatHeader() {
  return absl::StrFormat("%-13s %5s %12s %-60s %11s %8s %8s", "coll", "ranks", "bytes", "algo", "time_us", "algbw",
                         "busbw");
}

std::string FormatRow(const BenchRow& r) {
  return absl::StrFormat("%-13s %5d %12d %-60s %11.2f %8.3f %8.3f%s", r.collective, r.ranks, r.bytes, r.algo, r.time_us,
                         r.algbw, r.busbw, r.checked ? (r.error.empty() ? "  check ok" : "  CHECK FAILED") : "");
}

}  // namespace hccltune::bench
