#!/usr/bin/env bash
# Runs torch's distributed test suite (dist_suite.py) on gloo and on hccltune with the same selection, prints
# the counts per backend and every test whose outcome differs. Exits non-zero when a test that passes on gloo
# fails or errors on hccltune (a skip is not a failure: name-gated tests skip themselves, see docs/PYTORCH.md).
# Usage: dist_suite_compare.sh PYTHON [unittest args, e.g. -k test_all_reduce]
set -uo pipefail
py=$1; shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for b in gloo hccltune; do
  (cd "$out" && BACKEND=$b WORLD_SIZE=${WORLD_SIZE:-2} "$py" "$here/dist_suite.py" -v "$@" >"$out/$b.log" 2>&1)
  # unittest -v: "test_x (__main__.Cls.test_x) ... ok|FAIL|ERROR|skipped '...'" (the verdict may follow
  # rank output on later lines; take the first verdict after each test name).
  "$py" - "$out/$b.log" >"$out/$b.res" <<'PY'
import re, sys
text = open(sys.argv[1], errors="replace").read()
res = {}
for m in re.finditer(r"^(test_\w+) \(__main__\.\S+\) \.\.\. (.*?)(?=^test_\w+ \(__main__|\Z)", text, re.M | re.S):
    v = re.search(r"\b(ok|FAIL|ERROR|skipped|expected failure)\b", m.group(2))
    res[m.group(1)] = v.group(1) if v else "unknown"
for k in sorted(res):
    print(k, res[k])
PY
  echo "$b: $(awk '{print $2}' "$out/$b.res" | sort | uniq -c | tr '\n' ' ')"
done
join "$out/gloo.res" "$out/hccltune.res" | awk '$2 != $3 {print "  differs: " $1 " gloo=" $2 " hccltune=" $3}'
bad=$(join "$out/gloo.res" "$out/hccltune.res" | awk '$2 == "ok" && ($3 == "FAIL" || $3 == "ERROR") {print $1}')
if [[ -n $bad ]]; then
  echo "passes on gloo, fails on hccltune: $bad" >&2
  grep -A 30 -E "^(FAIL|ERROR): ($(tr '\n' '|' <<<"$bad" | sed 's/|$//'))" "$out/hccltune.log" | head -80
  exit 1
fi
