#!/usr/bin/env bash
# `hccl-tune model fit | show | check` on a real (small) sweep: the fit names its points and leaves the network
# unknown (one node), the profile round-trips through `show` and `simulate --nodes 1`, `simulate --nodes 2` is
# refused for it, `check` reports every measured bucket, and bad input is named.
set -euo pipefail
bin="$1"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

HCCL_TUNE_DAEMON=off "$bin" sweep --force --ranks 2 --db "$d/t.db" --coll allreduce,allgather --min-bytes 8 \
  --max-bytes 64K --step 8 --exhaustive --cap-ms 10 --max-iters 5 --plain > "$d/sweep.log" 2>&1 \
  || { cat "$d/sweep.log"; fail "sweep"; }
"$bin" model fit --db "$d/t.db" --out "$d/p.json" --cores-per-node 2 --name here > "$d/fit.txt" \
  || { cat "$d/fit.txt"; fail "fit"; }
grep -Eq "fitted [1-9][0-9]* one-node and 0 multi-node points from 1 sweeps" "$d/fit.txt" || { cat "$d/fit.txt"; fail "fit summary"; }
grep -q "never measured" "$d/fit.txt" || fail "fit should say the network is unknown"
python3 - "$d/p.json" <<'PY' || fail "profile JSON"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["name"] == "here" and "inter" not in p and p["cores_per_node"] == 2, p
assert p["intra"]["bandwidth_GBps"] > 0 and p["reduce_GBps"] > 0, p
PY
"$bin" model show --profile "$d/p.json" | grep -q "^profile here" || fail "show"
"$bin" simulate --nodes 1 --ranks-per-node 4 --profile "$d/p.json" --coll allreduce | grep -q "winners: " \
  || fail "simulate one node with the fitted profile"
if "$bin" simulate --nodes 2 --ranks-per-node 2 --profile "$d/p.json" 2> "$d/err.txt"; then fail "simulate across nodes"; fi
grep -q "never measured a network between nodes" "$d/err.txt" || { cat "$d/err.txt"; fail "simulate error"; }
"$bin" model check --db "$d/t.db" --profile "$d/p.json" --json > "$d/check.json" || fail "check"
python3 - "$d/check.json" <<'PY' || fail "check JSON"
import json, sys
r = json.load(open(sys.argv[1]))
sizes = {(b["collective"], b["bytes"]) for b in r["buckets"]}
want = {(c, b) for c in ("allreduce", "allgather") for b in (8, 64, 512, 4096, 32768)}
assert want <= sizes, (want - sizes)
for b in r["buckets"]:
    assert b["candidates"] >= 2 and b["median_error"] >= 0 and b["winner_gap"] >= 0, b
for c in ("allreduce", "allgather"):
    s = r["summary"][c]
    assert s["buckets"] == 5 and 0 <= s["winner_ok"] <= 5, s
PY
if "$bin" model check --db "$d/t.db" --profile "$d/none.json" 2> "$d/err.txt"; then fail "check without a profile"; fi
grep -q "none.json" "$d/err.txt" || fail "missing profile not named"
if "$bin" model fit --db "$d/t.db" --sweep no-such-sweep --out "$d/x.json" 2> "$d/err.txt"; then fail "unknown sweep"; fi
grep -q "no-such-sweep" "$d/err.txt" || { cat "$d/err.txt"; fail "unknown sweep not named"; }
echo "PASS: model fit/show/check on a 2-rank sweep"
