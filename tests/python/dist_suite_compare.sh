#!/usr/bin/env bash
# Runs torch's distributed test suite (dist_suite.py) on gloo and on hccltune with the same selection, prints
# the counts per backend and every test whose outcome differs. Exits non-zero when a test that passes on gloo
# fails or errors on hccltune (a skip is not a failure: name-gated tests skip themselves, see docs/PYTORCH.md).
#
# Usage: dist_suite_compare.sh PYTHON [unittest args, e.g. -k test_all_reduce]
# Environment: DIST_SUITE_OUT=DIR keeps the logs and results there (BACKEND.log, BACKEND.res: "test verdict"
# per line, and compare.txt) instead of a temporary directory; DISTRIBUTED_TESTS_DEFAULT_TIMEOUT (torch's own
# per-test timeout, s) defaults to 120 here so one hanging test cannot eat the run; WORLD_SIZE defaults to 2.
set -uo pipefail
py=$1; shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -n ${DIST_SUITE_OUT:-} ]]; then
  out=$DIST_SUITE_OUT
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
export DISTRIBUTED_TESTS_DEFAULT_TIMEOUT=${DISTRIBUTED_TESTS_DEFAULT_TIMEOUT:-120}
for b in gloo hccltune; do
  (cd "$out" && BACKEND=$b WORLD_SIZE=${WORLD_SIZE:-2} "$py" "$here/dist_suite.py" -v "$@" >"$out/$b.log" 2>&1)
  "$py" "$here/dist_suite_results.py" "$out/$b.log" >"$out/$b.res"
  echo "$b: $(awk '{print $2}' "$out/$b.res" | sort | uniq -c | tr '\n' ' ')"
done
join "$out/gloo.res" "$out/hccltune.res" | awk '$2 != $3 {print "  differs: " $1 " gloo=" $2 " hccltune=" $3}' |
  tee "$out/compare.txt"
bad=$(join "$out/gloo.res" "$out/hccltune.res" | awk '$2 == "ok" && $3 != "ok" && $3 != "skipped" {print $1}')
if [[ -n $bad ]]; then
  echo "passes on gloo, fails on hccltune: $bad" >&2
  grep -A 30 -E "^(FAIL|ERROR): ($(tr '\n' '|' <<<"$bad" | sed 's/|$//'))" "$out/hccltune.log" | head -80
  exit 1
fi
