#!/usr/bin/env bash
# The layering check fails when it should: on a copy of the sources, an include the layers file forbids (the
# selector including the api, an algorithm including a concrete transport) makes check_layers.py exit 1 naming
# the file, line and edge; a layers file that allows a cycle is refused; the untouched copy passes.
# Usage: tests/style/check_layers_test.sh SOURCE_DIR
set -euo pipefail
src=${1:?source dir}
script="$src/tests/style/check_layers.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  list() { git ls-files --cached --others --exclude-standard -- '*.h' '*.cc' '*.c' 'tests/style/layers.txt'; }
else  # a source tree without git (a release tarball)
  list() { find . -path './build*' -prune -o \( -name '*.h' -o -name '*.cc' -o -name '*.c' -o -path ./tests/style/layers.txt \) -print; }
fi
list | while read -r f; do
  mkdir -p "$tmp/$(dirname "$f")" && cp "$f" "$tmp/$f"
done
fail() { echo "FAIL: $*" >&2; exit 1; }

python3 "$script" "$tmp" >/dev/null || fail "the untouched copy does not pass"

# 1. selector -> api (a cycle the layering forbids).
cp "$tmp/runtime/selector/selector.cc" "$tmp/selector.cc.orig"
printf '#include "runtime/api/communicator.h"\n' >> "$tmp/runtime/selector/selector.cc"
line=$(wc -l < "$tmp/runtime/selector/selector.cc")
if out=$(python3 "$script" "$tmp" 2>&1); then fail "selector including the api passed: $out"; fi
grep -q "^runtime/selector/selector.cc:$line: runtime/selector includes runtime/api" <<<"$out" ||
  fail "no finding names runtime/selector/selector.cc:$line: $out"
cp "$tmp/selector.cc.orig" "$tmp/runtime/selector/selector.cc"

# 2. an algorithm -> a concrete transport.
printf '#include "runtime/transport/shm/shm_transport.h"\n' >> "$tmp/runtime/algorithms/allreduce/ring.cc"
if out=$(python3 "$script" "$tmp" 2>&1); then fail "an algorithm including the shm transport passed: $out"; fi
grep -q "runtime/algorithms includes runtime/transport/shm" <<<"$out" || fail "wrong finding: $out"

# 3. the api -> a concrete transport (the Device layer's edge).
if grep -q '^runtime/api:.*runtime/transport/shm' "$tmp/tests/style/layers.txt"; then
  echo "note: runtime/api may still include runtime/transport/shm"
else
  printf '#include "runtime/transport/tcp/tcp_transport.h"\n' >> "$tmp/runtime/api/api.cc"
  if out=$(python3 "$script" "$tmp" 2>&1); then fail "the api including the tcp transport passed: $out"; fi
  grep -q "runtime/api includes runtime/transport/tcp" <<<"$out" || fail "wrong finding: $out"
fi

# 4. a layers file that allows a cycle is refused, whatever the includes.
printf 'runtime/common: runtime/net\n' >> "$tmp/tests/style/layers.txt"
sed -i '/^runtime\/common: version$/d' "$tmp/tests/style/layers.txt"
if out=$(python3 "$script" "$tmp" 2>&1); then fail "a cyclic layers file passed: $out"; fi
grep -q "allows a cycle: .*runtime/common -> runtime/net -> runtime/common" <<<"$out" || fail "wrong finding: $out"
echo "check_layers refuses forbidden includes and cyclic layer lists"
