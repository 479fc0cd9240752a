#!/usr/bin/env bash
# The function-length check fails when it should: in a scratch tree, a function of 150 lines makes
# function_length.py exit 1 naming its file, line and name (braces in comments and strings, a lambda and a class
# with an inline member around it do not confuse it); the same function split in two passes; an allow-list entry
# lets the long one through, and an entry that matches no long function fails the check.
# Usage: tests/style/function_length_test.sh SOURCE_DIR
set -euo pipefail
src=${1:?source dir}
script="$src/tests/style/function_length.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
mkdir -p "$tmp/runtime/x" "$tmp/tests/style"

fn() {  # NAME STATEMENTS CALLEE: a function of STATEMENTS + 3 lines returning CALLEE(total), or total
  echo "int $1(int total) {"
  for ((i = 0; i < $2; ++i)); do echo "  total += ${i};  // { not a brace"; done
  echo "  return ${3:-}(total);"
  echo '}'
}
{
  echo '#define HT_MACRO(x) if (x) {'
  echo 'namespace hccltune {'
  echo 'struct Small { int f() const { return 1; } };'
  echo 'int Short() {'
  echo '  auto lambda = [](int v) { return v + 1; };'
  echo '  const char* s = "}}}";'
  echo '  return lambda(s[0]);'
  echo '}'
  fn Long 150
  echo '}  // namespace hccltune'
} > "$tmp/runtime/x/long.cc"

if out=$(python3 "$script" "$tmp" 2>&1); then fail "a 153-line function passed: $out"; fi
grep -q '^runtime/x/long.cc:9: Long is 153 lines, over the limit of 100$' <<<"$out" || fail "wrong finding: $out"
[ "$(grep -c 'over the limit' <<<"$out")" = 1 ] || fail "more than the long function reported: $out"

echo 'runtime/x/long.cc:Long  # being split' > "$tmp/tests/style/function_length_allow.txt"
python3 "$script" "$tmp" >/dev/null || fail "an allowed long function failed the check"

{
  echo 'namespace hccltune {'
  fn First 75
  fn Long 75 First
  echo '}  // namespace hccltune'
} > "$tmp/runtime/x/long.cc"
if out=$(python3 "$script" "$tmp" 2>&1); then fail "a stale allow-list entry passed: $out"; fi
grep -q 'runtime/x/long.cc:Long is allowed but is no longer over 100 lines' <<<"$out" || fail "wrong finding: $out"
: > "$tmp/tests/style/function_length_allow.txt"
python3 "$script" "$tmp" >/dev/null || fail "the split functions failed the check"
echo "function_length refuses long functions and stale allow-list entries"
