"""Point-to-point on backend hccltune (or the name in argv[1]; the same script passes on gloo): tags match by
(peer, tag) and not by issue order, messages with one tag stay in order, sends and receives never wait behind
collectives or each other, and a size mismatch fails both sides with a message naming the sizes while later
messages still arrive intact. Run as every rank of a job started by launch.py; every rank checks what it
received against values it computes itself.
"""

import datetime
import warnings

import torch
import torch.distributed as dist

warnings.filterwarnings("ignore", message=".*(deprecated|private function).*")

from rankcheck import BACKEND, n, rank, record, report


def check(name, cond, detail=""):
    record(cond, f"{name} {detail}")


def payload(src, dst, tag, count):
    """What rank src sends to rank dst with `tag`: distinct per (src, dst, tag), exact in float32."""
    return torch.arange(count, dtype=torch.float32) % 97 + src * 1000 + dst * 100 + tag


def main():
    dist.init_process_group(BACKEND, timeout=datetime.timedelta(seconds=60))
    assert dist.get_backend() == BACKEND, dist.get_backend()
    peers = [p for p in range(n) if p != rank]

    # 1. Tags match out of issue order: every rank sends tag 1 then tag 2 (different sizes) to every peer and
    #    receives tag 2 first. Matching in issue order would put tag 1's data in tag 2's buffer (sizes differ).
    works = []
    for p in peers:
        works.append(dist.isend(payload(rank, p, 1, 300), p, tag=1))
        works.append(dist.isend(payload(rank, p, 2, 500), p, tag=2))
    for p in peers:
        t2 = torch.zeros(500)
        dist.recv(t2, p, tag=2)
        check(f"tag 2 from {p}", torch.equal(t2, payload(p, rank, 2, 500)))
        t1 = torch.zeros(300)
        dist.recv(t1, p, tag=1)
        check(f"tag 1 from {p}", torch.equal(t1, payload(p, rank, 1, 300)))
    for w in works:
        w.wait()

    # 2. Several messages with one tag arrive in the order they were sent, interleaved with another tag.
    works = []
    for p in peers:
        for k in range(3):
            works.append(dist.isend(payload(rank, p, 10 + k, 64), p, tag=7))
            works.append(dist.isend(payload(rank, p, 20 + k, 64), p, tag=8))
    for p in peers:
        got8 = [torch.zeros(64) for _ in range(3)]
        got7 = [torch.zeros(64) for _ in range(3)]
        rw = [dist.irecv(t, p, tag=8) for t in got8] + [dist.irecv(t, p, tag=7) for t in got7]
        for w in rw:
            w.wait()
        for k in range(3):
            check(f"tag 7 #{k} from {p}", torch.equal(got7[k], payload(p, rank, 10 + k, 64)))
            check(f"tag 8 #{k} from {p}", torch.equal(got8[k], payload(p, rank, 20 + k, 64)))
    for w in works:
        w.wait()

    # 3. Every rank sends a message larger than any transport buffer to every peer before posting its receives
    #    (an exchange that must not depend on buffering).
    big = 3 << 20  # 12 MiB of float32
    sends = [dist.isend(payload(rank, p, 3, big), p, tag=3) for p in peers]
    outs = {p: torch.zeros(big) for p in peers}
    recvs = [dist.irecv(outs[p], p, tag=3) for p in peers]
    for w in sends + recvs:
        w.wait()
    for p in peers:
        check(f"large exchange from {p}", torch.equal(outs[p], payload(p, rank, 3, big)))

    # 4. A receive posted before a collective does not hold the collective up: rank 0 waits for rank 1's send,
    #    which rank 1 issues only after the all_reduce.
    t = torch.zeros(16)
    pending = dist.irecv(t, 1, tag=4) if rank == 0 else None
    s = torch.tensor([float(rank + 1)])
    dist.all_reduce(s)
    check("all_reduce while a recv is pending", s.item() == n * (n + 1) / 2, str(s.item()))
    if rank == 1:
        dist.send(payload(1, 0, 4, 16), 0, tag=4)
    if rank == 0:
        pending.wait()
        check("recv posted before the all_reduce", torch.equal(t, payload(1, 0, 4, 16)))

    # 5. Size mismatch between rank 0 and rank 1 (hccltune only: gloo aborts the process on it): both sides
    #    fail naming the sizes, and the next message between them is intact.
    if BACKEND != "gloo" and rank in (0, 1):
        other = 1 - rank
        try:
            if rank == 0:
                dist.send(torch.zeros(5), other, tag=5)
            else:
                dist.recv(torch.zeros(4), other, tag=5)
            check("size mismatch raises", False, "no error")
        except RuntimeError as e:
            check("size mismatch names the sizes", "20" in str(e) and "16" in str(e), str(e))
        if rank == 0:
            dist.send(payload(0, 1, 6, 8), other, tag=6)
        else:
            t = torch.zeros(8)
            dist.recv(t, other, tag=6)
            check("message after a mismatch", torch.equal(t, payload(0, 1, 6, 8)))

    # 6. Bad peers are refused at the call, naming the rank (hccltune only: gloo crashes with SIGSEGV on them).
    for bad in (rank, n, -1) if BACKEND != "gloo" else ():
        try:
            dist.isend(torch.zeros(1), bad)
            check(f"send to {bad} refused", False, "no error")
        except (RuntimeError, ValueError) as e:
            check(f"send to {bad} names it", str(bad) in str(e), str(e))

    # 7. batch_isend_irecv with tags (torch's suite runs it for gloo and nccl only): every rank exchanges two
    #    tagged messages with every peer in one batch, receives listed in the opposite tag order.
    ops, outs = [], {}
    for p in peers:
        ops += [dist.P2POp(dist.isend, payload(rank, p, 30 + k, 33), p, tag=30 + k) for k in (0, 1)]
        outs[p] = {k: torch.zeros(33) for k in (1, 0)}
        ops += [dist.P2POp(dist.irecv, outs[p][k], p, tag=30 + k) for k in (1, 0)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    for p in peers:
        for k in (0, 1):
            check(f"batch tag {30 + k} from {p}", torch.equal(outs[p][k], payload(p, rank, 30 + k, 33)))

    # 8. Tags in a sub-group (group ranks translate to global ranks).
    members = [0, n - 1]
    g = dist.new_group(members)
    if rank in members:
        other = members[1] if rank == members[0] else members[0]
        w = [dist.isend(payload(rank, other, k, 10), other, group=g, tag=k) for k in (1, 2)]
        for k in (2, 1):
            t = torch.zeros(10)
            dist.recv(t, other, group=g, tag=k)
            check(f"sub-group tag {k}", torch.equal(t, payload(other, rank, k, 10)))
        for x in w:
            x.wait()

    dist.barrier()
    dist.destroy_process_group()
    report()


if __name__ == "__main__":
    main()
