#!/usr/bin/env bash
# Predicted tables end to end (docs/MODEL.md, "Predicted tables"): a 2-rank sweep, `model fit --store` keeps the
# fitted model for the topology's class; a 3-rank job nobody swept then runs from the table hccl-tuned predicts
# (every entry `predicted:1` in `show`, the bench's choices are the predicted entries', `get --explain` ranks the
# candidates); a sweep of that world replaces the predicted entries it measured and leaves the rest. (What is never
# predicted — no model, a network the model never measured, uneven nodes — is in the daemon's unit tests.)
# Usage: predicted_table.sh HCCL_TUNE HCCL_TUNED
set -euo pipefail
cli=$1 tuned=$2
d=$(mktemp -d)
pid=""
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$d"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [[ -f $d/daemon.log ]] && tail -20 "$d/daemon.log" >&2; exit 1; }

HCCL_TUNE_DAEMON=off "$cli" sweep --force --ranks 2 --db "$d/t.db" --coll allreduce,allgather --min-bytes 8 \
  --max-bytes 64K --step 8 --exhaustive --cap-ms 10 --max-iters 5 --plain > "$d/sweep.log" 2>&1 \
  || { cat "$d/sweep.log"; fail "sweep"; }
"$cli" model fit --db "$d/t.db" --store --cores-per-node 2 --name here > "$d/fit.txt" \
  || { cat "$d/fit.txt"; fail "fit --store"; }
cls=$(sed -nE 's/^stored as model version 1 of topology class ([0-9a-f]{16})$/\1/p' "$d/fit.txt")
[[ -n $cls ]] || { cat "$d/fit.txt"; fail "fit --store did not store version 1"; }
"$cli" model show --db "$d/t.db" | grep -q "^class $cls  model version 1 " || fail "model show lists no model"

"$tuned" --socket "$d/d.sock" --db "$d/t.db" --log-level info 2>>"$d/daemon.log" &
pid=$!
for _ in $(seq 100); do [[ -S $d/d.sock ]] && break; sleep 0.05; done
[[ -S $d/d.sock ]] || fail "daemon did not start"
export HCCL_TUNE_DAEMON="unix:$d/d.sock" HCCL_CONNECT_TIMEOUT=30 HCCL_EXEC_TIMEOUT=60

out=""
for coll in allreduce allgather; do
  out+=$("$cli" bench --ranks 3 --coll $coll --min-bytes 8 --max-bytes 1M --iters 5 --check) \
    || fail "$coll bench at 3 ranks: $out"
  out+=$'\n'
done
grep -q "CHECK FAILED" <<<"$out" && fail "check failed: $out"
fp3=$(sed -nE 's/^# hccl-tune bench: .*topology ([0-9a-f]{16}).*/\1/p' <<<"$out" | head -1)
[[ -n $fp3 ]] || fail "no topology in the bench output: $out"
grep -q "table $fp3 (1x3) predicted by model version 1 of class $cls" "$d/daemon.log" || fail "daemon did not predict"
"$cli" show --daemon "$HCCL_TUNE_DAEMON" --topology "$fp3" > "$d/show3.txt"
n=$(awk '$3=="3" && $NF ~ /\(/ {print $8}' "$d/show3.txt" | sort | uniq -c)
[[ $n =~ ^\ *[0-9]+\ predicted:1$ ]] || { cat "$d/show3.txt"; fail "3-rank entries are not all predicted:1: $n"; }
# Every size the bench ran used the predicted entry's configuration.
while read -r coll ranks bytes algo _; do
  want=$("$cli" get --daemon "$HCCL_TUNE_DAEMON" --topology "$fp3" --world 3 --coll "$coll" --dtype fp32 \
    --bytes "$bytes" 2>"$d/get.err") || fail "get $coll $bytes: $(cat "$d/get.err")"
  [[ $algo == "$want" ]] || fail "$coll at $bytes bytes ran $algo, the predicted entry says $want"
  grep -q "source predicted:1" "$d/get.err" || fail "get does not say predicted: $(cat "$d/get.err")"
done < <(awk '$1=="allreduce" || $1=="allgather"' <<<"$out")
"$cli" get --daemon "$HCCL_TUNE_DAEMON" --topology "$fp3" --world 3 --coll allreduce --dtype fp32 --bytes 64K \
  --explain > "$d/explain.txt" 2>/dev/null || fail "get --explain"
grep -q "^predicted by model version 1 of class $cls (here) for allreduce of 64K on 1x3:" "$d/explain.txt" \
  || { cat "$d/explain.txt"; fail "explain header"; }
[[ $(grep -c ' us  ' "$d/explain.txt") -ge 3 ]] || { cat "$d/explain.txt"; fail "explain lists few candidates"; }
grep -q "<- the entry" "$d/explain.txt" || { cat "$d/explain.txt"; fail "explain does not mark the entry"; }
# It names the built-in default and what a predicted table serves: the entry's configuration.
entry=$(sed -nE 's/^ +[0-9.]+ us  (.*)  <- the entry$/\1/p' "$d/explain.txt")
grep -q "^built-in default: [a-z_]*(.*) ([0-9.]* us)$" "$d/explain.txt" || { cat "$d/explain.txt"; fail "no default"; }
grep -qF "a predicted table serves $entry" "$d/explain.txt" || { cat "$d/explain.txt"; fail "serves not the entry"; }

# A measured entry wins: a sweep of allreduce at 3 ranks replaces the predicted allreduce entries it covers.
"$cli" sweep --force --ranks 3 --coll allreduce --min-bytes 8 --max-bytes 4K --step 8 --cap-ms 10 --max-iters 5 \
  --plain > "$d/sweep3.log" 2>&1 || { cat "$d/sweep3.log"; fail "sweep at 3 ranks"; }
"$cli" show --daemon "$HCCL_TUNE_DAEMON" --topology "$fp3" > "$d/show3b.txt"
awk '$1=="allreduce" && $2=="fp32" && $4 ~ /^8-/ {print $8}' "$d/show3b.txt" | grep -qx measured \
  || { cat "$d/show3b.txt"; fail "the swept allreduce range is not measured"; }
awk '$1=="allgather" && $2=="fp32" {print $8}' "$d/show3b.txt" | sort -u | grep -qx "predicted:1" \
  || { cat "$d/show3b.txt"; fail "allgather lost its predicted entries"; }

echo "PASS: a 3-rank job ran from the table predicted by model version 1 of class $cls"
