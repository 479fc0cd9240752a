#!/usr/bin/env bash
# One invocation: hccl-tune bench and the peer baselines (Open MPI, MPICH, torch's Gloo; see PEERS_DIR) for the
# same collective, ranks and sizes, interleaved repetition by repetition (ours, ompi, mpich, gloo, ours, ...),
# plus the machine's copy bandwidth measured in the same run (memcpy of 64 MiB on 1 and 2 threads, before and
# after). Prints one table: the median over repetitions of each figure (each figure itself the median of its
# iterations, time = max over ranks, docs/CONVENTIONS.md), the ratio best-peer-time / our-time (> 1: we are faster),
# our busbw, and our fraction of the memory bound.
#
# Usage: tests/perf/compare-peers.sh [-c COLL] [-n RANKS] [-l MIN_BYTES] [-h MAX_BYTES] [-r REPS]
#                                    [-p "ompi mpich gloo"] [-a ALGO] [-b BUILD_DIR] [-B BASE_BUILD_DIR] [-S] [-F] [-A]
#                                    [-P PEERS_DIR] [-L LINK] [-O LINK] [-T | -U]
#   PEERS_DIR (or the environment's PEERS_DIR) the peer benchmarks, which are not part of this repository: a folder
#        with run-peers.sh COLL RANKS MIN_BYTES MAX_BYTES PEER that prints `coll ranks bytes time_us algbw busbw`
#        per size for PEER = ompi | mpich | gloo, each timed as `hccl-tune bench` times (docs/CONVENTIONS.md, Timing)
#   COLL allreduce | allgather | reducescatter | broadcast | alltoall   (default allreduce, 2 ranks, 8..64M, 5 reps)
#   PEERS also `ompi:N`: Open MPI with its coll_tuned algorithm N forced for COLL (OMPI_MCA_coll_tuned_use_dynamic_rules=1
#        OMPI_MCA_coll_tuned_<coll>_algorithm=N), a column of its own
#   ALGO our configuration (default auto; compare auto with the peers' defaults, a forced configuration with
#        Open MPI's forced algorithms)
#   -F   best against best: add every Open MPI forced algorithm of COLL as a peer (ompi:1 ... ompi:K), so best_peer
#        and ratio are against Open MPI's fastest algorithm at each size, in the same repetitions
#   -A   our best too: also run `hccl-tune bench --algo all` (every candidate configuration of COLL) in the same
#        repetitions; adds ours_best (the fastest of auto and every candidate, by median) and best_ratio = best
#        peer's time / that — with -F, best against best
#   BASE_BUILD_DIR another build (e.g. a worktree of the previous commit) run in the same repetitions, before ours
#        in even repetitions and after it in odd ones; adds its time and vs_base = base time / ours (> 1: faster now)
#   LINK our link for every configuration (`hccl-tune bench --link`: shm, tcp, tcp@SUBNET, ucx; default: auto)
#   -O   also run ours over this other link in the same repetitions (column ours@LINK; vs_link = its time / ours:
#        > 1: LINK is slower than -L's), e.g. -L ucx -O tcp
#   -T   Open MPI over TCP only (OMPI_MCA_pml=ob1, OMPI_MCA_btl=tcp,self: `--mca btl tcp,self`), for -L tcp
#   -U   Open MPI over UCX (`--mca pml ucx`, with pml_ucx_tls and pml_ucx_devices `any`), for -L ucx; both take
#        UCX_TLS from the environment
#   -S   also time ours with buffers from symmetric memory (`hccl-tune bench --symmetric`, as a program that
#        allocates with hccltune_mem_alloc; the peers keep their ordinary buffers) in the same repetitions: adds
#        its time and sym_ratio = best peer time / symmetric time
# The bound: a collective over n ranks of S bytes must at least read every rank's input and write every rank's
# output once — about n*S bytes copied for allreduce, allgather, reducescatter and broadcast — so with B the
# 2-thread memcpy rate, algbw <= B/n; the table shows it as busbw (times the collective's busbw factor).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
coll=allreduce n=2 lo=8 hi=67108864 reps=5 peers="ompi mpich gloo" algo=auto build=$root/build base= sym= forced= all=
peers_dir=${PEERS_DIR:-} link= ompi_tcp= ompi_ucx= other=
while getopts c:n:l:h:r:p:a:b:B:P:L:O:TUSFA o; do
  case $o in
    c) coll=$OPTARG ;; n) n=$OPTARG ;; l) lo=$OPTARG ;; h) hi=$OPTARG ;; r) reps=$OPTARG ;;
    p) peers=$OPTARG ;; a) algo=$OPTARG ;; b) build=$OPTARG ;; B) base=$OPTARG ;; P) peers_dir=$OPTARG ;; L) link=$OPTARG ;; O) other=$OPTARG ;; T) ompi_tcp=1 ;; U) ompi_ucx=1 ;; S) sym=1 ;; F) forced=1 ;; A) all=1 ;;
    *) sed -n '2,38p' "$0"; exit 2 ;;
  esac
done
# Open MPI 4.1's coll_tuned parameter and algorithm count per collective (ompi_info --param coll tuned --level 9).
case $coll in
  allreduce) ompi_param=allreduce ompi_algs=6 ;;
  allgather) ompi_param=allgather ompi_algs=$((n == 2 ? 6 : 5)) ;;  # 6, two_proc, is for 2 ranks only
  reducescatter) ompi_param=reduce_scatter_block ompi_algs=4 ;;
  broadcast) ompi_param=bcast ompi_algs=9 ;;
  alltoall) ompi_param=alltoall ompi_algs=5 ;;
  *) ompi_param= ompi_algs=0 ;;
esac
if [[ -n $forced ]]; then
  for ((a = 1; a <= ompi_algs; a++)); do peers+=" ompi:$a"; done
fi
[[ -n $peers_dir && -x $peers_dir/run-peers.sh ]] || {
  echo "compare-peers.sh: no peer benchmarks: pass -P DIR or PEERS_DIR=DIR, a folder with an executable" \
    "run-peers.sh (got '${peers_dir}')" >&2
  exit 2
}
tune=$build/tuner/hccl-tune
kbench=$build/tests/perf/hccltune-kernels-bench
[[ -x $tune ]] || { echo "no $tune: build first" >&2; exit 2; }
[[ -x $kbench ]] || { echo "no $kbench: build with HCCL_TUNE_BUILD_BENCHMARKS=ON" >&2; exit 2; }
[[ -z $base || -x $base/tuner/hccl-tune ]] || { echo "no $base/tuner/hccl-tune" >&2; exit 2; }
out=$(mktemp -d /tmp/compare-peers.XXXXXX)
trap 'rm -rf "$out"' EXIT

membw() {  # prints "B1 B2" in GB/s: memcpy 64 MiB on one thread and on two
  "$kbench" --benchmark_filter='BM_Memcpy/67108864' --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_format=json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)["benchmarks"]
one = [b["bytes_per_second"] for b in d if b.get("aggregate_name") == "median" and "threads:2" not in b["name"]]
two = [b["bytes_per_second"] for b in d if b.get("aggregate_name") == "median" and "threads:2" in b["name"]]
print(f"{one[0]/1e9:.2f} {two[0]/1e9:.2f}")'
}

echo "# $(date -u +%FT%TZ) $coll ranks=$n bytes=$lo..$hi reps=$reps ours=$algo${link:+ link=$link}${ompi_tcp:+ ompi=tcp,self}${ompi_ucx:+ ompi=pml_ucx UCX_TLS=${UCX_TLS:-all}}${other:+ also=$other} peers=[$peers]${all:+ ours_best=all}${base:+ base=$base}${sym:+ symmetric huge_pages=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)} load=$(cut -d' ' -f1-3 /proc/loadavg)" >&2
bench() {  # WHO BINARY REP [BENCH ARGS...]; WHO `all` runs every candidate configuration instead of ALGO
  local a=$algo l=$link
  [[ $1 == all ]] && a=all
  [[ $1 == ours@* ]] && l=${1#ours@}
  "$2" bench --coll "$coll" --ranks "$n" --min-bytes "$lo" --max-bytes "$hi" --algo "$a" ${l:+--link "$l"} "${@:4}" 2>&1 |
    awk -v rep="$3" -v who="$1" '$1 == "'"$coll"'" && $3 ~ /^[0-9]+$/ {
      print (who == "all" ? "all:" $4 : who), rep, $3, $5, $4}' >>"$out/rows" || true
}
cut -d' ' -f1-3 /proc/loadavg >"$out/load.0"
membw >"$out/mem.0"
for ((r = 0; r < reps; r++)); do
  echo "# repetition $((r + 1))/$reps" >&2
  if [[ -n $base ]] && ((r % 2 == 0)); then bench base "$base/tuner/hccl-tune" "$r"; fi
  bench ours "$tune" "$r"
  if [[ -n $other ]]; then bench "ours@$other" "$tune" "$r"; fi
  if [[ -n $sym ]]; then bench sym "$tune" "$r" --symmetric; fi
  if [[ -n $all ]]; then bench all "$tune" "$r"; fi
  if [[ -n $base ]] && ((r % 2 == 1)); then bench base "$base/tuner/hccl-tune" "$r"; fi
  for p in $peers; do
    env=()
    if [[ -n $ompi_tcp && $p == ompi* ]]; then env=(OMPI_MCA_pml=ob1 OMPI_MCA_btl=tcp,self); fi
    # Open MPI 4.1 selects pml ucx only on devices it lists (mlx*) unless told any will do.
    if [[ -n $ompi_ucx && $p == ompi* ]]; then env=(OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any); fi
    if [[ $p == ompi:* ]]; then
      [[ -n $ompi_param ]] || { echo "no forced Open MPI algorithms for $coll" >&2; exit 2; }
      env+=(OMPI_MCA_coll_tuned_use_dynamic_rules=1 "OMPI_MCA_coll_tuned_${ompi_param}_algorithm=${p#ompi:}")
    fi
    env "${env[@]}" "$peers_dir/run-peers.sh" "$coll" "$n" "$lo" "$hi" "${p%%:*}" 2>/dev/null |
      awk -v rep="$r" -v p="$p" '$1 == "'"$coll"'" && $3 ~ /^[0-9]+$/ {print p, rep, $3, $4, "-"}' >>"$out/rows" || true
  done
done
membw >"$out/mem.1"
cut -d' ' -f1-3 /proc/loadavg >"$out/load.1"
python3 - "$out" "$coll" "$n" "$peers" "$base" "$sym" "$all" "$other" <<'PY'
import os, re, statistics, sys
out, coll, n, peers, base, sym, every = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(), sys.argv[5], sys.argv[6], sys.argv[7]
other = "ours@" + sys.argv[8] if sys.argv[8] else ""
factor = {"allreduce": 2 * (n - 1) / n, "broadcast": 1.0, "reduce": 1.0}.get(coll, (n - 1) / n)
mem = [tuple(map(float, open(os.path.join(out, f)).read().split())) for f in ("mem.0", "mem.1")]
b1 = statistics.median([m[0] for m in mem]); b2 = statistics.median([m[1] for m in mem])
times, algo = {}, {}
for line in open(os.path.join(out, "rows")):
    who, rep, size, t, a = line.split()
    times.setdefault((who, int(size)), []).append(float(t))
    if who in ("ours", "sym"): algo.setdefault(int(size), {})[who] = a
sizes = sorted({s for (_, s) in times})
cols = ["ours"] + ([other] if other else []) + (["sym"] if sym else []) + (["base"] if base else []) + peers
med = {k: statistics.median(v) for k, v in times.items()}
def short(cfg):  # ring(chunk=512K,channels=1,link=auto) -> ring(chunk=512K)
    cfg = re.sub(r",?channels=1|,?link=auto", "", cfg)
    return re.sub(r"\(,?", "(", cfg).replace("()", "")
def ours_best(s):  # (time, configuration): the fastest of auto and every candidate of --algo all
    cand = {w: t for (w, size), t in med.items() if size == s and (w == "ours" or w.startswith("all:"))}
    if not cand: return None, ""
    w = min(cand, key=cand.get)
    return cand[w], ("auto" if w == "ours" else short(w[4:]))
print(f"# {coll}, {n} ranks, fp32 sum; median of repetitions (each: median of iterations, time = max over ranks)")
loads = [open(os.path.join(out, f)).read().strip() for f in ("load.0", "load.1")]
print(f"# load average (1, 5, 15 min) at the start: {loads[0]}; at the end: {loads[1]}")
print(f"# memcpy 64 MiB this run: {b1:.2f} GB/s on 1 thread, {b2:.2f} GB/s on 2; bound busbw = {b2:.2f}/{n} x {factor:.2f} = {b2 / n * factor:.2f} GB/s")
hdr = f"{'bytes':>10} " + " ".join(f"{c + '_us':>11}" for c in cols) + f" {'best_peer':>9} {'ratio':>6}" + (f" {'vs_base':>7}" if base else "") + (f" {'vs_link':>7}" if other else "") + (f" {'sym_ratio':>9}" if sym else "") + (f" {'ours_best_us':>12} {'best_ratio':>10}" if every else "") + f" {'busbw':>7} {'of_bound':>8}  algo"
print(hdr)
for s in sizes:
    ours = med.get(("ours", s))
    row = f"{s:>10} " + " ".join(f"{med[(c, s)]:>11.2f}" if (c, s) in med else f"{'-':>11}" for c in cols)
    pt = {p: med[(p, s)] for p in peers if (p, s) in med}
    best = min(pt, key=pt.get) if pt else None
    ratio = f"{pt[best] / ours:6.2f}" if best and ours else f"{'-':>6}"
    busbw = s / ours / 1e3 * factor if ours else 0
    frac = busbw / (b2 / n * factor) if ours else 0
    vs = ""
    if base:
        b = med.get(("base", s))
        vs = f" {b / ours:7.2f}" if b and ours else f" {'-':>7}"
    if other:
        o = med.get((other, s))
        vs += f" {o / ours:7.2f}" if o and ours else f" {'-':>7}"
    sr = ""
    if sym:
        st = med.get(("sym", s))
        sr = f" {pt[best] / st:9.2f}" if best and st else f" {'-':>9}"
    ob = ""
    bt, bcfg = ours_best(s)
    if every:
        ob = f" {bt:12.2f} {pt[best] / bt:10.2f}" if best and bt else f" {'-':>12} {'-':>10}"
    names = algo.get(s, {})
    print(row + f" {best or '-':>9} {ratio}{vs}{sr}{ob} {busbw:7.3f} {frac:8.2f}  {names.get('ours', '')}"
          + (f" | sym: {names.get('sym', '')}" if sym else "") + (f" | best: {bcfg}" if every else ""))
reps = {c: len(v) for (c, _), v in times.items() if not c.startswith("all:")}
if every: reps["all (per candidate)"] = min(len(v) for (c, _), v in times.items() if c.startswith("all:"))
print("# ratio = best peer's time / ours (> 1: hccl-tune is faster)"
      + ("; sym_ratio = best peer's time / ours on symmetric buffers" if sym else "")
      + ("; ours_best = the fastest of auto and every `--algo all` candidate, best_ratio = best peer's time / that" if every else "")
      + "; repetitions per column:", reps)
PY
