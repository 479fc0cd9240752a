# Sourced by the online-tuning process tests (online.sh, mini_sweep.sh, metrics_prometheus.sh).

# two_rank_topology HCCL_TUNE: sets $topo, the topology JSON of 2 ranks on one node for this release, and $fp, its
# fingerprint.
two_rank_topology() {
  local release
  release=$("$1" --version | sed -E 's/^hccl-tune ([0-9]+\.[0-9]+).*/\1/')
  topo="{\"format\":2,\"inter\":[],\"intra\":[\"shm\"],\"nodes\":1,\"ranks_per_node\":[2],\"release\":\"$release\",\"runtime\":\"hccl-tune\"}"
  fp=$(printf '%s' "$topo" | sha256sum | cut -c1-16)
}

# ring_table FILE: an import file for $fp/$topo with one entry, int32 allreduce of every size on 2 ranks: winner
# ring, runner-up one_shot measured 1.2x the winner (within the policy's exploration budget).
ring_table() {
  python3 - "$1" "$fp" "$topo" <<'PY'
import json, sys
path, fp, topo = sys.argv[1:]
entry = {"collective": "allreduce", "dtype": "int32", "world_size": 2, "bytes": "0-",
         "configuration": "ring(channels=1,link=auto)", "time_us": 100.0, "rank_time_us": 100.0,
         "busbw_gbps": 0.0, "samples": 10, "runner_up": "one_shot(channels=1,link=auto)", "margin": 0.2,
         "default_margin": 0.2, "sweep_id": "test", "library_version": "test", "measured_unix_ms": 0}
json.dump({"format": "hccl-tune-tables", "format_version": 1, "tables": [{
    "fingerprint": fp, "topology": topo, "version": 1, "created_unix_ms": 0, "content_hash": "",
    "entries": [entry]}]}, open(path, "w"))
PY
}

# The online policy's settings that decide within a job of a few thousand calls (config-file lines).
quick_policy_conf() {
  printf '%s\n' "online_min_samples = 20" "online_window = 40" "online_explore_every = 4" \
    "online_explore_calls = 100" "online_explore_min_samples = 10" "online_interval_ms = 100"
}
