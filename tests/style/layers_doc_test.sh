#!/usr/bin/env bash
# layers_doc.py fails when docs/ARCHITECTURE.md shows other edges than tests/style/layers.txt: a copy of both
# with one edge added to the list must be refused, naming the line; the unchanged copy must pass.
set -euo pipefail
src=$1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
mkdir -p "$d/docs" "$d/tests/style"
cp "$src"/docs/ARCHITECTURE.md "$d/docs/"
cp "$src/tests/style/layers.txt" "$d/tests/style/"
python3 "$src/tests/style/layers_doc.py" "$d" > /dev/null || { echo "FAIL: the unchanged copy was refused"; exit 1; }
sed -i 's/^runtime\/selector: runtime\/algorithms/runtime\/selector: runtime\/api runtime\/algorithms/' \
  "$d/tests/style/layers.txt"
if python3 "$src/tests/style/layers_doc.py" "$d" 2> "$d/err"; then
  echo "FAIL: a list with an added edge passed against the old document"
  exit 1
fi
grep -q 'shows "runtime/selector: runtime/algorithms' "$d/err" || { echo "FAIL: the refusal says: $(cat "$d/err")"; exit 1; }
python3 "$src/tests/style/layers_doc.py" "$d" --write
python3 "$src/tests/style/layers_doc.py" "$d" > /dev/null || { echo "FAIL: --write did not make them equal"; exit 1; }
echo "PASS: a stale edge list in the document is refused; --write brings it back in line"
