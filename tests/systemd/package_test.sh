#!/usr/bin/env bash
# The Debian packages end to end: deploy/package.sh builds them (prefix /usr, lintian clean of errors); apt
# installs them into a clean bookworm root (minbase + systemd: every library they need must come from their
# Depends) and they are purged again there without systemd running; then the root boots under systemd-nspawn and
# tests/systemd/package_in_container.sh installs them with systemd running, uses the service and removes and
# purges everything (see that script for the checks).
# Usage: package_test.sh SOURCE_DIR BUILD_DIR        (root; exit 77 = skipped: not root)
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
work=$build/deploy/package-test
results=$work/results
run=$work/run
mounted=()
cleanup() {
  local m
  for m in "${mounted[@]}"; do umount "$m" 2>/dev/null || true; done
}
trap cleanup EXIT
fail() {
  echo "FAILED: $*" >&2
  [[ -f $results/log ]] && { echo "--- in-container log (last 60 lines)" >&2; tail -60 "$results/log" >&2; }
  exit 1
}
source "$src/tests/systemd/nspawn_lib.sh"
nspawn_require dpkg-deb lintian cpack
mkdir -p "$work"

echo "== deploy/package.sh"
BUILD_DIR=$work/build SKIP_DEPS=1 "$src/deploy/package.sh" "$work/packages" | tail -8 ||
  fail "deploy/package.sh failed"
debs=$work/packages
(($(ls "$debs"/*.deb | wc -l) == 3)) || fail "expected 3 packages in $debs: $(ls "$debs")"

echo "== apt installs the packages into a clean root, then dpkg purges them there (no systemd running)"
clean=$build/deploy/nspawn/clean
nspawn_base "$clean" "systemd,dbus,iproute2,procps,jq,util-linux"
rm -rf "$run" "$results"
cp -a "$clean" "$run"
mkdir -p "$results" "$run/results" "$run/debs" "$run/tmp/debs"
cp /etc/apt/sources.list.d/debian.sources "$run/etc/apt/sources.list.d/" 2>/dev/null && rm -f "$run/etc/apt/sources.list"
cp "$debs"/*.deb "$run/tmp/debs/"
mount -t proc proc "$run/proc" && mounted+=("$run/proc")
# The host's package cache lends the .debs it holds (the torch stack is large); apt fetches the rest.
mount --bind /var/cache/apt/archives "$run/var/cache/apt/archives" && mounted+=("$run/var/cache/apt/archives")
chroot "$run" apt-get update -q >"$work/apt.log" 2>&1 || fail "apt-get update in the root: $(tail -3 "$work/apt.log")"
DEBIAN_FRONTEND=noninteractive chroot "$run" sh -c 'apt-get install -y -q --no-install-recommends /tmp/debs/*.deb' \
  >>"$work/apt.log" 2>&1 || fail "apt-get install of the packages: $(tail -5 "$work/apt.log")"
grep -E "^(Setting up|Unpacking) (hccl|python3-hccl)" "$work/apt.log" | sort -u
echo "apt pulled $(grep -c '^Setting up' "$work/apt.log") packages in all"
chroot "$run" /usr/bin/hccl-tune --version || fail "hccl-tune does not run in the clean root"
chroot "$run" /usr/sbin/hccl-tuned --version || fail "hccl-tuned does not run in the clean root"
chroot "$run" dpkg -P python3-hccl-tune hccl-tuned hccl-tune >>"$work/apt.log" 2>&1 ||
  fail "dpkg -P without systemd: $(tail -5 "$work/apt.log")"
[[ ! -e $run/usr/bin/hccl-tune && ! -e $run/etc/hccl-tune ]] || fail "dpkg -P in the root left files"
rm -rf "$run/tmp/debs"
cleanup
mounted=()

echo "== boot: install, use, remove and purge with systemd running"
nspawn_driver "$run" hccl-tune-package-test "$src/tests/systemd/package_in_container.sh" /results /debs
nspawn_boot "$run" "$work/console.log" --bind="$results:/results" --bind-ro="$debs:/debs"
[[ -f $results/status ]] || fail "the in-container checks did not finish (console: $(tail -5 "$work/console.log"))"
cat "$results/log"
[[ $(cat "$results/status") == PASS ]] || fail "in-container checks: $(cat "$results/status")"
echo "PASS: packages built (lintian: no errors), installed by apt into a clean root, served, removed and purged"
