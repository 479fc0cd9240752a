#!/usr/bin/env bash
# Builds the Debian packages (hccl-tune, hccl-tuned, python3-hccl-tune) in their own build tree configured for
# the prefix /usr, and checks them with lintian (errors fail; warnings are printed).
#   deploy/package.sh [OUT_DIR]        default OUT_DIR: build-deb/packages
#   BUILD_DIR=... (default build-deb)  SKIP_DEPS=1: do not run deploy/install-deps.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
[[ ${SKIP_DEPS:-0} == 1 ]] || deploy/install-deps.sh
build_dir=${BUILD_DIR:-build-deb}
out=${1:-$build_dir/packages}
generator=()
if [[ ! -f "$build_dir/CMakeCache.txt" ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
  -DHCCL_TUNE_BUILD_TESTS=OFF -DHCCL_TUNE_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "$build_dir" --parallel "$(nproc)"
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/*.deb
(cd "$build_dir" && cpack -G DEB -B "$out/cpack" >/dev/null 2>"$out/cpack.log") || { cat "$out/cpack.log" >&2; exit 1; }
mv "$out"/cpack/*.deb "$out"/ && rm -f "$out/cpack.log"
rm -rf "$out/cpack"
for deb in "$out"/*.deb; do
  echo "== $(basename "$deb")"
  dpkg-deb --field "$deb" Package Version Depends | sed 's/^/  /'
done
# lintian: errors fail the build of the packages; warnings and notes are shown.
lintian_out=$(lintian --tag-display-limit 0 "$out"/*.deb 2>&1 || true)
[[ -z $lintian_out ]] || echo "$lintian_out"
if grep -q '^E: ' <<<"$lintian_out"; then
  echo "package.sh: lintian reports errors" >&2
  exit 1
fi
echo "package.sh: $(ls "$out"/*.deb | wc -l) packages in $out, lintian: no errors"
