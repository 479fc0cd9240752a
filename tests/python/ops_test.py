"""Every torch.distributed operation on backend hccltune (or the name in argv[1]), run as one rank of a job
started by launch.py. Each rank checks its own outputs against values it computes itself (not against other
ranks), exactly for integers and for floats built from small integers, and exits non-zero on any mismatch.

The backend is registered by the .pth hook: this script never imports hccl_tune_torch.
"""

import datetime
import time

import warnings

import torch
import torch.distributed as dist

warnings.filterwarnings("ignore", message=".*(deprecated|private function).*")

import rankcheck
from rankcheck import BACKEND, n, rank, record, report


def check(name, got, want, exact=True):
    got = got.to(want.dtype)
    ok = torch.equal(got, want) if exact else torch.allclose(got.double(), want.double(), rtol=1e-2, atol=1e-2)
    record(ok, f"{name}: got {got.flatten()[:8].tolist()} want {want.flatten()[:8].tolist()}" if not ok else "")


def data(r, count, dtype, salt=0):
    """Rank r's input: small integers (exact in every dtype), 0/1 for bool."""
    i = torch.arange(count, dtype=torch.int64)
    v = (i * 7 + r * 3 + salt) % 5 + 1
    if dtype == torch.bool:
        return ((i + r + salt) % 3 == 0)
    return v.to(dtype)


FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.uint8, torch.int32, torch.int64]
R = dist.ReduceOp


def fold(op, dtype, count, salt=0):
    xs = [data(r, count, dtype, salt) for r in range(n)]
    if dtype == torch.bool:
        stack = torch.stack([x.to(torch.uint8) for x in xs])
        if op in (R.SUM, R.MAX, R.BOR):
            return stack.amax(0).bool()
        if op in (R.PRODUCT, R.MIN, R.BAND):
            return stack.amin(0).bool()
        out = stack[0]
        for x in stack[1:]:
            out = out ^ x
        return out.bool()
    wide = torch.stack([x.to(torch.float64 if dtype in FLOATS else torch.int64) for x in xs])
    if op == R.SUM:
        out = wide.sum(0)
    elif op == R.PRODUCT:
        out = wide.prod(0)
    elif op == R.MIN:
        out = wide.amin(0)
    elif op == R.MAX:
        out = wide.amax(0)
    elif op == R.AVG:
        out = wide.mean(0)
    else:
        out = xs[0].clone()
        for x in xs[1:]:
            out = out & x if op == R.BAND else out | x if op == R.BOR else out ^ x
        return out
    return out.to(dtype) if dtype not in INTS or op != R.SUM else out.to(dtype)


def main():
    dist.init_process_group(BACKEND, timeout=datetime.timedelta(seconds=60))
    pg = dist.distributed_c10d._get_default_group()
    import hccl_tune_torch  # registered already; imported here only to check the type

    assert isinstance(pg, hccl_tune_torch.ProcessGroupHcclTune), f"process group is {type(pg)}, not ours"
    assert dist.get_backend() == BACKEND, dist.get_backend()
    count = 1031  # prime, not divisible by the world size

    # all_reduce: every op on every dtype it applies to.
    for dtype in FLOATS + INTS + [torch.bool]:
        ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
        if dtype in FLOATS:
            ops.append(R.AVG)
        else:
            ops += [R.BAND, R.BOR, R.BXOR]
        for op in ops:
            t = data(rank, count, dtype)
            dist.all_reduce(t, op=op)
            check(f"all_reduce {dtype} {op}", t, fold(op, dtype, count), exact=op != R.AVG)

    # Non-contiguous input (a transposed view) and an async call with a chained future (DDP's pattern).
    base = data(rank, 6 * 10, torch.float32).view(6, 10)
    t = base.t()
    assert not t.is_contiguous()
    dist.all_reduce(t)
    check("all_reduce non-contiguous", base, fold(R.SUM, torch.float32, 60).view(6, 10))
    t = data(rank, count, torch.float32)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future().then(lambda f: f.value()[0] * 2)
    check("async all_reduce future", fut.wait(), fold(R.SUM, torch.float32, count) * 2)
    assert work.is_completed()

    # Bad input is an error on the calling rank, not a hang.
    try:
        dist.all_reduce(torch.ones(3, dtype=torch.float32), op=R.BAND)
        record(False, "BAND on float32 did not raise")
    except RuntimeError as e:
        assert "bitwise" in str(e), e

    for root in range(n):
        t = data(rank, count, torch.int64) if rank == root else torch.zeros(count, dtype=torch.int64)
        dist.broadcast(t, src=root)
        check(f"broadcast root {root}", t, data(root, count, torch.int64))
        t = data(rank, count, torch.bfloat16)
        dist.reduce(t, dst=root, op=R.MAX)
        if rank == root:
            check(f"reduce root {root}", t, fold(R.MAX, torch.bfloat16, count))
        outs = [torch.zeros(count, dtype=torch.int32) for _ in range(n)] if rank == root else None
        dist.gather(data(rank, count, torch.int32), gather_list=outs, dst=root)
        if rank == root:
            for r in range(n):
                check(f"gather root {root} from {r}", outs[r], data(r, count, torch.int32))
        out = torch.zeros(count, dtype=torch.float16)
        ins = [data(r, count, torch.float16, salt=root) for r in range(n)] if rank == root else None
        dist.scatter(out, scatter_list=ins, src=root)
        check(f"scatter root {root}", out, data(rank, count, torch.float16, salt=root))

    # all_gather of a dtype the runtime has no type for (int16 travels as bytes) and of complex numbers.
    for dtype in [torch.float32, torch.int16, torch.complex64, torch.bool]:
        mine = data(rank, count, dtype if dtype != torch.complex64 else torch.float32).to(dtype)
        outs = [torch.zeros(count, dtype=dtype) for _ in range(n)]
        dist.all_gather(outs, mine)
        for r in range(n):
            want = data(r, count, dtype if dtype != torch.complex64 else torch.float32).to(dtype)
            check(f"all_gather {dtype} from {r}", outs[r], want)
    out = torch.zeros(n * count, dtype=torch.int8)
    dist._all_gather_base(out, data(rank, count, torch.int8))
    check("_all_gather_base", out, torch.cat([data(r, count, torch.int8) for r in range(n)]))
    ins = [data(rank, 5, torch.float64), data(rank, 6, torch.float64, salt=1).view(2, 3)]
    outs = [[torch.zeros(5, dtype=torch.float64), torch.zeros(2, 3, dtype=torch.float64)] for _ in range(n)]
    dist.all_gather_coalesced(outs, ins)
    for r in range(n):
        check(f"all_gather_coalesced {r} a", outs[r][0], data(r, 5, torch.float64))
        check(f"all_gather_coalesced {r} b", outs[r][1], data(r, 6, torch.float64, salt=1).view(2, 3))
    ts = [data(rank, 4, torch.float32), data(rank, 9, torch.float32, salt=2)]
    dist.all_reduce_coalesced(ts)
    check("all_reduce_coalesced a", ts[0], fold(R.SUM, torch.float32, 4))
    check("all_reduce_coalesced b", ts[1], fold(R.SUM, torch.float32, 9, salt=2))

    # reduce_scatter: rank r gets block r of the elementwise sum.
    ins = [data(rank, count, torch.float32, salt=b) for b in range(n)]
    out = torch.zeros(count, dtype=torch.float32)
    dist.reduce_scatter(out, ins)
    check("reduce_scatter", out, fold(R.SUM, torch.float32, count, salt=rank))
    out = torch.zeros(count, dtype=torch.int32)
    dist._reduce_scatter_base(out, torch.cat([data(rank, count, torch.int32, salt=b) for b in range(n)]))
    check("_reduce_scatter_base", out, fold(R.SUM, torch.int32, count, salt=rank))

    # all_to_all_single with uneven splits: rank r sends (r + j + 1) rows of 3 to rank j.
    def rows(src, dst):
        return torch.full((src + dst + 1, 3), src * 100 + dst, dtype=torch.int64)

    send = torch.cat([rows(rank, j) for j in range(n)])
    recv = torch.zeros(sum(j + rank + 1 for j in range(n)), 3, dtype=torch.int64)
    dist.all_to_all_single(recv, send, output_split_sizes=[j + rank + 1 for j in range(n)],
                           input_split_sizes=[rank + j + 1 for j in range(n)])
    check("all_to_all_single uneven", recv, torch.cat([rows(j, rank) for j in range(n)]))
    send = torch.arange(n * 4, dtype=torch.float32) + 1000 * rank
    recv = torch.zeros(n * 4, dtype=torch.float32)
    dist.all_to_all_single(recv, send)
    check("all_to_all_single even", recv,
          torch.cat([torch.arange(rank * 4, rank * 4 + 4, dtype=torch.float32) + 1000 * j for j in range(n)]))
    outs = [torch.zeros(j + 2, dtype=torch.float64) for j in range(n)]
    dist.all_to_all(outs, [torch.full((rank + 2,), float(rank * 10 + j), dtype=torch.float64) for j in range(n)])
    for j in range(n):
        check(f"all_to_all from {j}", outs[j], torch.full((j + 2,), float(j * 10 + rank), dtype=torch.float64))

    # Point to point around the ring (sends first on even ranks to avoid relying on buffering).
    right, left = (rank + 1) % n, (rank - 1) % n
    got = torch.zeros(count, dtype=torch.float32)
    if rank % 2 == 0:
        dist.send(data(rank, count, torch.float32), right)
        dist.recv(got, left)
    else:
        dist.recv(got, left)
        dist.send(data(rank, count, torch.float32), right)
    check("send/recv ring", got, data(left, count, torch.float32))
    dist.barrier()

    # Object collectives (torch builds them on broadcast/all_gather/gather/scatter).
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": rank, "s": "x" * rank})
    assert objs == [{"rank": r, "s": "x" * r} for r in range(n)], objs
    lst = [("hello", rank)] if rank == 0 else [None]
    dist.broadcast_object_list(lst, src=0)
    assert lst == [("hello", 0)], lst
    # The rest of torch's name-gated operations (its own suite runs them for gloo and nccl only).
    dst = n - 1
    gathered = [None] * n if rank == dst else None
    dist.gather_object({"from": rank, "v": [rank] * (rank + 1)}, gathered, dst=dst)
    if rank == dst:
        assert gathered == [{"from": r, "v": [r] * (r + 1)} for r in range(n)], gathered
    got = [None]
    dist.scatter_object_list(got, [("to", r, "y" * r) for r in range(n)] if rank == 0 else None, src=0)
    assert got == [("to", rank, "y" * rank)], got
    checks_before = rankcheck.count()
    try:
        dist.monitored_barrier()
        check("monitored_barrier", torch.tensor(0), torch.tensor(1))  # torch 1.13 allows it on gloo only
    except RuntimeError as e:
        check("monitored_barrier is refused by torch (gloo only)", torch.tensor(int("GLOO" in str(e))),
              torch.tensor(1))
    assert rankcheck.count() == checks_before + 1

    # new_group: a sub-communicator of the first and last rank; the others are not members.
    members = sorted({0, n - 1})
    g = dist.new_group(members)
    if rank in members:
        t = torch.tensor([float(rank + 1)])
        dist.all_reduce(t, group=g)
        check("new_group all_reduce", t, torch.tensor([float(sum(m + 1 for m in members))]))
        assert isinstance(g, hccl_tune_torch.ProcessGroupHcclTune)
    dist.barrier()

    # Timeouts (torch's suite tests them on gloo only): a group made with a 2 s timeout whose rank 0 never
    # joins the barrier fails on the others within the timeout instead of hanging.
    tg = dist.new_group(list(range(n)), timeout=datetime.timedelta(seconds=2))
    if rank != 0:
        t0 = time.monotonic()
        try:
            dist.barrier(group=tg)
            check("barrier timeout raises", torch.tensor(0), torch.tensor(1))
        except RuntimeError as e:
            took = time.monotonic() - t0
            check(f"barrier timeout after {took:.1f} s ({e})", torch.tensor(int(1.5 < took < 30)), torch.tensor(1))
    dist.barrier()
    dist.destroy_process_group()

    report()


if __name__ == "__main__":
    main()
