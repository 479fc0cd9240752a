#!/usr/bin/env bash
# A rolling upgrade from the last release of topology fingerprint format 1 (commit 8eec491, database schema 2) to
# this build, with the real binaries of both, over real unix sockets:
#   1. that release's hccl-tuned and clients write a table (sweep) and live timings (bench);
#   2. this build's clients against that daemon: the runtime fetches the table by its format-1 fingerprint; sweep
#      and import refuse to store tables there, naming both versions; show, status and get --class work; a lookup
#      by a format-2 fingerprint says which format the daemon keys by;
#   3. this build's hccl-tuned takes over the same database (the migration) and serves both: the old runtime
#      fetches its table, the old sweep merges into it, the old CLI looks up and rolls back by format-1
#      fingerprints; the new CLI sees one table under the format-2 key with every version;
#   4. the old hccl-tuned refuses the migrated database, naming both schema versions.
# The older binaries are built from that commit (git archive of this checkout, into BUILD_DIR/src and
# BUILD_DIR/build, kept between runs); HCCL_TUNE_FORMAT1_BINS=DIR uses DIR/hccl-tune and DIR/hccl-tuned instead.
# Exit 77 (skipped) when the commit is not in this clone (a shallow clone).
# usage: mixed_versions.sh HCCL_TUNED HCCL_TUNE SOURCE_DIR BUILD_DIR
set -euo pipefail
new_tuned=$1
new_cli=$2
src=$3
cache=$4
readonly base=8eec4915c3307fa28d5f0ed5b12de4f423966655

if [[ -n ${HCCL_TUNE_FORMAT1_BINS:-} ]]; then
  old_cli=$HCCL_TUNE_FORMAT1_BINS/hccl-tune
  old_tuned=$HCCL_TUNE_FORMAT1_BINS/hccl-tuned
else
  if ! git -C "$src" cat-file -e "$base^{commit}" 2>/dev/null; then
    echo "commit $base is not in this clone (shallow?): skipped"
    exit 77
  fi
  if [[ ! -f $cache/src/CMakeLists.txt ]]; then
    rm -rf "$cache/src"
    mkdir -p "$cache/src"
    git -C "$src" archive "$base" | tar -x -C "$cache/src"
  fi
  echo "building hccl-tune and hccl-tuned of $base in $cache/build"
  cmake -S "$cache/src" -B "$cache/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHCCL_TUNE_BUILD_TESTS=OFF \
    -DHCCL_TUNE_BUILD_BENCHMARKS=OFF > "$cache/configure.log" 2>&1 || { cat "$cache/configure.log"; exit 1; }
  cmake --build "$cache/build" --parallel 2 --target hccl-tune hccl-tuned > "$cache/build.log" 2>&1 ||
    { tail -50 "$cache/build.log"; exit 1; }
  old_cli=$cache/build/tuner/hccl-tune
  old_tuned=$cache/build/daemon/hccl-tuned
fi

d=$(mktemp -d /tmp/hccltune-mixed-XXXXXX)
daemon=""
cleanup() {
  [[ -n $daemon ]] && kill -KILL "$daemon" 2>/dev/null
  rm -rf "$d"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$d"/*.log; do echo "--- $f" >&2; tail -20 "$f" >&2; done
  exit 1
}
# expect_fail WHAT PATTERN CMD...: CMD exits non-zero and its stderr holds PATTERN.
expect_fail() {
  local what=$1 pattern=$2
  shift 2
  if "$@" > "$d/out" 2> "$d/err"; then fail "$what: exit 0 (stderr: $(cat "$d/err"))"; fi
  grep -qF -- "$pattern" "$d/err" || fail "$what: stderr lacks '$pattern': $(cat "$d/err")"
  echo "ok: $what: $(grep -F -- "$pattern" "$d/err" | head -1)"
}
: > "$d/tuned.conf"
target=unix:$d/tuned.sock
start() {  # start HCCL_TUNED NAME
  "$1" --socket "$d/tuned.sock" --db "$d/tuning.db" --config "$d/tuned.conf" > "$d/$2.log" 2>&1 &
  daemon=$!
  for _ in $(seq 100); do
    [[ -S $d/tuned.sock ]] && return 0
    kill -0 "$daemon" 2>/dev/null || fail "$2 exited at start"
    sleep 0.1
  done
  fail "$2 did not listen"
}
stop() {
  kill -TERM "$daemon"
  wait "$daemon" || fail "hccl-tuned exited $? on SIGTERM"
  daemon=""
}
sweep=(--ranks 2 --min-bytes 1K --max-bytes 4K --step 4 --cap-ms 5 --max-iters 5 --force --plain)
# One node of two ranks in both formats, and its class.
old_json='{"format":1,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[2],"release":"0.1"}'
new_json='{"format":2,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[2],"release":"0.1","runtime":"hccl-tune"}'
cls_json='{"format":2,"inter":[],"intra":["shm"],"release":"0.1","runtime":"hccl-tune"}'
hash() { printf '%s' "$1" | sha256sum | cut -c1-16; }
fp1=$(hash "$old_json")
fp2=$(hash "$new_json")
cls=$(hash "$cls_json")
echo "topology: format 1 $fp1, format 2 $fp2, class $cls"
"$old_cli" --version | grep -q "^hccl-tune " || fail "$old_cli does not run"

# 1. The older release alone.
start "$old_tuned" old-tuned
"$old_cli" sweep --daemon "$target" --coll allreduce "${sweep[@]}" > "$d/out" 2>&1 || fail "old sweep: $(cat "$d/out")"
grep -q "table version 1, topology $fp1" "$d/out" || fail "old sweep stored no table under $fp1: $(cat "$d/out")"
HCCL_TUNE_DAEMON=$target HCCL_TUNE_SAMPLE_RATE=1 "$old_cli" bench --ranks 2 --min-bytes 1K --max-bytes 1K --iters 20 \
  > "$d/out" 2>&1 || fail "old bench: $(cat "$d/out")"

# 2. Newer clients, older daemon.
HCCL_TUNE_DAEMON=$target HCCL_TUNE_LOG_LEVEL=info "$new_cli" bench --ranks 2 --min-bytes 1K --max-bytes 1K --iters 20 \
  > "$d/out" 2>&1 || fail "new bench against the old daemon: $(cat "$d/out")"
grep -q "keys tables by topology fingerprint format 1; this hccl-tune .* uses format 2: topology $fp2 is $fp1 there" \
  "$d/out" || fail "the new runtime did not switch to the format-1 key: $(cat "$d/out")"
grep -q "rank 0: tuned table v1 " "$d/out" || fail "the new runtime did not get the old daemon's table: $(cat "$d/out")"
echo "ok: the new runtime fetched table v1 from the old daemon under $fp1"
expect_fail "new sweep through the old daemon" "keys tables by topology fingerprint format 1; this hccl-tune" \
  "$new_cli" sweep --daemon "$target" --coll broadcast "${sweep[@]}"
grep -q "cannot store the sweep's winners there: upgrade hccl-tuned first" "$d/err" || fail "sweep refusal: $(cat "$d/err")"
"$new_cli" export - --daemon "$target" > "$d/old-export.json" || fail "new export from the old daemon"
expect_fail "new import through the old daemon" "keys tables by topology fingerprint format 1" \
  "$new_cli" import "$d/old-export.json" --daemon "$target"
expect_fail "new get --topology FORMAT2 against the old daemon" "this hccl-tune" \
  "$new_cli" get --coll allreduce --dtype fp32 --bytes 1K --world 2 --topology "$fp2" --daemon "$target"
"$new_cli" show --daemon "$target" | grep -q "^topology $fp1  class $cls " || fail "new show against the old daemon"
"$new_cli" get --class "$cls" --daemon "$target" | grep -q "^  $fp1 " || fail "new get --class against the old daemon"
"$new_cli" status --daemon "$target" | grep -q "^topology_format: 1$" || fail "new status against the old daemon"
echo "ok: new show, get --class and status against the old daemon"
stop

# 3. The newer daemon takes over the database; the older clients go on.
start "$new_tuned" new-tuned
"$new_cli" show --daemon "$target" > "$d/show.txt"
grep -q "^topology $fp2  class $cls  version 1 " "$d/show.txt" || fail "migrated table: $(cat "$d/show.txt")"
grep -qF "$new_json" "$d/show.txt" || fail "migrated JSON: $(cat "$d/show.txt")"
HCCL_TUNE_DAEMON=$target HCCL_TUNE_LOG_LEVEL=info "$old_cli" bench --ranks 2 --min-bytes 1K --max-bytes 1K --iters 20 \
  > "$d/out" 2>&1 || fail "old bench against the new daemon: $(cat "$d/out")"
grep -q "rank 0: tuned table v1 " "$d/out" || fail "the old runtime did not get its table: $(cat "$d/out")"
echo "ok: the old runtime fetched table v1 from the new daemon"
"$old_cli" sweep --daemon "$target" --coll broadcast "${sweep[@]}" > "$d/out" 2>&1 || fail "old sweep: $(cat "$d/out")"
grep -q "table version 2, topology $fp1" "$d/out" || fail "old sweep against the new daemon: $(cat "$d/out")"
got=$("$old_cli" get --coll broadcast --dtype fp32 --bytes 1K --world 2 --topology "$fp1" --daemon "$target" 2>/dev/null) ||
  fail "old get by $fp1"
[[ -n $got ]] || fail "old get printed nothing"
"$old_cli" rollback --daemon "$target" --topology "$fp1" | grep -q "now version 3" || fail "old rollback by $fp1"
"$old_cli" status --daemon "$target" | grep -q "^tables: 1$" || fail "old status against the new daemon"
"$new_cli" get --class "$cls" --json --daemon "$target" > "$d/class.json"
python3 - "$d/class.json" "$fp2" <<'PY' || fail "new get --class after the old clients' writes: $(cat "$d/class.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert [t["fingerprint"] for t in j["tables"]] == [sys.argv[2]], j
assert j["tables"][0]["versions"] == [1, 2, 3], j
PY
echo "ok: old sweep, get and rollback by $fp1 through the new daemon; one table $fp2, versions 1 2 3"
HCCL_TUNE_DAEMON=$target HCCL_TUNE_LOG_LEVEL=info "$new_cli" bench --ranks 2 --min-bytes 1K --max-bytes 1K --iters 20 \
  > "$d/out" 2>&1 || fail "new bench against the new daemon: $(cat "$d/out")"
grep -q "rank 0: tuned table v3 " "$d/out" || fail "the new runtime did not get table v3: $(cat "$d/out")"
stop

# 4. No way back for the older daemon, and it says why.
"$old_tuned" --socket "$d/tuned.sock" --db "$d/tuning.db" --config "$d/tuned.conf" > "$d/old-again.log" 2>&1 &&
  fail "the old daemon started on the migrated database"
grep -q "schema version 3, newer than this hccl-tune supports (2)" "$d/old-again.log" ||
  fail "the old daemon's refusal: $(cat "$d/old-again.log")"
echo "ok: the old daemon refuses the migrated database: $(grep -m1 "schema version 3" "$d/old-again.log")"
echo "PASS"
