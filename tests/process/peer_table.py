"""A hand-made tuned table of another runtime, in `hccl-tune export`'s JSON, for the exporter tests: one node of
4 ranks over shared memory, the entries `table` names ({world: {collective: [(bytes range, configuration)]}});
and the tests' failure and command helpers."""
import hashlib
import json
import subprocess
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        fail(f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p.stdout


def peer_table(runtime, release, table, runner_up):
    """(fingerprint, tables document) for runtime `runtime` (e.g. "openmpi-4.1.4") and hccl-tune release `release`."""
    topo = json.dumps({"format": 2, "inter": [], "intra": ["shm"], "nodes": 1, "ranks_per_node": [4],
                       "release": release, "runtime": runtime}, separators=(",", ":"), sort_keys=True)
    fp = hashlib.sha256(topo.encode()).hexdigest()[:16]
    entries = []
    for world, colls in table.items():
        for coll, rules in colls.items():
            for rng, cfg in rules:
                entries.append({"collective": coll, "dtype": "fp32", "world_size": world, "bytes": rng,
                                "configuration": cfg, "time_us": 1.0, "busbw_gbps": 0.0, "samples": 1,
                                "runner_up": runner_up, "margin": 0.1, "default_margin": 0.1,
                                "sweep_id": "test", "library_version": runtime,
                                "measured_unix_ms": 1, "rank_time_us": 0.0})
    return fp, {"format": "hccl-tune-tables", "format_version": 1,
                "tables": [{"fingerprint": fp, "topology": topo, "version": 1, "created_unix_ms": 1,
                            "content_hash": "", "entries": entries}]}
