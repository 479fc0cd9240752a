"""hccl_tune_torch.LinkInspector, run as one rank of a job. Every rank checks its own copy of the table and its
own pairs' links in use.

  links_test.py hccltune HCCL_TUNE HCCL_TUNED      one node (launch.py): every pair shm, figures positive and
                                                   consistent with `HCCL_TUNE links --ranks N --json`, which stores
                                                   its table in a private HCCL_TUNED; LinkInspector(source="stored")
                                                   on every rank reads that very table back from it; used links
                                                   shm, then tcp over loopback in a group whose calls force link=tcp
  links_test.py hccltune - --cluster FAST SLOW     emulated cluster (deploy/cluster/launch.sh, file rendezvous):
                                                   pairs on one node shm, across nodes tcp on FAST by default with
                                                   FAST faster than SLOW; used links on FAST, then, in a group whose
                                                   calls force link=tcp@SLOW, on SLOW while the best link is on FAST
"""

import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import torch
import torch.distributed as dist

warnings.filterwarnings("ignore", message=".*(deprecated|private function).*")

from rankcheck import BACKEND, n, rank, record, report  # noqa: E402

from hccl_tune_torch import Bandwidth, LinkInspector, Latency  # noqa: E402

TUNE = sys.argv[2]
CLUSTER = len(sys.argv) == 6 and sys.argv[3] == "--cluster"
TUNED = sys.argv[3] if len(sys.argv) == 4 else None
FAST, SLOW = (sys.argv[4], sys.argv[5]) if CLUSTER else (None, None)
RPN = int(os.environ.get("LOCAL_WORLD_SIZE", n))


def node(r):
    return r // RPN if CLUSTER else 0


def start_daemon(tmp):
    """A private hccl-tuned on a socket in `tmp` (rank 0); returns its process and gRPC target."""
    sock, conf = os.path.join(tmp, "tuned.sock"), os.path.join(tmp, "tuned.conf")
    open(conf, "w").close()
    proc = subprocess.Popen([TUNED, "--socket", sock, "--db", os.path.join(tmp, "tuning.db"),
                             "--config", conf])
    for _ in range(200):
        if os.path.exists(sock) or proc.poll() is not None:
            break
        time.sleep(0.05)
    if not os.path.exists(sock):
        raise RuntimeError(f"hccl-tuned did not come up (exit {proc.poll()})")
    return proc, f"unix:{sock}"


def cli_links(daemon):
    """`hccl-tune links` on this node, before the job's group exists (rank 0; one node only), storing its table in
    `daemon`; then `--stored` prints that table back."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                                            "MASTER_ADDR", "MASTER_PORT")}
    run = [TUNE, "links", "--ranks", str(n), "--json", "--daemon", daemon]
    done = subprocess.run(run + ["--bytes", "1M", "--iters", "3"], env=env, check=True, capture_output=True,
                          text=True, timeout=120)
    record("stored in daemon" in done.stderr, f"hccl-tune links did not say it stored its table: {done.stderr}")
    back = subprocess.run(run + ["--stored"], env=env, check=True, capture_output=True, text=True, timeout=60)
    measured, stored = json.loads(done.stdout), json.loads(back.stdout)
    strip = [{k: v for k, v in j.items() if k != "source"} for j in measured["links"]]
    record(strip == [{k: v for k, v in j.items() if k != "source"} for j in stored["links"]] and
           {j["source"] for j in stored["links"]} == {"stored"}, f"--stored: {stored} after {measured}")
    return measured


def bind_like_the_cli():
    """Binds this rank as `hccl-tune links` binds its ranks (tuner/bench/spawn.cc): rank r to the r-th allowed CPU,
    modulo their number. With more ranks than CPUs, whether two ranks share a CPU decides a pair's latency (a
    cache-line round trip, or a scheduler hand-over 50-100x longer): the comparison with the CLI is then like for
    like, pair by pair."""
    cpus = sorted(os.sched_getaffinity(0))
    if n > 1 and len(cpus) > 1:
        os.sched_setaffinity(0, {cpus[rank % len(cpus)]})


def check_link(l, a, b, t0):
    """A measured link of pair a-b: figures with units, source and time."""
    record(l.src == min(a, b) and l.dst == max(a, b), f"{a}-{b}: link is {l.src}-{l.dst}")
    record(isinstance(l.bandwidth, Bandwidth) and l.bandwidth > 0 and str(l.bandwidth).endswith("bit/s"),
           f"{a}-{b}: bandwidth {l.bandwidth!r} ({l.bandwidth})")
    record(isinstance(l.latency, Latency) and l.latency > 0 and str(l.latency)[-2:] in ("us", "ms"),
           f"{a}-{b}: latency {l.latency!r} ({l.latency})")
    now = datetime.datetime.now(datetime.timezone.utc)
    record(l.source == "measured" and t0 - datetime.timedelta(seconds=1) <= l.when <= now,
           f"{a}-{b}: source {l.source} when {l.when} (test started {t0})")
    record(json.loads(json.dumps(l.to_dict()))["bandwidth_gbps"] == float(l.bandwidth), f"{a}-{b}: to_dict")


def check_table(insp, t0):
    for a in range(n):
        for b in range(n):
            if a == b:
                continue
            l = insp.get_link(a, b)
            check_link(l, a, b, t0)
            record(l.default, f"{a}-{b}: get_link is not the default link")
            if node(a) == node(b):
                record(l.type == "shm" and l.network is None and l.src_interface is None,
                       f"{a}-{b} (one node): {l}")
            else:
                record(l.type == "tcp" and l.network == FAST and l.src_interface == "fast0" and
                       l.dst_interface == "fast0", f"{a}-{b} (two nodes): default {l}")
                slow = [x for x in insp.links() if (x.src, x.dst) == (l.src, l.dst) and x.network == SLOW]
                record(len(slow) == 1 and slow[0].src_interface == "slow0", f"{a}-{b}: slow links {slow}")
                if slow:
                    check_link(slow[0], a, b, t0)
                    record(l.bandwidth >= 3 * slow[0].bandwidth, f"{a}-{b}: fast {l.bandwidth}, slow {slow[0].bandwidth}")
                best = insp.best_link(a, b)
                record(best.network == FAST, f"{a}-{b}: best link {best}")
    pairs = n * (n - 1) // 2
    inter = sum(1 for a in range(n) for b in range(a + 1, n) if node(a) != node(b))
    plain = insp.links(plain=True)
    record(len(plain) == pairs + inter and all(type(d) is dict for d in plain),
           f"links(plain=True): {len(plain)} rows, expected {pairs + inter}")
    for bad in ((0, 0), (0, n), (-1, 1)):
        try:
            insp.get_link(*bad)
            record(False, f"get_link{bad} did not raise")
        except ValueError as e:
            record("to itself" in str(e) or f"not in this group of {n} ranks" in str(e), f"get_link{bad}: {e}")


def cli_inconsistencies(insp, cli):
    """The CLI's table against this rank's: the same pairs, types and networks, figures within a factor of 20 (two
    measurements on a shared 2-core machine, where a rank that loses its CPU for a moment swings one by 10x).
    Returns what differs."""
    rows = {(j["src"], j["dst"], j["network"]): j for j in cli["links"]}
    bad = [] if len(rows) == len(insp.links()) else [f"hccl-tune links: {len(rows)} links, here {len(insp.links())}"]
    for l in insp.links():
        j = rows.get((l.src, l.dst, l.network or ""))
        if j is None or j["type"] != l.type:
            bad.append(f"{l}: hccl-tune links says {j}")
            continue
        for key, mine in (("bandwidth_gbps", l.bandwidth), ("latency_us", l.latency)):
            if not (j[key] > 0 and 0.05 <= mine / j[key] <= 20):
                bad.append(f"{l}: {key} {mine} here, {j[key]} from the CLI")
    return bad


def check_cli_consistent(insp, cli):
    """cli_inconsistencies on every rank; figures out of range are measured again (collectively, up to 3 times:
    a unit or pairing error fails every time, a descheduled rank does not)."""
    for attempt in range(3):
        bad = cli_inconsistencies(insp, cli)
        worst = torch.tensor([len(bad)])
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)
        if worst.item() == 0:
            record(True, "")
            return insp
        print(f"attempt {attempt + 1}: {bad[:3]}", flush=True)
        insp = LinkInspector(bytes=1 << 20, iters=3)
    record(False, f"not consistent with hccl-tune links in 3 measurements: {bad[:5]}")
    return insp


def check_used(insp, want_network, group):
    """This rank's links in use after an all_reduce on `group`: those of the all_reduce (the latest operation; a
    peer it did not talk to keeps the link of its own last collective) shm inside a node, tcp on `want_network`
    else. Returns how many of them cross nodes."""
    t = torch.ones(1 << 18)
    dist.all_reduce(t, group=group)
    record(torch.all(t == group.size()).item(), f"all_reduce on the group: {t[:4].tolist()}")
    used = insp.used_links()
    me = group.rank()
    record(len(used) >= 1, "no link in use after an all_reduce")
    crossing = 0
    last = max((u.operation for u in used), default=0)
    for u in used:
        again = insp.used_link(u.dst, me)
        record(again is not None and again.dst == u.dst and again.type == u.type, f"used_link({u.dst}, {me}): {again}")
        record(u.type in ("shm", "tcp") and 1 <= u.operation <= last, f"used {u}")
        if u.operation != last:
            continue
        same = node(u.src) == node(u.dst)
        if want_network is None and same:
            record(u.type == "shm" and u.network is None, f"used {u}: expected shm")
            record(u.bandwidth == insp.get_link(u.src, u.dst).bandwidth, f"used {u}: bandwidth {u.bandwidth}")
        else:
            net = want_network or FAST
            record(u.type == "tcp" and u.network == net and u.peer_address, f"used {u}: expected tcp on {net}")
            if not same:
                crossing += 1
                record(u.interface == ("slow0" if net == SLOW else "fast0"), f"used {u}: interface")
                best = insp.best_link(u.src, u.dst)
                record(best.network == FAST and (net == FAST) == (u.network == best.network),
                       f"used {u} against best {best}")
    if n > 2:
        other = [r for r in range(n) if r != me][:2]
        try:
            insp.used_link(*other)
            record(False, f"used_link{tuple(other)} on rank {me} did not raise")
        except ValueError as e:
            record("own pairs" in str(e), f"used_link{tuple(other)}: {e}")
    return crossing


def check_stored(cli, daemon):
    """LinkInspector(source="stored") on this rank reads the table `hccl-tune links` stored (`cli`): the same
    links and figures, source "stored", when = the time they were measured."""
    os.environ["HCCL_TUNE_DAEMON"] = daemon
    stored = LinkInspector(source="stored")
    want = {(j["src"], j["dst"], j["network"]): j for j in cli["links"]}
    record(stored.ranks == n and len(stored.links()) == len(want), f"stored table: {stored.links()}")
    for l in stored.links():
        j = want.get((l.src, l.dst, l.network or ""), {})
        when = datetime.datetime.fromtimestamp(j.get("measured_unix_ms", 0) / 1e3, tz=datetime.timezone.utc)
        record(l.source == "stored" and l.type == j.get("type") and float(l.bandwidth) == j.get("bandwidth_gbps") and
               float(l.latency) == j.get("latency_us") and l.when == when, f"stored {l} against {j}")
    try:
        LinkInspector(source="guess")
        record(False, "source='guess' did not raise")
    except ValueError as e:
        record("source must be" in str(e), f"source='guess': {e}")
    del os.environ["HCCL_TUNE_DAEMON"]


def main():
    t0 = datetime.datetime.now(datetime.timezone.utc)
    tmp = tempfile.TemporaryDirectory(prefix="links-test-") if rank == 0 and TUNED else None
    daemon, target = start_daemon(tmp.name) if tmp else (None, None)
    cli = cli_links(target) if rank == 0 and not CLUSTER else None
    if not CLUSTER:
        bind_like_the_cli()
    if CLUSTER:
        store = os.environ["HCCL_TUNE_STORE"][len("file://"):]
        dist.init_process_group(BACKEND, init_method=f"file://{store}/torch", rank=rank, world_size=n)
    else:
        dist.init_process_group(BACKEND)
    try:
        LinkInspector(bytes=0)
        record(False, "bytes=0 did not raise")
    except ValueError as e:
        record("bytes must be > 0" in str(e), f"bytes=0: {e}")
    # Between nodes 4 MiB, as `hccl-tune links`: the fast network's shaper lets a 1 MiB burst through unevenly.
    insp = LinkInspector(bytes=(4 if CLUSTER else 1) << 20, iters=3)
    if rank == 0:
        print(insp, flush=True)
    check_table(insp, t0)
    if not CLUSTER:
        got = [cli, target]
        dist.broadcast_object_list(got, src=0)
        if got[1]:
            check_stored(got[0], got[1])
        insp = check_cli_consistent(insp, got[0])
    crossing = check_used(insp, None, dist.group.WORLD)
    if CLUSTER:
        total = torch.tensor([crossing])
        dist.all_reduce(total)
        record(total.item() >= 2, f"only {total.item()} used links cross nodes after a world all_reduce")

    # A group whose all_reduce is forced onto a network: HCCL_TUNE_ALGO is read when the group is created.
    os.environ["HCCL_TUNE_ALGO"] = f"allreduce:0-=ring(link=tcp{'@' + SLOW if CLUSTER else ''})"
    forced = dist.new_group(list(range(n)))
    del os.environ["HCCL_TUNE_ALGO"]
    finsp = LinkInspector(forced, bytes=256 << 10, iters=1)
    crossing = check_used(finsp, SLOW if CLUSTER else "127.0.0.0/8", forced)
    if CLUSTER:
        total = torch.tensor([crossing])
        dist.all_reduce(total)
        record(total.item() >= 2, f"only {total.item()} forced links cross nodes")
    if rank == 0:
        for u in finsp.used_links():
            print(f"forced: {u}; best {finsp.best_link(u.src, u.dst)}", flush=True)
    # The world's links in use are still its own (the forced group's calls and both measurements ran elsewhere).
    for u in insp.used_links():
        record(u.type == "shm" or u.network == FAST, f"world after the forced group: {u}")
    dist.destroy_process_group()
    if daemon:
        daemon.terminate()
        record(daemon.wait(timeout=30) == 0, f"hccl-tuned exit {daemon.returncode}")
    report()


if __name__ == "__main__":
    main()
