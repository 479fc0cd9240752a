#!/usr/bin/env python3
"""`hccl-tune export --format mpich-json` read back by MPICH itself.

Usage: mpich_json.py HCCL_TUNE BENCH

A table of runtime mpich-<version> (the version the bench reports) with choices for communicators of 2 and 4 ranks
is imported into a fresh database and exported as MPICH's two selection files (FILE: MPIR level, FILE.ch4: ch4
device level); MPICH runs the bench with MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE and
MPIR_CVAR_CH4_COLL_SELECTION_TUNING_JSON_FILE pointing at them. Debian's MPICH exports no MPIR_* symbols, so which
algorithm ran is read from what it sends: with MPIR_CVAR_NOLOCAL=1 every message goes through UCX, and ltrace on
rank 0 records each ucp_tag_send_nbx (size and tag). Per probe (collective, size, ranks) the messages rank 0 sends
on the measured communicator (barriers left out) must be exactly those of the algorithm the table names, forced
through MPICH's own MPIR_CVAR_<COLL>_INTRA_ALGORITHM in another launch, and differ from those of MPICH's own choice
without the files; a range the table leaves to MPICH (`mpich:auto`) must send what MPICH sends without the files.
So the files changed the choice at both levels' rules (the ch4 file routes allreduce and bcast to the MPIR level)
and to the named algorithm. The bench checks every rank's result of every batch.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_table import fail, peer_table, run  # noqa: E402

HT, BENCH = sys.argv[1], sys.argv[2]

# world -> collective -> [(range, configuration)]
TABLE = {
    2: {"broadcast": [("0-", "mpich:scatter_ring_allgather")]},
    4: {"allreduce": [("0-8K", "mpich:recursive_doubling"), ("8K-", "mpich:auto")],
        "allgather": [("0-16K", "mpich:ring"), ("16K-", "mpich:auto")],
        "broadcast": [("0-", "mpich:scatter_recursive_doubling_allgather")],
        "reducescatter": [("0-", "mpich:pairwise")]},
}
# (ranks, collective, bytes, the algorithm the files must run: None = MPICH's own choice)
PROBES = [(4, "allreduce", 4096, "recursive_doubling"), (4, "allreduce", 65536, None),
          (4, "allgather", 4096, "ring"), (4, "allgather", 65536, None),
          (4, "broadcast", 4096, "scatter_recursive_doubling_allgather"), (4, "reducescatter", 4096, "pairwise"),
          (3, "broadcast", 4096, "scatter_ring_allgather")]
ITERS = 3


def launch(ranks, commands, env, trace=None):
    cmd = ["mpiexec.mpich", "-np", str(ranks)]
    if trace:
        cmd += ["sh", "-c", 'if [ "$PMI_RANK" = 0 ]; then exec ltrace -o "$0" -e ucp_tag_send_nbx "$1"; '
                'else exec "$1"; fi', trace, BENCH]
    else:
        cmd.append(BENCH)
    out = run(cmd, input="\n".join(commands + ["quit"]) + "\n", env=env, timeout=300)
    answers = [l[2:] for l in out.splitlines() if l.startswith("@ ")]
    for a in answers[1:]:
        if not a.startswith("times "):
            fail(f"the bench answered: {a}")
    if len(answers) != len(commands) + 1:
        fail(f"{len(answers)} answers to {len(commands)} commands:\n{out}")
    return answers


def sends(trace):
    """Per command, rank 0's sends (size, tag) on the measured communicator, barriers left out."""
    windows, current = [], None
    for line in open(trace):
        # libmpich.so.12->ucp_tag_send_nbx(0x7f.., 0x7f.., 4096, 0x1f10000000000007) = 0
        if "ucp_tag_send_nbx(" not in line:
            continue
        args = [a.strip() for a in line.split("(", 1)[1].split(")")[0].split(",")]
        size, tag = int(args[2], 0), int(args[3], 0)
        if size == 1024 and tag == 0:  # the bench sharing a command line: a new command
            if current is None or current:
                current = []
                windows.append(current)
            continue
        if current is not None:
            current.append((size, tag))
    out = []
    for w in windows:
        # The barrier before each timed call runs on the measured communicator: its context is that of the tags.
        # What comes before the first barrier is the communicator's creation (the first command duplicates it).
        barrier = [i for i, (s, t) in enumerate(w) if s == 0 and t & 0xFF == 1]
        contexts = {w[i][1] >> 32 for i in barrier}
        out.append([(s, t & 0xFFFFFFFF) for i, (s, t) in enumerate(w)
                    if barrier and i > barrier[0] and t >> 32 in contexts and not (s == 0 and t & 0xFF == 1)])
    return out


def signatures(ranks, commands, env, tmp):
    trace = os.path.join(tmp, "ltrace.out")
    if os.path.exists(trace):
        os.unlink(trace)
    launch(ranks, commands, dict(env, MPIR_CVAR_NOLOCAL="1"), trace)
    got = sends(trace)
    # The window before the first command holds start-up traffic; the last one is "quit".
    got = [w for w in got][: len(commands)]
    if len(got) != len(commands):
        fail(f"ltrace recorded {len(got)} commands of {len(commands)}")
    return got


def check_refusals(db, tmp, fp):
    for args, want in [(["--format", "mpich-json", "--topology", fp, "-"], "give a path"),
                       (["--format", "openmpi-rules", "--topology", fp, "-"], "was measured with mpich"),
                       (["--format", "hccl-env", "-"], "no tuned table of hccl-tune")]:
        p = subprocess.run([HT, "export", "--db", db] + args, capture_output=True, text=True)
        if p.returncode == 0 or want not in p.stderr:
            fail(f"export {' '.join(args)}: exit {p.returncode}, expected an error saying '{want}': {p.stderr}")


def main():
    tmp = tempfile.mkdtemp(prefix="hccl-tune-mpich-json-")
    try:
        probe_all(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def probe_all(tmp):
    version = launch(1, [], dict(os.environ))[0].split()[2]
    release = run([HT, "--version"]).split()[1].rsplit(".", 1)[0]
    fp, table = peer_table(f"mpich-{version}", release, TABLE, "mpich:auto")
    db, src = os.path.join(tmp, "t.db"), os.path.join(tmp, "table.json")
    json.dump(table, open(src, "w"))
    run([HT, "import", src, "--db", db])
    files = os.path.join(tmp, "mpich.json")
    run([HT, "export", "--format", "mpich-json", "--db", db, "--topology", fp, files])
    for f in (files, files + ".ch4"):
        json.load(open(f))  # both are JSON
    check_refusals(db, tmp, fp)
    with_files = dict(os.environ, MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE=files,
                      MPIR_CVAR_CH4_COLL_SELECTION_TUNING_JSON_FILE=files + ".ch4")
    for ranks in sorted({p[0] for p in PROBES}):
        probes = [p for p in PROBES if p[0] == ranks]
        own = [f"measure {c} {b} auto 0 {ITERS} 0" for _, c, b, _ in probes]
        forced = [f"measure {c} {b} {a or 'auto'} 0 {ITERS} 0" for _, c, b, a in probes]
        named = signatures(ranks, forced, os.environ, tmp)
        exported = signatures(ranks, own, with_files, tmp)
        plain = signatures(ranks, own, os.environ, tmp)
        for (_, coll, size, alg), n, e, p in zip(probes, named, exported, plain):
            what = alg or "MPICH's own choice"
            print(f"{ranks} ranks {coll} {size} B: files -> {len(e)} sends {sorted({s for s, _ in e})}; "
                  f"{what} -> {len(n)}; no files -> {len(p)} sends {sorted({s for s, _ in p})}", flush=True)
            if not e:
                fail(f"{ranks} ranks {coll} {size} B: no sends recorded on the measured communicator")
            if e != n:
                fail(f"{ranks} ranks {coll} {size} B: with the files MPICH sent {e}, {what} sends {n}")
            if alg and e == p:
                fail(f"{ranks} ranks {coll} {size} B: {alg} sends what MPICH's own choice sends: the probe "
                     "cannot tell the files' effect")
    # A real sweep of MPICH's algorithms lands in the same database under its own fingerprint, its files export
    # alongside and MPICH starts with them.
    out = run([HT, "sweep", "--runtime", "mpich", "--ranks", "2", "--coll", "allgather", "--min-bytes", "1K",
               "--max-bytes", "1K", "--cap-ms", "20", "--db", db, "--force", "--plain", "--json"], timeout=600)
    done = [json.loads(l) for l in out.splitlines() if l.startswith("{") and '"done"' in l]
    if not done or not done[-1]["entries"] or done[-1]["topology"] == fp:
        fail(f"the sweep stored no table of its own: {out}")
    swept = os.path.join(tmp, "swept.json")
    run([HT, "export", "--format", "mpich-json", "--db", db, "--topology", done[-1]["topology"], swept])
    launch(2, [f"measure allgather 1024 auto 0 2 0"],
           dict(os.environ, MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE=swept,
                MPIR_CVAR_CH4_COLL_SELECTION_TUNING_JSON_FILE=swept + ".ch4"))
    print(f"PASS: {len(PROBES)} probes sent what the exported files name")


if __name__ == "__main__":
    main()
