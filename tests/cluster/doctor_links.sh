#!/usr/bin/env bash
# cluster.doctor_links (run by cluster_test.sh doctor_links, which removes the cluster): `hccl-tune doctor`'s (c) links
# step on the emulated cluster, 2 nodes x 1 rank.
#  1. --default-net slow: `hccl-tune links` stores its measurement in both nodes' daemons; a doctor_job of 24
#     1 MiB allreduces dumps on every rank; every dump's links_used has >= 20 MiB of cross-node bytes on slow0
#     (10.77.2.0/24) and none on fast0; the doctor (with node 0's daemon for the stored rates) ranks a "links"
#     warning first whose fix names HCCL_SOCKET_IFNAME=fast0 and link=tcp@10.77.1.0/24.
#  2. --default-net fast (the negative control): the same job's bytes are on fast0, and the doctor gives no finding
#     above info.
# Usage: doctor_links.sh ROOT NAME DIR HCCL_TUNE HCCL_TUNED DOCTOR_JOB
set -euo pipefail
root=$1 NAME=$2 DIR=$3 TUNE=$4 TUNED=$5 JOB=$6
fast=10.77.1.0/24 slow=10.77.2.0/24
fail() { echo "FAILED: $*" >&2; exit 1; }

# job NET: the cluster with NET as the default route, the job's dumps in $DIR/fr-NET, the doctor's JSON and text.
job() {
  local net=$1
  "$root/deploy/cluster/cluster.sh" up --name "$NAME" --tuned "$TUNED" --nodes 2 --default-net "$net" >/dev/null
  if [[ $net == slow ]]; then
    "$root/deploy/cluster/launch.sh" --name "$NAME" --ranks-per-node 1 --timeout 60 --out "$DIR/out" -- \
      "$TUNE" links --launched > "$DIR/links.txt" || fail "hccl-tune links: $(cat "$DIR/links.txt")"
  fi
  HCCL_TUNE_FR_DUMP_DIR="$DIR/fr-$net" "$root/deploy/cluster/launch.sh" --name "$NAME" --ranks-per-node 1 \
    --timeout 60 --out "$DIR/out" -- "$JOB" allreduce 24 $((1 << 20)) > "$DIR/job-$net.txt" ||
    fail "doctor_job over $net: $(cat "$DIR/job-$net.txt")"
  "$TUNE" doctor --dump "$DIR/fr-$net" --daemon "unix:$DIR/n0/tuned.sock" > "$DIR/doctor-$net.txt" ||
    fail "doctor on $net"
  "$TUNE" doctor --dump "$DIR/fr-$net" --daemon "unix:$DIR/n0/tuned.sock" --json > "$DIR/doctor-$net.json" ||
    fail "doctor --json on $net"
  echo "--- doctor, default network $net:"
  cat "$DIR/doctor-$net.txt"
}

# check_dumps DIR USED OTHER: every rank's dump sent >= 20 MiB to the other node over subnet USED, none over OTHER.
check_dumps() {
  python3 - "$@" << 'PY' || fail "dumps in $1"
import glob, json, sys
d, used, other = sys.argv[1:]
dumps = sorted(glob.glob(d + "/fr-*-r*.json"))
if len(dumps) != 2:
    sys.exit(f"{len(dumps)} dumps, expected 2")
for p in dumps:
    j = json.load(open(p))
    by = {l["subnet"]: l["cross_node_bytes"] for l in j["links_used"] if l["kind"] == "tcp"}
    print(f"rank {j['rank']}: cross-node bytes by subnet {by}")
    if by.get(used, 0) < 20 << 20 or by.get(other, 0) != 0:
        sys.exit(f"rank {j['rank']}: expected >= 20 MiB on {used} and none on {other}: {j['links_used']}")
PY
}

job slow
check_dumps "$DIR/fr-slow" $slow $fast
python3 - "$DIR/doctor-slow.json" "$fast" << 'PY' || fail "slow: $(cat "$DIR/doctor-slow.txt")"
import json, sys
f, fast = json.load(open(sys.argv[1]))[0], sys.argv[2]
if f["kind"] != "links" or f["severity"] != "warn":
    sys.exit(f"first finding {f['severity']} {f['kind']}, expected warn links")
if "measured by hccl-tune links" not in " ".join(f["evidence"]):
    sys.exit("the rates are not the stored measurement")
for want in ("HCCL_SOCKET_IFNAME=fast0", "link=tcp@" + fast):
    if want not in f["fix"]:
        sys.exit(f"the fix does not name {want}")
PY

job fast
check_dumps "$DIR/fr-fast" $fast $slow
python3 - "$DIR/doctor-fast.json" << 'PY' || fail "fast: $(cat "$DIR/doctor-fast.txt")"
import json, sys
bad = [f["kind"] + ": " + f["title"] for f in json.load(open(sys.argv[1])) if f["severity"] != "info"]
sys.exit(f"findings above info: {bad}" if bad else 0)
PY
echo "cluster.doctor_links: OK"
