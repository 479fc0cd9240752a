#!/usr/bin/env python3
"""`hccl-tune env --runtime openmpi|mpich`: the files hccl-tuned keeps for peer tables, and the lines naming them.

Usage: peer_env.py HCCL_TUNE HCCL_TUNED OPENMPI_BENCH MPICH_BENCH

A daemon on a fresh state directory gets a table of Open MPI and one of MPICH (one node, 4 ranks). For each
runtime, `hccl-tune env` must print `export` lines naming files in the daemon's exports directory whose content is
what `hccl-tune export` writes for the table, and the library must start with them (the bench runs a collective and
checks every rank's result). A new version of a table rewrites its file, forgetting the table removes it, a daemon
restarted on the state directory writes the files again, and asking for a world the daemon has no table of, or
through --db, is an error that says so. (That the files change the libraries' choices is proved by
export.openmpi_rules and export.mpich_json.)
"""
import json
import os
import shutil
import shlex
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_table import peer_table  # noqa: E402
import time

HT, TUNED, BENCHES = sys.argv[1], sys.argv[2], {"openmpi": sys.argv[3], "mpich": sys.argv[4]}
VERSIONS = {}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(cmd, ok=True, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    if ok and p.returncode != 0:
        fail(f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def launcher(runtime, ranks):
    if runtime == "mpich":
        return ["mpiexec.mpich", "-np", str(ranks)]
    cmd = ["mpirun.openmpi", "--oversubscribe", "-np", str(ranks)]
    return cmd[:1] + (["--allow-run-as-root"] if os.geteuid() == 0 else []) + cmd[1:]


def bench(runtime, env, commands):
    out = run(launcher(runtime, 2) + [BENCHES[runtime]], input="\n".join(commands + ["quit"]) + "\n",
              env=env).stdout
    answers = [l[2:] for l in out.splitlines() if l.startswith("@ ")]
    if len(answers) != len(commands) + 1 or any(not a.startswith("times ") for a in answers[1:]):
        fail(f"{runtime} bench: {out}")
    return answers[0].split()[2]


def table(runtime, alg):
    release = run([HT, "--version"]).stdout.split()[1].rsplit(".", 1)[0]
    rows = [("0-4K", alg), ("4K-", "openmpi:default" if runtime == "openmpi" else "mpich:auto")]
    return peer_table(f"{runtime}-{VERSIONS[runtime]}", release, {4: {"allreduce": rows}}, "")


class Daemon:
    def __init__(self, d):
        self.d, self.target, self.proc = d, "unix:" + os.path.join(d, "t.sock"), None

    def start(self):
        log = open(os.path.join(self.d, "tuned.log"), "a")
        self.proc = subprocess.Popen([TUNED, "--socket", os.path.join(self.d, "t.sock"), "--db",
                                      os.path.join(self.d, "state", "t.db")], stderr=log)
        for _ in range(100):
            if os.path.exists(os.path.join(self.d, "t.sock")):
                return
            time.sleep(0.1)
        fail("the daemon did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def env_lines(daemon, runtime, extra=()):
    out = run([HT, "env", "--runtime", runtime, "--daemon", daemon.target] + list(extra)).stdout
    values = {}
    for line in out.splitlines():
        if line.startswith("export "):
            name, value = line[len("export "):].split("=", 1)
            values[name] = shlex.split(value)[0]
        elif not line.startswith("#"):
            fail(f"env printed a line that is neither a comment nor an export: {line}")
    return values


def check_files(daemon, runtime, fp, tmp):
    v = env_lines(daemon, runtime)
    exports = os.path.join(daemon.d, "state", "exports")
    if runtime == "openmpi":
        want = {"OMPI_MCA_coll_tuned_use_dynamic_rules", "OMPI_MCA_coll_tuned_dynamic_rules_filename"}
        files = [v.get("OMPI_MCA_coll_tuned_dynamic_rules_filename", "")]
        run([HT, "export", "--format", "openmpi-rules", "--daemon", daemon.target, "--topology", fp,
             os.path.join(tmp, "x")])
        expected = [os.path.join(tmp, "x")]
    else:
        want = {"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE", "MPIR_CVAR_CH4_COLL_SELECTION_TUNING_JSON_FILE"}
        files = [v.get(n, "") for n in sorted(want, reverse=True)]
        run([HT, "export", "--format", "mpich-json", "--daemon", daemon.target, "--topology", fp,
             os.path.join(tmp, "x")])
        expected = [os.path.join(tmp, "x"), os.path.join(tmp, "x.ch4")]
    if set(v) != want:
        fail(f"env --runtime {runtime} set {sorted(v)}, expected {sorted(want)}")
    for f, e in zip(files, expected):
        if os.path.dirname(f) != exports:
            fail(f"{f} is not in the daemon's exports directory {exports}")
        if open(f).read() != open(e).read():
            fail(f"{f} differs from what hccl-tune export writes for table {fp}")
    return v, files


def main():
    tmp = tempfile.mkdtemp(prefix="hccl-tune-peer-env-")
    daemon = Daemon(tmp)
    try:
        for rt in BENCHES:
            VERSIONS[rt] = bench(rt, dict(os.environ), [])
        daemon.start()
        fps = {}
        for rt, alg in [("openmpi", "openmpi:ring(segment=0)"), ("mpich", "mpich:recursive_doubling")]:
            fps[rt], t = table(rt, alg)
            src = os.path.join(tmp, rt + ".json")
            json.dump(t, open(src, "w"))
            run([HT, "import", src, "--daemon", daemon.target])
        for rt in BENCHES:
            v, files = check_files(daemon, rt, fps[rt], tmp)
            bench(rt, dict(os.environ, **v), ["measure allreduce 1024 " + ("default" if rt == "openmpi" else "auto")
                                              + " 0 2 0"])
            print(f"{rt}: env names {' '.join(files)}; the library ran with them", flush=True)
        # A new version rewrites the file.
        before = open(files_of(daemon, "openmpi")[0]).read()
        fp, t = table("openmpi", "openmpi:recursive_doubling(segment=0)")
        json.dump(t, open(os.path.join(tmp, "v2.json"), "w"))
        run([HT, "import", os.path.join(tmp, "v2.json"), "--daemon", daemon.target])
        _, files = check_files(daemon, "openmpi", fp, tmp)
        if open(files[0]).read() == before:
            fail("a new version of the Open MPI table left its rules file as it was")
        # Errors say what is missing.
        p = run([HT, "env", "--runtime", "openmpi", "--world", "2", "--daemon", daemon.target], ok=False)
        if p.returncode == 0 or "no table of openmpi on one node of 2 ranks" not in p.stderr or fp not in p.stderr:
            fail(f"env --world 2: exit {p.returncode}: {p.stderr}")
        p = run([HT, "env", "--runtime", "openmpi", "--db", os.path.join(tmp, "state", "t.db")], ok=False)
        if p.returncode == 0 or "--daemon" not in p.stderr:
            fail(f"env --db: exit {p.returncode}: {p.stderr}")
        # Forgetting the table removes its file; a restarted daemon writes the others again.
        run([HT, "forget", "--topology", fps["openmpi"], "--daemon", daemon.target])
        if os.path.exists(files[0]):
            fail(f"{files[0]} is still there after the table was forgotten")
        daemon.stop()
        mpich_files = files_of_dir(tmp, fps["mpich"])
        for f in mpich_files:
            os.unlink(f)
        daemon.start()
        check_files(daemon, "mpich", fps["mpich"], tmp)
        print("PASS: env names the daemon's files for both runtimes; they follow the tables")
    finally:
        if daemon.proc and daemon.proc.poll() is None:
            daemon.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def files_of(daemon, runtime):
    v = env_lines(daemon, runtime)
    return [v[k] for k in sorted(v) if k.endswith("FILE") or k.endswith("filename")]


def files_of_dir(tmp, fp):
    d = os.path.join(tmp, "state", "exports")
    return [os.path.join(d, n) for n in os.listdir(d) if n.startswith(fp)]


if __name__ == "__main__":
    main()
