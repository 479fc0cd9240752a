#!/usr/bin/env bash
# tests/style/references.py fires on each of its rules and passes clean text: a temporary tree holds one file
# per violation, and the checker must name that file, its line and the rule; a file whose references all
# resolve inside the tree must pass.
# Usage: tests/style/references_selftest.sh SOURCE_DIR
set -euo pipefail
src=${1:?source dir}
checker=$src/tests/style/references.py
tmp=$(mktemp -d /tmp/references-selftest.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docs" "$tmp/lib"
printf '# Guide\n## Sizes\n' > "$tmp/docs/GUIDE.md"
fail=0

# expect FILE RULE TEXT: the checker exits 1 and reports FILE:2 with RULE.
expect() {
  local file=$1 rule=$2 text=$3
  printf '// first line\n%s\n' "$text" > "$tmp/$file"
  local out rc=0
  out=$(python3 "$checker" --root "$tmp" "$file" 2>&1) || rc=$?
  if [[ $rc != 1 ]] || ! grep -q "^$file:2: $rule: " <<<"$out"; then
    echo "FAIL: '$text' in $file: expected $rule at line 2, exit 1; got exit $rc:"$'\n'"$out" >&2
    fail=1
  else
    echo "ok: $rule fires on '$text'"
  fi
  rm -f "$tmp/$file"
}

# The folder above the repository is spelled in two parts, so that this file does not itself cite it.
up=../sha
up+=red
expect lib/a.h outside-path "// Timing as $up/CONVENTIONS.md says."
expect lib/b.sh outside-path "peers=\${PEERS_DIR:-\$root/$up/peers}"
expect lib/c.sh outside-path 'peers=/work/shared/peers'
expect lib/d.cc outside-path '// Sizes as CONVENTIONS.md defines them.'
expect docs/e.md outside-path 'See [the design](ARCHITECTURE.md).'
expect docs/f.md outside-path 'See ../../other/README.md for more.'
expect lib/e2.cc missing-section '// Timed as docs/GUIDE.md, Timing says.'
expect docs/e3.md missing-section 'Measured in GUIDE.md, "What limits us".'
expect lib/g.cc work-item '// The online policy (issue 7) re-measures.'
expect lib/h.cc work-item '// Fixed in PR #12.'
expect docs/i.md work-item 'The daemon was added for #4.'
expect lib/j.cc history '// 4 ranks 6% faster (docs/GUIDE.md, round 16).'
expect docs/k.md history 'Rounds 1-12 ran on another machine.'
expect docs/l.md history 'after the merges of session 2'
expect lib/m.cc history '// the round-18 build, in place'

# Clean: references that resolve inside the tree, and words that only look alike.
cat > "$tmp/lib/clean.cc" <<'CLEAN'
// Sizes as docs/GUIDE.md defines them (docs/GUIDE.md, Sizes); the guide is ../docs/GUIDE.md from here.
// A quoted section resolves too (docs/GUIDE.md, "Sizes").
// In round k every rank exchanges with rank r xor 2^k; the colour is "#444" and the ring turns around.
CLEAN
printf 'See [the guide](GUIDE.md) and [sizes](GUIDE.md#sizes), or https://example.org/x.md.\n' > "$tmp/docs/clean.md"
if out=$(python3 "$checker" --root "$tmp" lib/clean.cc docs/clean.md docs/GUIDE.md 2>&1); then
  echo "ok: clean files pass"
else
  echo "FAIL: clean files were reported:"$'\n'"$out" >&2
  fail=1
fi
exit $fail
