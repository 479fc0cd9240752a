#!/usr/bin/env bash
# Every C/C++ source file of the project is clang-formatted (.clang-format at the root): clang-format
# --dry-run -Werror over the tracked files (or, outside a git checkout, every file under the source dirs).
# Exit 77 (skipped) when clang-format is not installed (deploy/install-deps.sh installs it).
# Usage: tests/style/clang_format.sh SOURCE_DIR
set -euo pipefail
src=${1:?source dir}
command -v clang-format >/dev/null || { echo "clang-format not installed: skipped"; exit 77; }
cd "$src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- '*.cc' '*.h' '*.c')
else
  mapfile -t files < <(find daemon db links policies proto python rpc runtime tests tuner examples -name '*.cc' -o -name '*.h' \
    -o -name '*.c' 2>/dev/null)
fi
((${#files[@]})) || { echo "no source files found under $src" >&2; exit 1; }
if ! out=$(clang-format --dry-run -Werror "${files[@]}" 2>&1); then
  echo "$out" | grep 'error:' | sed -E 's/:[0-9]+:[0-9]+: error:.*//' | sort | uniq -c | sed 's/^/not clang-formatted: /' >&2
  echo "run: clang-format -i FILE (clang-format $(clang-format --version | grep -o '[0-9][0-9.]*' | head -1))" >&2
  exit 1
fi
echo "clang-format: ${#files[@]} files formatted"
