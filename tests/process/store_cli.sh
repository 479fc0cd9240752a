#!/usr/bin/env bash
# hccl-tune's store verbs as processes, on a database file: export reports a failed write (a full device, stdout
# on a full device) and replaces FILE only whole; import stores nothing from a file with an invalid table and
# refuses absurd version numbers; sweep --resume is refused while the sweep's owner still runs; links stores its
# measurement and --stored reads it back.
# usage: store_cli.sh HCCL_TUNE_BIN
set -euo pipefail
bin=$1
d=$(mktemp -d)
owner=""
trap '[[ -n $owner ]] && kill "$owner" 2>/dev/null; rm -rf "$d"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# expect_fail WHAT PATTERN CMD...: CMD exits non-zero and its stderr holds PATTERN.
expect_fail() {
  local what=$1 pattern=$2
  shift 2
  if "$@" > "$d/out" 2> "$d/err"; then fail "$what: exit 0 (stderr: $(cat "$d/err"))"; fi
  grep -qF -- "$pattern" "$d/err" || fail "$what: stderr lacks '$pattern': $(cat "$d/err")"
}

# A topology JSON and its fingerprint (SHA-256 prefix), and one table file built from them.
topo='{"format":2,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[2],"release":"0.1","runtime":"hccl-tune"}'
fp=$(printf '%s' "$topo" | sha256sum | cut -c1-16)
topo2='{"format":2,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[4],"release":"0.1","runtime":"hccl-tune"}'
fp2=$(printf '%s' "$topo2" | sha256sum | cut -c1-16)
table() {  # table FINGERPRINT TOPOLOGY VERSION CONFIGURATION
  local t=${2//\"/\\\"}
  printf '{"fingerprint": "%s", "topology": "%s", "version": %s, "created_unix_ms": 1000, "entries": [
    {"collective": "allreduce", "dtype": "fp32", "world_size": 2, "bytes": "0-", "configuration": "%s",
     "time_us": 5, "busbw_gbps": 1, "samples": 10, "runner_up": "", "margin": 0, "default_margin": 0,
     "sweep_id": "s", "library_version": "0.1", "measured_unix_ms": 1000}]}' "$1" "$t" "$3" "$4"
}
file() { printf '{"format": "hccl-tune-tables", "format_version": 1, "tables": [%s]}\n' "$(IFS=,; echo "$*")"; }

# 1. import: one valid table.
file "$(table "$fp" "$topo" 3 ring)" > "$d/good.json"
"$bin" import "$d/good.json" --db "$d/r.db" 2> "$d/err" || fail "import: $(cat "$d/err")"

# 2. export: a failed write is an error naming FILE; a good one replaces FILE whole, keeping its mode.
expect_fail "export to /dev/full" "cannot write /dev/full" "$bin" export /dev/full --db "$d/r.db"
[[ -c /dev/full ]] || fail "/dev/full is no longer a character device"
if "$bin" export - --db "$d/r.db" > /dev/full 2> "$d/err"; then fail "export - > /dev/full: exit 0"; fi
grep -qF "cannot write stdout" "$d/err" || fail "export - > /dev/full: $(cat "$d/err")"
expect_fail "export into a missing directory" "cannot write $d/no/such/t.json" \
  "$bin" export "$d/no/such/t.json" --db "$d/r.db"
echo "old content" > "$d/t.json"
chmod 0640 "$d/t.json"
"$bin" export "$d/t.json" --db "$d/r.db" 2> "$d/err" || fail "export: $(cat "$d/err")"
grep -q "\"$fp\"" "$d/t.json" || fail "export did not write the table: $(cat "$d/t.json")"
[[ $(stat -c %a "$d/t.json") == 640 ]] || fail "export changed the file's mode to $(stat -c %a "$d/t.json")"
[[ -z $(find "$d" -name '*.tmp-*') ]] || fail "export left temporary files: $(find "$d" -name '*.tmp-*')"
"$bin" export - --db "$d/r.db" > "$d/stdout.json" || fail "export -"
cmp -s "$d/t.json" "$d/stdout.json" || fail "export FILE and export - differ"

# 3. import: a file whose second table is invalid stores nothing and names the table.
file "$(table "$fp2" "$topo2" 1 ring)" "$(table "$fp" "$topo2" 1 ring)" > "$d/mismatch.json"
expect_fail "import with a fingerprint that is not the topology's" "tables[1]" \
  "$bin" import "$d/mismatch.json" --db "$d/r.db"
grep -qF "nothing imported" "$d/err" || fail "import error does not say nothing was imported: $(cat "$d/err")"
"$bin" export - --db "$d/r.db" > "$d/after.json"
grep -q "\"$fp2\"" "$d/after.json" && fail "the valid first table of a rejected file was stored"
file "$(table "$fp2" "$topo2" 1 ring)" "$(table "$fp" "$topo" 4 no_such_algorithm)" > "$d/badentry.json"
expect_fail "import with an unknown algorithm" "tables[1]" "$bin" import "$d/badentry.json" --db "$d/r.db"
"$bin" export - --db "$d/r.db" | grep -q "\"$fp2\"" && fail "a table of a rejected file was stored"

# 4. import: a version number near int64's end is refused, naming it; the table keeps taking versions.
file "$(table "$fp2" "$topo2" 9223372036854775807 ring)" > "$d/huge.json"
expect_fail "import of version INT64_MAX" "9223372036854775807" "$bin" import "$d/huge.json" --db "$d/r.db"
file "$(table "$fp" "$topo" 9007199254740992 one_shot)" > "$d/max.json"
"$bin" import "$d/max.json" --db "$d/r.db" 2> "$d/err" || fail "import of version 2^53: $(cat "$d/err")"
file "$(table "$fp" "$topo" 1 recursive_doubling)" > "$d/next.json"
"$bin" import "$d/next.json" --db "$d/r.db" 2> "$d/err" || fail "import after version 2^53: $(cat "$d/err")"
"$bin" export - --db "$d/r.db" | grep -q '"version": 9007199254740993' || fail "the table took no version after 2^53"

# 5. sweep --resume: refused while the row's owner (a live process on this machine) runs, naming its pid.
sleep 300 &
owner=$!
boot=$(cat /proc/sys/kernel/random/boot_id)
ns=$(readlink /proc/self/ns/pid)
start=$(awk '{print $22}' "/proc/$owner/stat")
params="{\"spec\":{},\"world\":2,\"owner\":{\"boot_id\":\"$boot\",\"pid_ns\":\"$ns\",\"pid\":$owner,\"start\":$start}}"
sqlite3 "$d/r.db" "INSERT INTO sweeps(id, params, status, progress, started_ms, finished_ms, message)
  VALUES ('sw-live', '$params', 'running', 0.5, $(date +%s%3N), 0, '')"
expect_fail "resume of a sweep whose owner runs" "pid $owner" "$bin" sweep --resume sw-live --db "$d/r.db"
grep -qF -- "--force" "$d/err" || fail "the refusal does not mention --force: $(cat "$d/err")"

# 6. A file exported before fingerprint format 2 imports under each topology's format-2 key, and the class lists it.
old='{"format":1,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[2],"release":"0.1"}'
file "$(table "$(printf '%s' "$old" | sha256sum | cut -c1-16)" "$old" 1 one_shot)" > "$d/format1.json"
"$bin" import "$d/format1.json" --db "$d/f.db" 2> "$d/err" || fail "import of a format-1 file: $(cat "$d/err")"
"$bin" show --db "$d/f.db" > "$d/show.txt"
cls=$(printf '%s' '{"format":2,"inter":[],"intra":["shm"],"release":"0.1","runtime":"hccl-tune"}' | sha256sum | cut -c1-16)
grep -q "^topology $fp  class $cls " "$d/show.txt" || fail "format-1 import not under $fp, class $cls: $(cat "$d/show.txt")"
grep -qF "$topo" "$d/show.txt" || fail "format-1 import did not store the format-2 JSON: $(cat "$d/show.txt")"
"$bin" get --class "$cls" --db "$d/f.db" | grep -q "^  $fp " || fail "get --class --db does not list $fp"
"$bin" status --db "$d/f.db" | grep -q "^  class $cls " || fail "status --db does not print class $cls"
expect_fail "get --class with a malformed class" "16 lower-case hex digits" "$bin" get --class TCP --db "$d/f.db"
expect_fail "get --class with --topology" "excludes" "$bin" get --class "$cls" --topology "$fp" --db "$d/f.db"
expect_fail "get without a topology or class" "--class" "$bin" get --coll allreduce --db "$d/f.db"

# 7. links: --stored before any measurement names the topology; a measurement is stored in --db and read back
# with every figure kept and the source "stored"; --no-store leaves the store alone.
expect_fail "links --stored on an empty store" "no link measurement stored for topology" \
  "$bin" links --ranks 2 --stored --db "$d/l.db"
"$bin" links --ranks 2 --json --bytes 64K --iters 1 --db "$d/l.db" > "$d/measured.json" 2> "$d/err" ||
  fail "links --db: $(cat "$d/err")"
grep -q "stored in database $d/l.db for topology" "$d/err" || fail "links did not say it stored: $(cat "$d/err")"
"$bin" links --ranks 2 --json --stored --db "$d/l.db" > "$d/stored.json" 2> "$d/err" ||
  fail "links --stored: $(cat "$d/err")"
/usr/bin/python3 - "$d/measured.json" "$d/stored.json" <<'PY' || fail "stored table differs from the measured one"
import json, sys
m, s = (json.load(open(p)) for p in sys.argv[1:3])
assert [l["source"] for l in m["links"]] == ["measured"] and [l["source"] for l in s["links"]] == ["stored"], (m, s)
strip = lambda t: [{k: v for k, v in l.items() if k != "source"} for l in t["links"]]
assert strip(m) == strip(s) and m["fingerprint"] == s["fingerprint"], (m, s)
# The node's RDMA facts ride along, read not stored: "no RDMA device" exactly when there is no port.
for t in (m, s):
    assert t["rdma"]["summary"] and (t["rdma"]["summary"] == ["no RDMA device"]) == (not t["rdma"]["ports"]), t
PY
"$bin" links --ranks 2 --json --bytes 64K --iters 1 --no-store --db "$d/l.db" > "$d/again.json" 2> "$d/err" ||
  fail "links --no-store: $(cat "$d/err")"
"$bin" links --ranks 2 --json --stored --db "$d/l.db" > "$d/stored2.json" 2> /dev/null
cmp -s "$d/stored.json" "$d/stored2.json" || fail "links --no-store changed the stored table"
expect_fail "links --stored --no-store" "excludes" "$bin" links --ranks 2 --stored --no-store --db "$d/l.db"
echo "PASS"
