#!/usr/bin/env python3
"""`hccl-tune export --format openmpi-rules` read back by Open MPI itself.

Usage: openmpi_rules.py HCCL_TUNE BENCH

A table of runtime openmpi-<version> (the version the bench reports) with choices for communicators of 2 and 4 ranks
is imported into a fresh database, exported as a coll/tuned dynamic rules file, and Open MPI runs the bench with
OMPI_MCA_coll_tuned_dynamic_rules_filename pointing at it. Rank 0 runs under ltrace, which records every entry into
the collective's ompi_coll_base_<coll>_intra_* functions (Debian's Open MPI has no debug verbosity that would say
which algorithm ran). Per probe (collective, size, ranks) the function of the algorithm the table names must be
entered, with the bench's own bookkeeping kept off these collectives (tuner/peers/mpi_bench.c). A 3-rank
communicator gets the 2-rank rules (the nearest smaller measured size), a 1-rank one none (Open MPI's fixed rules,
no error). Without the file Open MPI must choose differently at a probe, so the file is what changed the choice.
The bench checks every rank's result of every batch.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_table import fail, peer_table, run  # noqa: E402

HT, BENCH = sys.argv[1], sys.argv[2]

# Open MPI 4 coll/tuned algorithm -> the libmpi function it enters.
FUNCTIONS = {
    ("allreduce", "basic_linear"): "ompi_coll_base_allreduce_intra_basic_linear",
    ("allreduce", "recursive_doubling"): "ompi_coll_base_allreduce_intra_recursivedoubling",
    ("allreduce", "ring"): "ompi_coll_base_allreduce_intra_ring",
    ("allreduce", "segmented_ring"): "ompi_coll_base_allreduce_intra_ring_segmented",
    ("allreduce", "rabenseifner"): "ompi_coll_base_allreduce_intra_redscat_allgather",
    ("allgather", "neighbor"): "ompi_coll_base_allgather_intra_neighborexchange",
    ("allgather", "bruck"): "ompi_coll_base_allgather_intra_bruck",
    ("broadcast", "split_binary_tree"): "ompi_coll_base_bcast_intra_split_bintree",
    ("broadcast", "chain"): "ompi_coll_base_bcast_intra_chain",
    ("reducescatter", "butterfly"): "ompi_coll_base_reduce_scatter_block_intra_butterfly",
    ("reducescatter", "recursive_halving"): "ompi_coll_base_reduce_scatter_block_intra_recursivehalving",
}
PATTERN = {"allreduce": "allreduce_intra", "allgather": "allgather_intra", "broadcast": "bcast_intra",
           "reducescatter": "reduce_scatter_block_"}

# world -> collective -> [(range, configuration)]
TABLE = {
    2: {"allreduce": [("0-4K", "openmpi:rabenseifner(segment=0)"), ("4K-", "openmpi:basic_linear(segment=0)")],
        "allgather": [("0-", "openmpi:neighbor(segment=0)")],
        "broadcast": [("0-", "openmpi:chain(segment=8K)")],
        "reducescatter": [("0-", "openmpi:recursive_halving(segment=0)")]},
    4: {"allreduce": [("0-4K", "openmpi:segmented_ring(segment=1K)"), ("4K-", "openmpi:recursive_doubling(segment=0)")],
        "allgather": [("0-", "openmpi:bruck(segment=0)")],
        "broadcast": [("0-", "openmpi:split_binary_tree(segment=8K)")],
        "reducescatter": [("0-", "openmpi:butterfly(segment=0)")]},
}
# (ranks, collective, bytes, the world whose rules apply, also run without the file). The probes of one rank count
# share a launch under ltrace (tens of seconds each on a loaded machine), one more for those also run without it.
PROBES = [(2, "allreduce", 1024, 2, True), (2, "allgather", 4096, 2, False), (2, "broadcast", 65536, 2, True),
          (2, "reducescatter", 4096, 2, False), (4, "allreduce", 65536, 4, False), (4, "broadcast", 65536, 4, False),
          (3, "allreduce", 65536, 2, False)]


def launch(ranks, commands, env, trace_pattern=None, trace_out=None):
    cmd = ["mpirun.openmpi", "--oversubscribe", "--mca", "coll_tuned_use_dynamic_rules", "1", "-np", str(ranks)]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    if trace_pattern:
        cmd += ["sh", "-c", 'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then exec ltrace -o "$0" -x "$1" "$2"; '
                'else exec "$2"; fi', trace_out, trace_pattern, BENCH]
    else:
        cmd.append(BENCH)
    out = run(cmd, input="\n".join(commands + ["quit"]) + "\n", env=env, timeout=300)
    answers = [l[2:] for l in out.splitlines() if l.startswith("@ ")]
    for a in answers[1:]:
        if not a.startswith("times "):
            fail(f"the bench answered: {a}")
    return answers


def entered(ranks, probes, env, tmp):
    """Per probe (collective, bytes) of one launch: the ompi_coll_base_* functions of the collective rank 0
    entered, and the fan-outs of the chains it built. The bench duplicates its communicator for every command, so
    each ompi_comm_dup entry starts the next probe's part of the trace."""
    trace = os.path.join(tmp, "ltrace.out")
    if os.path.exists(trace):
        os.unlink(trace)
    pattern = "+".join([f"ompi_coll_base_{PATTERN[c]}*@libmpi.so*" for c in sorted({c for c, _ in probes})] +
                       ["ompi_coll_base_topo_build_chain@libmpi.so*", "ompi_comm_dup@libmpi.so*"])
    launch(ranks, [f"measure {coll} {size} default 0 1 0" for coll, size in probes], env, pattern, trace)
    # ltrace writes "ompi_coll_base_..._intra_ring@libmpi.so.40(...)" per entry (the library part when the
    # caller is another library) and "ompi_coll_base_topo_build_chain(4, 0x..., 0 <unfinished ...>".
    windows = []
    for line in open(trace) if os.path.exists(trace) else []:
        name = line.split("(", 1)[0].split("->")[-1].split("@")[0].strip()
        if name == "ompi_comm_dup":
            windows.append((set(), set()))
        elif windows and name == "ompi_coll_base_topo_build_chain":
            windows[-1][1].add(int(line.split("(", 1)[1].split(",")[0], 0))
        elif windows and name.startswith("ompi_coll_base_"):
            windows[-1][0].add(name)
    if len(windows) < len(probes):
        fail(f"ltrace saw {len(windows)} communicators duplicated for {len(probes)} commands")
    return [(sorted(f), fo) for f, fo in windows[-len(probes):]]


def choice(world, coll, size):
    for rng, cfg in TABLE[world][coll]:
        lo, hi = rng.split("-")
        lo = int(lo.replace("K", "")) * (1024 if "K" in lo else 1)
        hi = int(hi.replace("K", "")) * 1024 if hi else None
        if size >= lo and (hi is None or size < hi):
            return cfg.split(":")[1].split("(")[0]
    fail(f"no test entry for {coll} {size} at world {world}")


def main():
    tmp = tempfile.mkdtemp(prefix="hccl-tune-ompi-rules-")
    hello = launch(1, [], dict(os.environ))[0].split()
    version = hello[2]
    release = run([HT, "--version"]).split()[1].rsplit(".", 1)[0]
    fp, table = peer_table(f"openmpi-{version}", release, TABLE, "openmpi:default")
    db = os.path.join(tmp, "t.db")
    src = os.path.join(tmp, "table.json")
    json.dump(table, open(src, "w"))
    run([HT, "import", src, "--db", db])
    rules = os.path.join(tmp, "rules.txt")
    run([HT, "export", "--format", "openmpi-rules", "--db", db, "--topology", fp, rules])
    # This runtime's HCCL_ALGO export does not read a peer's table.
    p = subprocess.run([HT, "export", "--format", "hccl-env", "--db", db, "-"], capture_output=True, text=True)
    if p.returncode == 0 or "no tuned table of hccl-tune" not in p.stderr:
        fail(f"hccl-env export of an Open MPI table: exit {p.returncode}: {p.stdout}{p.stderr}")
    # A real sweep of the library's algorithms lands in the same database under its own fingerprint, and its
    # rules export alongside: one table per runtime, never mixed.
    out = run([HT, "sweep", "--runtime", "openmpi", "--ranks", "2", "--coll", "allreduce", "--min-bytes", "1K",
               "--max-bytes", "1K", "--cap-ms", "20", "--db", db, "--force", "--plain", "--json"], timeout=600)
    done = [json.loads(l) for l in out.splitlines() if l.startswith("{") and '"done"' in l]
    if not done or not done[-1]["entries"]:
        fail(f"the sweep reported no winners: {out}")
    swept = done[-1]["topology"]
    if swept == fp:
        fail("the sweep on 2 ranks stored under the 4-rank test table's fingerprint")
    for e in done[-1]["entries"]:
        if not e["configuration"].startswith("openmpi:"):
            fail(f"the Open MPI sweep stored {e['configuration']}")
    shown = run([HT, "show", "--db", db])
    if swept not in shown or fp not in shown:
        fail(f"hccl-tune show lists not both tables:\n{shown}")
    run([HT, "export", "--format", "openmpi-rules", "--db", db, "--topology", swept, os.path.join(tmp, "swept.txt")])
    with_rules = dict(os.environ, OMPI_MCA_coll_tuned_dynamic_rules_filename=rules)
    differs = 0
    for ranks in sorted({p[0] for p in PROBES}):
        probes = [p for p in PROBES if p[0] == ranks]
        got_all = entered(ranks, [(c, b) for _, c, b, _, _ in probes], with_rules, tmp)
        compared = [p for p in probes if p[4]]
        plain_all = dict(zip([(c, b) for _, c, b, _, _ in compared],
                             entered(ranks, [(c, b) for _, c, b, _, _ in compared], dict(os.environ), tmp)
                             if compared else []))
        for (_, coll, size, world, compare), (got, fanouts) in zip(probes, got_all):
            alg = choice(world, coll, size)
            want = FUNCTIONS[(coll, alg)]
            print(f"{ranks} ranks {coll} {size} B: rules file -> {' '.join(got) or '(nothing)'}; expected {want}",
                  flush=True)
            if want not in got:
                fail(f"{ranks} ranks {coll} {size} B: Open MPI did not run {want} with the rules file")
            # A chain is built with the fan-out a forced chain gets (the sweep's), not 1 (a pipeline).
            if alg == "chain" and fanouts != {4}:
                fail(f"{ranks} ranks {coll} {size} B: the chain was built with fan-outs {sorted(fanouts)}, not 4")
            if compare:
                plain = plain_all[(coll, size)][0]
                print(f"{ranks} ranks {coll} {size} B: no file    -> {' '.join(plain) or '(nothing)'}", flush=True)
                differs += want not in plain
    if differs == 0:
        fail("Open MPI's fixed rules chose the same everywhere: the probes do not show the file's effect")
    # A single rank: the fixed rules (no error), the result still checked by the bench.
    launch(1, ["measure allreduce 1024 default 0 2 0"], with_rules)
    print(f"PASS: {len(PROBES)} probes ran the algorithm of the exported rules; {differs} ran another without it")


if __name__ == "__main__":
    main()
