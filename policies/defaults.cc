// The built-in defaults as data: what `auto` runs where no override and no tuned table applies. Started from
// the seed's rules of thumb (2-8 ranks ring or double ring for bandwidth, trees from 16 ranks up, hierarchical
// across nodes) and refined with this machine's measurements (docs/PERFORMANCE.md). The first matching line
// wins; every collective ends with a catch-all line. Checked by tests: every configuration here is valid for
// its collective in the registry.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "policies/rules.h"
#include "runtime/common/mailbox_block.h"

namespace hccltune::policies {
namespace {

constexpr absl::string_view kDefaults = R"(
# collective   world  [nodes=N]  bytes    configuration
# A row without nodes= applies to any number of nodes; the selector passes over a row whose configuration the
# registry refuses for the group (hierarchical where every node has one rank) to the next that matches.
# MAILBOX is one shm mailbox block (kMailboxBlockBytes, runtime/common/mailbox_block.h: 16 KiB); `0-MAILBOX+1` is every
# call whose per-rank block fits one mailbox exchange.
# 8 ranks on 2 nodes (emulated cluster, --default-net fast; tests/perf/compare-cluster.py, 5 interleaved repetitions
# per run, docs/CLUSTER.md): what runs without these rows (one_shot, halving_doubling, ring) sends 1.8-18x the
# buffer through the busiest NIC, hierarchical 1x.
# double_binary_tree ahead of it at 4 KiB and 64 KiB in three runs (1.1-1.8x), at 1 KiB and 16 KiB in the one that
# measured them (1.9x, 2.1x); hierarchical from 128 KiB (4.0-4.6x at 256 KiB in three runs, 1.1-1.8x from 1 MiB
# in two or three, 2.9x at 128 KiB in one). At 8 B the one_shot row stays ahead.
allreduce      8        nodes=2  1K-128K  double_binary_tree
allreduce      8        nodes=2  128K-    hierarchical
# one_shot / direct up to one mailbox block (16 KiB included) for 3-8 ranks: on one node
# one mailbox exchange (runtime/transport/mailbox.h), 18-40% faster than the algorithms of several rounds. At 2
# ranks (a repeated call runs the algorithm's mailbox form): allreduce up to 2 KiB 10-45% faster
# than recursive_doubling, allgather 10-45% up to 4 KiB and even above, reducescatter 20-45% up to 16 KiB; at 3
# ranks allgather and reducescatter below 2 KiB 15-17% (tests/perf/compare-peers.sh). Alltoall `direct`
# (one exchange while the whole input fits 16 KiB, else every message at once) against the better of bruck and
# pairwise up to 16 KiB: 2 ranks 20-38% less time up to 2 KiB and even above, 3 ranks 15-27%, 4 ranks 17-52%,
# 8 ranks 50-75%; above 16 KiB at 4 ranks 3-23% up to 128 KiB and even from 256 KiB, at 8 ranks 13-43% up to
# 512 KiB, at 3 ranks pairwise ahead from 32 KiB. 5-7 ranks follow 4 and 8 unmeasured; on several nodes the same
# rows apply (as allgather's), also unmeasured.
allreduce      2        0-2049   one_shot
allreduce      3-8      0-MAILBOX+1  one_shot
# halving_doubling (it reduces out of the shm ring, input never copied first), against ring(chunk=1M)
# in two interleaved runs each: 3 ranks 1.28-1.92x faster at 16K-4M and 1.03-1.33x to 64M (recursive_doubling
# even with it to 128K); 4 ranks 1.05-1.23x at 256K-1M, even from 2M; 5 ranks 1.07-1.31x at 512K-1M, mixed at 2M;
# 8 ranks 1.17-1.70x at 32K-256K, even at 512K, slower from 1M (tests/perf/compare-configs.py). Measured on one
# node (the rows apply to any world of that size); 6-7 ranks unmeasured, they keep the ring. The 4-rank row's
# lower bound is the one_shot row's (16K) in effect.
allreduce      3        32K-     halving_doubling
allreduce      4        8K-2M    halving_doubling
allreduce      5        512K-2M  halving_doubling
allreduce      8        32K-512K halving_doubling
allreduce      1-8      0-32K    recursive_doubling
allreduce      1-8      32K-     ring(chunk=1M)
allreduce      9-64     0-64K    recursive_doubling
allreduce      9-64     64K-     halving_doubling
allreduce      65-      0-        halving_doubling
allgather      4        4M-32M   recursive_doubling
# Across nodes, 8 ranks (emulated cluster, --default-net fast; tests/perf/compare-cluster.py, 5 interleaved
# repetitions per run, docs/CLUSTER.md): direct sends (p-1)/p of the output through each rank's NIC and loses from
# 256 KiB. Each row beat direct in every run that measured it (2 x 4: three runs, 4 x 2: two): 2 x 4 the leader
# form at 256 KiB (2.6-3.1x, the fastest of all in each run), hierarchical (auto: parallel on even nodes) at 1-4
# MiB (1.1-3.4x; the fastest at 1 MiB in two runs, at 4 MiB ring or the leader form were in two), ring from 16 MiB
# (1.6-2.2x); 4 x 2 the leader form at 512 KiB-1 MiB (1.4-1.7x), ring from 4 MiB (1.15-1.8x). Mixed, so direct:
# 512 KiB on 2 x 4, 128-256 KiB on 4 x 2. Unmeasured between: 2-4 MiB on 4 x 2, 4-16 MiB on 2 x 4.
allgather      8        nodes=2  256K-512K  hierarchical(form=leader)
allgather      8        nodes=2  1M-16M     hierarchical
allgather      8        nodes=2  16M-       ring(chunk=1M)
allgather      8        nodes=4  512K-2M    hierarchical(form=leader)
allgather      8        nodes=4  2M-        ring(chunk=1M)
allgather      2-8      0-       direct
allgather      1-        0-       ring(chunk=1M)
allgatherv     1-        0-       ring(chunk=1M)
# hierarchical(form=leader) across nodes (emulated cluster, --default-net fast; tests/perf/compare-cluster.py, 5
# interleaved repetitions per run, docs/CLUSTER.md): 4 nodes x 2 ranks at 64 KiB ahead of ring(chunk=1M), what
# runs without the row, in six of seven runs (the fastest of all in five; halving_doubling in the others), behind
# at 128 KiB. On 2 nodes x 4 ranks the leader form at 256 KiB was ahead in two runs at load 8-45 and behind ring in
# three of the four runs in docs/CLUSTER.md: no row there.
reducescatter  8        nodes=4  64K-128K   hierarchical(form=leader)
reducescatter  2-8      0-MAILBOX+1  direct
reducescatter  1-8      0-16K    halving_doubling
reducescatter  1-        0-       ring(chunk=1M)
# 8 ranks on 2 nodes (emulated cluster, --default-net fast; tests/perf/compare-cluster.py, 5 interleaved repetitions
# per run, docs/CLUSTER.md): linear sends the buffer through the root node's NIC once per remote rank (4x here);
# binomial_tree ahead of it at 256 KiB and 1 MiB in both runs (2.4-4.1x). 64 KiB mixed; at 4 MiB even. On 4 nodes x 2
# ranks, two runs: binomial_tree ahead of linear at 1 MiB (2.2-2.7x); from 4 MiB chain(chunk=1M), which sends the
# buffer once through each NIC where binomial_tree (what runs there) sends it twice, 1.25-2.9x.
broadcast      8        nodes=2  256K-4M    binomial_tree
broadcast      8        nodes=4  1M-4M      binomial_tree
broadcast      8        nodes=4  4M-        chain(chunk=1M)
broadcast      1-2      0-       binomial_tree
broadcast      3        0-2M     linear
broadcast      3        2M-      chain(chunk=1M)
broadcast      4        2M-4M    chain(chunk=1M)
broadcast      4        0-       linear
broadcast      5-8      0-4M     linear
broadcast      5-8      4M-      binomial_tree
broadcast      9-       0-1M     binomial_tree
broadcast      9-       1M-      scatter_allgather
# reduce: binomial_tree (it reduces out of the shm ring, input never copied first): faster than
# reducescatter_gather at every size measured on one node, 2 and 4 ranks 64K-64M 1.4-3.0x and 1.1-1.8x, 3 and 8
# ranks 256K-16M 1.1-2.4x (tests/perf/compare-configs.py); 5-7 ranks and several nodes unmeasured. Larger worlds
# keep the bandwidth-optimal one for large buffers (a tree's root receives log2(n) whole buffers), unmeasured.
reduce         1-8      0-       binomial_tree
reduce         9-       0-256K   binomial_tree
reduce         9-       256K-    reducescatter_gather
gather         1-        0-       binomial_tree
scatter        1-        0-       binomial_tree
alltoall       2-8      0-MAILBOX+1  direct
alltoall       4-8      16K-256K direct
alltoall       1-        0-4K     bruck
alltoall       1-        4K-      pairwise
alltoallv      1-        0-       pairwise
barrier        1-8      0-       one_shot
barrier        9-        0-       dissemination
)";

}  // namespace

absl::string_view BuiltinDefaultsText() {
  static const std::string* text =
      new std::string(absl::StrReplaceAll(kDefaults, {{"MAILBOX+1", absl::StrCat(kMailboxBlockBytes + 1)}}));
  return *text;
}

const RuleSet& BuiltinDefaults() {
  static const RuleSet* set = [] {
    auto parsed = ParseRuleTable(BuiltinDefaultsText(), "built-in defaults");
    if (!parsed.ok()) {  // a defect of this file, caught by policies_test
      std::fprintf(stderr, "hccl-tune: %s\n", std::string(parsed.status().message()).c_str());
      std::abort();
    }
    return new RuleSet(*std::move(parsed));
  }();
  return *set;
}

}  // namespace hccltune::policies
