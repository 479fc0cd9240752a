#!/usr/bin/env bash
# The shipped hccl-tuned unit under a real systemd as PID 1 (systemd-nspawn), with what the daemon and the
# processes it starts really do: a daemon-run sweep over shm and a tcp@SUBNET link with ranks bound to CPUs and
# sizes that take the single-copy path, a mini-sweep, and a job that reports live timings. The checks inside the
# container are tests/systemd/in_container.sh; this script builds the root file system, installs the project into
# it with `cmake --install` (the unit exactly as shipped, enabled), boots it, and checks what is left after the
# container powered itself off: the driver's verdict, the daemon's journal, the database.
#
# Usage: unit_test.sh SOURCE_DIR BUILD_DIR        (root; exit 77 = skipped: not root)
#   The base root file system (debootstrap --variant=minbase of bookworm, with systemd and the shared libraries
#   the installed binaries link) is cached under BUILD_DIR/deploy/nspawn/base and rebuilt when that package list
#   changes; each run boots a fresh copy of it.
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
work=$build/deploy/nspawn
base=$work/base
run=$work/run
results=$work/results
mkdir -p "$work"
fail() {
  echo "FAILED: $*" >&2
  [[ -f $results/log ]] && { echo "--- in-container log (last 60 lines)" >&2; tail -60 "$results/log" >&2; }
  [[ -f $results/journal ]] && { echo "--- hccl-tuned journal (last 40 lines)" >&2; tail -40 "$results/journal" >&2; }
  exit 1
}
source "$src/tests/systemd/nspawn_lib.sh"
nspawn_require

# --- the project, installed into a staging tree (the same files go into the container) ---
stage=$work/stage
rm -rf "$stage"
DESTDIR=$stage cmake --install "$build" >/dev/null
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
unit=$(find "$stage" -path '*/systemd/system/hccl-tuned.service' | head -1)
[[ -n $unit ]] || fail "cmake --install installed no hccl-tuned.service"
cmp -s "$unit" "$build/deploy/hccl-tuned.service" || fail "the installed unit differs from the configured one"
conf=$(sed -n 's/^ExecStart=.* --config //p' "$unit")
[[ -f $stage$conf ]] || fail "the unit reads $conf, which cmake --install did not install"

# --- the base root file system: minbase + systemd + the packages of the libraries the binaries link ---
libs=$(for b in "$stage$prefix"/bin/hccl-tune "$stage$prefix"/sbin/hccl-tuned; do ldd "$b"; done |
  awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
pkgs=$(for l in $libs; do dpkg -S "$(readlink -f "$l")" 2>/dev/null || dpkg -S "$l"; done | cut -d: -f1 | sort -u |
  tr '\n' ',' | sed 's/,$//')
nspawn_base "$base" "systemd,dbus,iproute2,procps,jq,util-linux,$pkgs"

# --- this run's root: a fresh copy, the project installed, the unit enabled, a user in the hccl-tune group ---
rm -rf "$run" "$results"
cp -a "$base" "$run"
cp -a "$stage/." "$run/"
mkdir -p "$results" "$run/results"
# The config the unit reads, as an administrator would tune it for the test: a stale entry is re-measured after 3 s
# of quiet instead of 120 s; debug logging puts the sweep children's own log lines into the journal, and the
# manager's default environment has every process log at info (the ranks' single-copy threshold among it) and
# single copy taken from 64K messages (the measured threshold here is often above the sizes swept).
cat >>"$run$conf" <<'CONF'
mini_sweep_idle_s = 3
log_level = debug
CONF
mkdir -p "$run/etc/systemd/system.conf.d"
printf '[Manager]\nDefaultEnvironment=HCCL_TUNE_LOG_LEVEL=info HCCL_TUNE_SINGLE_COPY=64K\n' >"$run/etc/systemd/system.conf.d/hccl-tune-test.conf"
systemd-sysusers --root="$run" >/dev/null
grep -q '^hccl-tune:' "$run/etc/group" || fail "systemd-sysusers created no hccl-tune group from the installed sysusers.d file"
chroot "$run" useradd --create-home --groups hccl-tune,hccl-tune-admin --shell /bin/sh tester
systemctl --root="$run" enable hccl-tuned.service >/dev/null 2>&1 || fail "systemctl enable hccl-tuned.service failed"
nspawn_driver "$run" hccl-tune-test "$src/tests/systemd/in_container.sh" /results
echo "== booting the container ($(nproc) CPUs visible)"
nspawn_boot "$run" "$work/console.log" --bind="$results:/results"

# --- what the container left ---
[[ -f $results/status ]] || fail "the in-container checks did not finish (console: $(tail -5 "$work/console.log"))"
cat "$results/log"
[[ $(cat "$results/status") == PASS ]] || fail "in-container checks: $(cat "$results/status")"
if grep -E "status=31/SYS|code=killed|SIGSYS|signal 31|Bad system call" "$results/journal"; then
  fail "a process of the unit was killed by the system call filter"
fi
db=$run/var/lib/hccl-tune/tuning.db
[[ -f $db ]] || fail "no database in the unit's state directory"
[[ $(sqlite3 "$db" 'PRAGMA integrity_check') == ok ]] || fail "integrity_check of $db"
"$build/tuner/hccl-tune" show --db "$db" >"$results/show.txt" || fail "hccl-tune show --db $db"
grep -q allreduce "$results/show.txt" || fail "the unit's database holds no allreduce table: $(cat "$results/show.txt")"
tcp=$(sqlite3 "$db" "SELECT COUNT(*) FROM sweep_samples WHERE configuration LIKE '%link=tcp@10.77.0.0/24%'")
((tcp > 0)) || fail "the daemon-run sweep kept no sample of a tcp@10.77.0.0/24 candidate"
echo "== outside: $db integrity ok; $tcp samples of tcp@10.77.0.0/24 candidates; hccl-tune show --db lists:"
head -20 "$results/show.txt"
echo "PASS: the shipped unit ran a daemon-run sweep, a mini-sweep and a reporting job under systemd"
