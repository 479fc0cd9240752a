#!/usr/bin/env python3
"""`hccl-tune simulate` end to end: every collective's predictions for 16 x 8 ranks from an example profile, in
JSON (every size present, candidates fastest first, winner ranges matching the first candidates, hierarchical only
across nodes), the text form's winner lines, the HTML chart, and bad input named with exit code 2."""
import json
import os
import subprocess
import sys
import tempfile

TUNE, PROFILES = sys.argv[1], sys.argv[2]
PROFILE = os.path.join(PROFILES, "hccs-roce.json")


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(*args):
    return subprocess.run([TUNE, "simulate", *args], capture_output=True, text=True, timeout=60)


def check_json(nodes, rpn):
    r = run("--nodes", str(nodes), "--ranks-per-node", str(rpn), "--profile", PROFILE, "--json")
    if r.returncode != 0:
        fail(f"simulate --json exited {r.returncode}: {r.stderr}")
    out = json.loads(r.stdout)
    if (out["nodes"], out["ranks_per_node"], out["profile"]) != (nodes, rpn, "hccs-roce"):
        fail(f"header {out['nodes']} {out['ranks_per_node']} {out['profile']}")
    names = [c["collective"] for c in out["collectives"]]
    for want in ("allreduce", "allgather", "reducescatter", "broadcast", "alltoall", "barrier"):
        if want not in names:
            fail(f"{want} missing from {names}")
    for coll in out["collectives"]:
        sizes = [s["bytes"] for s in coll["sizes"]]
        if sizes != [8 << i for i in range(24)]:
            fail(f"{coll['collective']}: sizes {sizes}")
        for s in coll["sizes"]:
            times = [c["time_us"] for c in s["candidates"]]
            if not times or times != sorted(times) or times[0] <= 0:
                fail(f"{coll['collective']} {s['bytes']}: times {times}")
            algs = [c["config"].split("(")[0] for c in s["candidates"]]
            if ("hierarchical" in algs) != (nodes > 1 and coll["collective"] in
                                            ("allreduce", "allgather", "reducescatter", "broadcast")):
                fail(f"{coll['collective']} {s['bytes']} on {nodes} nodes: candidates {algs}")
            if "symmetric" in algs:
                fail("symmetric offered as a candidate")
        for w in coll["winners"]:
            for s in coll["sizes"]:
                if w["from"] <= s["bytes"] <= w["to"] and not s["candidates"][0]["config"].startswith(w["algorithm"]):
                    fail(f"{coll['collective']} {s['bytes']}: winner range {w} but first candidate "
                         f"{s['candidates'][0]['config']}")
    return out


check_json(1, 8)
big = check_json(16, 8)
ar = next(c for c in big["collectives"] if c["collective"] == "allreduce")
first, last = ar["sizes"][0]["candidates"][0], ar["sizes"][-1]["candidates"][0]
if first["config"].startswith("ring") or first["time_us"] >= last["time_us"]:
    fail(f"allreduce 128 ranks: 8 B winner {first}, 64 MiB winner {last}")

r = run("--nodes", "16", "--ranks-per-node", "8", "--profile", PROFILE, "--coll", "allreduce")
if r.returncode != 0 or "winners: " not in r.stdout or "128 ranks" not in r.stdout:
    fail(f"text form: rc {r.returncode}\n{r.stdout}{r.stderr}")
with tempfile.TemporaryDirectory() as d:
    html = os.path.join(d, "sim.html")
    r = run("--nodes", "2", "--ranks-per-node", "4", "--profile", PROFILE, "--html", html)
    text = open(html).read() if os.path.exists(html) else ""
    if r.returncode != 0 or text.count("<svg") < 6 or "winner: hierarchical" not in text and "winner:" not in text:
        fail(f"html: rc {r.returncode}, {text.count('<svg')} charts")
    bad = os.path.join(d, "bad.json")
    with open(bad, "w") as f:
        f.write('{"intra": {"latency_us": 1, "message_us": 0, "bandwidth_GBps": 0}}')
    for args, want in ((["--profile", bad], "intra.bandwidth_GBps must be a number > 0"),
                       (["--profile", os.path.join(d, "none.json")], "none.json"),
                       (["--profile", PROFILE, "--min-bytes", "1M", "--max-bytes", "1K"], "--min-bytes <= --max-bytes"),
                       (["--profile", PROFILE, "--coll", "warp"], "warp")):
        r = run("--nodes", "2", "--ranks-per-node", "4", *args)
        if r.returncode != 2 or want not in r.stderr:
            fail(f"{args}: rc {r.returncode}, stderr {r.stderr!r}, wanted {want!r}")
print("PASS: simulate JSON, text, HTML and errors")
