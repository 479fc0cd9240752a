"""Edge cases of the hccltune backend (or the backend in argv[1]), run as one rank of a job started by launch.py:

- collectives issued inside a future's `then` callback and waited there (PowerSGD's DDP comm hook does
  `.get_future().wait()` inside `.then`; DDP with that hook runs too): they used to hang forever, the callback
  running on the progress thread the nested collective queued behind; futures still complete in issue order;
- a process-group timeout longer than HCCL_EXEC_TIMEOUT's range (timedelta(days=36500), torch's "forever")
  overflowed into a negative execution timeout: operations failed at once, differently on each rank;
- an output tensor whose elements share memory (expand()) ran the whole collective, then failed; now refused
  at the call;
- a call the backend's own checks refuse on one rank only (a TORCH_CHECK, before the communicator sees it) left
  the other ranks waiting until the timeout; now they fail within seconds naming that rank and its reason.

A watchdog (faulthandler) ends a rank that hangs, with every thread's stack, so a regression fails rather than
hangs. Usage (under launch.py): edges_test.py [BACKEND [PART...]], PART one of nested, powersgd, order, timeout,
overlap, refusal.
"""

import datetime
import faulthandler
import sys
import time

import torch
import torch.distributed as dist

import rankcheck
from rankcheck import BACKEND, n, rank, record, report

WATCHDOG_S = 120


def check(name, ok, detail=""):
    record(bool(ok), f"{name}: {detail}" if detail else name)


def nested_in_then():
    """A blocking collective inside a then-callback, as nested.py and PowerSGD do it."""
    t = torch.ones(4)

    def cb(f):
        t2 = torch.full((4,), 2.0)
        dist.all_reduce(t2)  # work.wait() inside the callback
        t3 = torch.full((4,), 3.0)
        got = dist.all_reduce(t3, async_op=True).get_future().wait()  # future.wait(), as PowerSGD
        return [f.value()[0], t2, got[0]]

    got = dist.all_reduce(t, async_op=True).get_future().then(cb).wait()
    for name, g, v in zip(("outer", "nested wait()", "nested future.wait()"), got, (1.0, 2.0, 3.0)):
        check(f"then-callback: {name}", torch.equal(g, torch.full((4,), v * n)), g.tolist())

    # Two levels: the callback's collective has a callback of its own that runs another one.
    def inner(f):
        t5 = torch.full((2,), 5.0)
        dist.all_reduce(t5)
        return t5

    def outer(f):
        return dist.all_reduce(torch.full((2,), 4.0), async_op=True).get_future().then(inner).wait()

    got = dist.broadcast(torch.zeros(2), src=0, async_op=True).get_future().then(outer).wait()
    check("two nested levels", torch.equal(got, torch.full((2,), 5.0 * n)), got.tolist())


def powersgd():
    """DDP with torch's PowerSGD comm hook, whose callbacks wait on further all_reduces (compression from step 2)."""
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    ddp = DistributedDataParallel(model)
    state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=2, start_powerSGD_iter=2)
    ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    for step in range(5):
        torch.manual_seed(100 + 10 * step + rank)
        loss = ddp(torch.randn(16, 32)).pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    w = torch.cat([p.detach().flatten() for p in model.parameters()])
    ws = [torch.zeros_like(w) for _ in range(n)]
    dist.all_gather(ws, w)
    check("PowerSGD: parameters equal on every rank", all(torch.equal(ws[0], x) for x in ws))


def completions_in_order():
    """Futures complete in issue order: when one's callback runs, every earlier one is completed."""
    works = []
    late = []

    def cb(k):
        def run(f):
            if not all(w.is_completed() for w in works[:k]):
                late.append(k)
            time.sleep(0.002 if k % 5 == 0 else 0)  # a slow callback must not reorder later completions
        return run

    for k in range(24):
        w = dist.all_reduce(torch.full((16,), float(k)), async_op=True)
        works.append(w)
        w.get_future().then(cb(k))
    for w in works:
        w.wait()
    check("futures complete in issue order", not late, f"earlier futures not completed for {late}")
    check("every async result", all(torch.equal(w.result()[0], torch.full((16,), float(k * n)))
                                   for k, w in enumerate(works)))


def huge_timeout():
    """timedelta(days=36500) is clamped to HCCL_EXEC_TIMEOUT's longest (1 day), the same on every rank."""
    g = dist.new_group(list(range(n)), timeout=datetime.timedelta(days=36500))
    if rank == 1:
        time.sleep(1)  # the others wait for it: no immediate timeout
    t = torch.ones(3)
    try:
        dist.all_reduce(t, group=g)
        check("all_reduce with a 100-year timeout", torch.equal(t, torch.full((3,), float(n))), t.tolist())
    except RuntimeError as e:
        check("all_reduce with a 100-year timeout", False, str(e)[:300])
    try:
        x = torch.arange(5.0)
        if rank == 0:
            dist.send(x, 1, group=g)
        elif rank == 1:
            time.sleep(0.5)
            y = torch.zeros(5)
            dist.recv(y, 0, group=g)
            check("send/recv with a 100-year timeout", torch.equal(x, y), y.tolist())
    except RuntimeError as e:
        check("send/recv with a 100-year timeout", False, str(e)[:300])
    try:
        dist.barrier(group=g)
    except RuntimeError as e:
        check("barrier with a 100-year timeout", False, str(e)[:300])


def overlapping_outputs():
    """Outputs made by expand() are refused at the call (every rank alike, so nothing is left waiting)."""
    def exp(k=4):
        return torch.ones(1).expand(k)

    cases = {
        "allreduce": lambda: dist.all_reduce(exp(), async_op=True),
        "broadcast": lambda: dist.broadcast(exp(), src=0, async_op=True),
        "allgather": lambda: dist.all_gather([torch.zeros(4)] * (n - 1) + [exp()], torch.ones(4), async_op=True),
        "_allgather_base": lambda: dist.all_gather_into_tensor(exp(4 * n), torch.ones(4), async_op=True),
        "reduce_scatter": lambda: dist.reduce_scatter(exp(), [torch.ones(4)] * n, async_op=True),
        "all_to_all_single": lambda: dist.all_to_all_single(exp(2 * n), torch.ones(2 * n), async_op=True),
        "all_to_all": lambda: dist.all_to_all([exp(2)] * n, [torch.ones(2)] * n, async_op=True),
    }
    if rank == 1:  # no sender needed: the receive is refused before it is posted
        cases["recv"] = lambda: dist.irecv(exp(), 0)
    for op, call in cases.items():
        try:
            w = call()
            try:
                w.wait()
                check(f"{op}: expanded output refused", False, "ran and succeeded")
            except RuntimeError as e:
                check(f"{op}: expanded output refused at the call", False, f"failed only in wait(): {str(e).splitlines()[0]}")
        except RuntimeError as e:
            msg = str(e)
            check(f"{op}: expanded output refused at the call", op in msg and "share memory" in msg, msg[:300])
    t = torch.ones(4)
    dist.all_reduce(t)
    check("the group works after the refusals", torch.equal(t, torch.full((4,), float(n))), t.tolist())


def refused_on_one_rank():
    """Rank 1's backend refuses its all_reduce (AVG of an integer tensor); the others' wait ends in seconds,
    naming rank 1 and its reason, not after the group's 60 s timeout. On a group of its own (it breaks)."""
    g = dist.new_group(list(range(n)), timeout=datetime.timedelta(seconds=60))
    t0 = time.monotonic()
    try:
        if rank == 1:
            dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist.ReduceOp.AVG, group=g)
        else:
            dist.all_reduce(torch.ones(4), group=g)
        check("one rank's refused all_reduce fails", False, "it returned")
    except RuntimeError as e:
        msg = str(e)
        if rank == 1:
            check("refused at the call", "AVG" in msg, msg[:300])
        else:
            check("the others fail naming rank 1's refusal", "rank 1 refused its allreduce" in msg and "AVG" in msg,
                  msg[:400])
    elapsed = time.monotonic() - t0
    check("within seconds, not the 60 s timeout", elapsed < 20, f"{elapsed:.1f} s")


def main():
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    dist.init_process_group(BACKEND, timeout=datetime.timedelta(seconds=60))
    only = set(sys.argv[2:])  # parts to run (default: all)
    for name, part in (("nested", nested_in_then), ("powersgd", powersgd), ("order", completions_in_order),
                       ("timeout", huge_timeout), ("overlap", overlapping_outputs), ("refusal", refused_on_one_rank)):
        if only and name not in only:
            continue
        before = rankcheck.count()
        part()
        print(f"rank {rank}: {name}: {rankcheck.count() - before} checks", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    faulthandler.cancel_dump_traceback_later()
    report()


if __name__ == "__main__":
    main()
