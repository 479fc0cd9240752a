#!/usr/bin/env bash
# The tuning database on a file system that fills up or is mounted read-only (a small tmpfs; needs root, else
# skipped with 77):
#  1. a sweep into a database whose file system fills up part way fails naming the full database; the database
#     stays whole (PRAGMA integrity_check), the table stored before is unchanged, and once there is room again
#     `--resume` finishes the sweep;
#  2. with no byte left, storing fails with an error that says the file system is full, and nothing stored
#     before is lost;
#  3. on a read-only mount, reading and storing fail with an error that says the mount is read-only.
# usage: db_full_disk.sh HCCL_TUNE_BIN
set -euo pipefail
bin=$1
[[ $(id -u) == 0 ]] || { echo "skipped: mounting a tmpfs needs root"; exit 77; }
d=$(mktemp -d)
mnt=$d/mnt
mkdir "$mnt"
trap 'umount "$mnt" 2> /dev/null || true; rm -rf "$d"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export HCCL_TUNE_DAEMON=off HCCL_EXEC_TIMEOUT=30
sweep() { "$bin" sweep --ranks 2 --min-bytes 1K --cap-ms 20 --force "$@"; }
versions() { sqlite3 "$1" "SELECT fingerprint, version, content_hash FROM table_versions ORDER BY 1, 2"; }

# A database with one stored table, and its export.
sweep --db "$d/base.db" --coll allreduce --max-bytes 64K > /dev/null 2> "$d/err" || fail "the first sweep: $(cat "$d/err")"
"$bin" export --db "$d/base.db" "$d/before.json" || fail "export"
before=$(versions "$d/base.db")
[[ -n $before ]] || fail "no table version after the first sweep"

# 1. A sweep that fills the file system part way.
mount -t tmpfs -o size=$((($(stat -c %s "$d/base.db") + 1024 * 1024) / 1024))k tmpfs "$mnt"
cp "$d/base.db" "$mnt/t.db"
if sweep --db "$mnt/t.db" --coll allreduce,allgather,reducescatter --max-bytes 4M > /dev/null 2> "$d/err"; then
  fail "a sweep into a full file system exited 0"
fi
grep -q "sqlite ($mnt/t.db): database or disk is full" "$d/err" || fail "the sweep's error: $(cat "$d/err")"
[[ $(sqlite3 "$mnt/t.db" "PRAGMA integrity_check") == ok ]] || fail "integrity_check after the full sweep"
[[ $(versions "$mnt/t.db") == "$before" ]] || fail "the stored versions changed: $(versions "$mnt/t.db")"
"$bin" export --db "$mnt/t.db" "$d/after.json" || fail "export after the full sweep"
cmp -s <(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["tables"], sort_keys=True))' \
  "$d/before.json") <(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["tables"], sort_keys=True))' \
  "$d/after.json") || fail "the stored table differs after the full sweep"
# Its row says failed, or still running where the disk had no room left even for that; --resume takes either.
failed=$(sqlite3 "$mnt/t.db" "SELECT id FROM sweeps WHERE status IN ('failed', 'running')")
[[ -n $failed ]] || fail "no failed sweep row: $(sqlite3 "$mnt/t.db" "SELECT id, status FROM sweeps")"
mount -o remount,size=64m "$mnt"
"$bin" sweep --resume "$failed" --db "$mnt/t.db" --force > /dev/null 2> "$d/err" || fail "--resume: $(tail -5 "$d/err")"
[[ $(sqlite3 "$mnt/t.db" "SELECT status FROM sweeps WHERE id = '$failed'") == done ]] || fail "the resumed sweep's row"
[[ $(sqlite3 "$mnt/t.db" "PRAGMA integrity_check") == ok ]] || fail "integrity_check after --resume"
echo "1. full part way: the sweep failed naming the full database, integrity ok, the stored table unchanged;"
echo "   with room again --resume $failed finished it"
umount "$mnt"

# 2. No byte left: the error says so; nothing is lost.
mount -t tmpfs -o size=$((($(stat -c %s "$d/base.db") + 64 * 1024) / 1024))k tmpfs "$mnt"
cp "$d/base.db" "$mnt/t.db"
dd if=/dev/zero of="$mnt/fill" bs=4k 2> /dev/null || true
if "$bin" import --db "$mnt/t.db" "$d/before.json" > /dev/null 2> "$d/err"; then fail "import on a full disk exited 0"; fi
grep -q "no space left on the file system holding $mnt" "$d/err" || fail "the full disk's error: $(cat "$d/err")"
rm "$mnt/fill"
[[ $(sqlite3 "$mnt/t.db" "PRAGMA integrity_check") == ok ]] || fail "integrity_check after the full disk"
[[ $(versions "$mnt/t.db") == "$before" ]] || fail "the stored versions changed on the full disk"
echo "2. no space: $(head -c 200 "$d/err")"

# 3. Read-only: reading and storing are both refused naming the mount (the database runs in WAL mode, whose -shm
# file must be writable); nothing is lost.
mount -o remount,ro "$mnt"
for verb in show import; do
  args=(--db "$mnt/t.db")
  [[ $verb == import ]] && args+=("$d/before.json")
  if "$bin" $verb "${args[@]}" > /dev/null 2> "$d/err"; then fail "$verb on a read-only mount exited 0"; fi
  grep -q "the file system holding $mnt is mounted read-only" "$d/err" || fail "$verb's read-only error: $(cat "$d/err")"
done
mount -o remount,rw "$mnt"
[[ $(versions "$mnt/t.db") == "$before" ]] || fail "the stored versions changed on the read-only mount"
echo "3. read-only: $(head -c 200 "$d/err")"
echo PASS
