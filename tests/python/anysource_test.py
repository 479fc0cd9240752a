"""Receives from any source (dist.recv/irecv without src) on backend hccltune (or the name in argv[1]; the
script passes on gloo too, minus the hccltune-only parts), one rank of a job started by launch.py. Rank 0 is
the receiver; every value it gets is checked against what the sender it reports must have sent:

1. every other rank sends 3 messages; rank 0 takes them with recv(src=None) and irecv(src=None) alternately:
   each message once, the right sender (recv's return value and the work's source rank), in order per sender;
2. tags: the senders interleave two tags and rank 0 drains the second tag first;
3. mixed with specific receives: a specific receive takes the sender's first message, any-source ones the rest;
   a specific receive claims its sender's next message even when an any-source one was posted before it (gloo);
4. an any-source receive nobody answers fails after the group's timeout, naming it, and the group still works;
   in a sub-group, the source is reported as a group rank by the work and as a global rank by recv;
5. (hccltune) a peer that dies: a specific receive from it fails at once naming the pair, an any-source receive
   fails at once when no live peer is left (2 ranks) or after the group's timeout (3 ranks); nothing hangs.
"""

import datetime
import os
import time
import warnings

import torch
import torch.distributed as dist

warnings.filterwarnings("ignore", message=".*(deprecated|private function).*")

from rankcheck import BACKEND, n, rank, record, report


def check(name, cond, detail=""):
    record(cond, f"{name} {detail}")


def payload(src, tag, k, count=7):
    """Message number k that rank src sends with `tag`: every element encodes (src, tag, k)."""
    return torch.full((count,), float(src * 10000 + tag * 100 + k))


def decode(t):
    v = int(t[0].item())
    return v // 10000, (v // 100) % 100, v % 100


def receive_any(t, tag, group=None, use_irecv=False):
    """Returns the sender's rank as dist.recv does; irecv's work must report the same."""
    if use_irecv:
        w = dist.irecv(t, tag=tag, group=group)
        w.wait()
        return w._source_rank() if group is None else dist.get_global_rank(group, w._source_rank())
    return dist.recv(t, tag=tag, group=group)


def check_messages(name, got, tag, want_per_sender, first=None):
    """got: [(reported sender, tensor)]. Each sender's messages, once each, in its send order, starting at its
    message number first[sender] (0 by default); want_per_sender: how many from each."""
    first = first or {}
    seen = {}
    for reported, t in got:
        src, ttag, k = decode(t)
        want_k = first.get(src, 0) + seen.get(src, 0)
        check(f"{name}: reported sender", reported == src, f"reported {reported}, data from {src}")
        check(f"{name}: tag", ttag == tag, f"got tag {ttag}")
        check(f"{name}: whole tensor", torch.equal(t, payload(src, ttag, k, t.numel())))
        check(f"{name}: order from {src}", k == want_k, f"message {k}, expected {want_k}")
        seen[src] = seen.get(src, 0) + 1
    check(f"{name}: counts", seen == want_per_sender, f"{seen} != {want_per_sender}")


def main():
    dist.init_process_group(BACKEND, timeout=datetime.timedelta(seconds=60))
    senders = list(range(1, n))

    # 1. K messages from every sender, taken by recv and irecv from any source alternately.
    K = 3
    if rank == 0:
        got = []
        for i in range(K * len(senders)):
            t = torch.zeros(7)
            got.append((receive_any(t, 0, use_irecv=i % 2 == 1), t))
        check_messages("any source", got, 0, {s: K for s in senders})
    else:
        for k in range(K):
            dist.send(payload(rank, 0, k), 0)

    # 2. Two tags interleaved by every sender; rank 0 drains tag 2 first, then tag 1.
    if rank == 0:
        for tag in (2, 1):
            got = []
            for _ in range(2 * len(senders)):
                t = torch.zeros(7)
                got.append((receive_any(t, tag), t))
            check_messages(f"tag {tag}", got, tag, {s: 2 for s in senders})
    else:
        works = []
        for k in range(2):
            works += [dist.isend(payload(rank, 1, k), 0, tag=1), dist.isend(payload(rank, 2, k), 0, tag=2)]
        for w in works:
            w.wait()

    # 3a. A specific receive from rank 1 and any-source ones: the specific one gets rank 1's first message.
    if rank == 0:
        first = torch.zeros(7)
        specific = dist.irecv(first, src=1, tag=3)
        outs = [torch.zeros(7) for _ in range(2 * len(senders) - 1)]
        works = [dist.irecv(t, tag=3) for t in outs]
        specific.wait()
        check("specific receive among any-source ones", torch.equal(first, payload(1, 3, 0)), str(decode(first)))
        got = []
        for w, t in zip(works, outs):
            w.wait()
            got.append((w._source_rank(), t))
        want = {s: 2 for s in senders}
        want[1] = 1
        check_messages("any source beside a specific receive", got, 3, want, first={1: 1})
    else:
        for k in range(2):
            dist.send(payload(rank, 3, k), 0, tag=3)
    # 3b. A specific receive claims its sender's next message when posted, even when an any-source receive
    #     with the same tag was posted before it and still waits (gloo's rule; MPI would serve the earlier one).
    if rank == 0:
        a, b = torch.zeros(7), torch.zeros(7)
        wa = dist.irecv(a, tag=4)
        wb = dist.irecv(b, src=1, tag=4)
        dist.send(torch.zeros(1), 1, tag=40)  # go
        wa.wait()
        wb.wait()
        check("the specific receive gets the first message", torch.equal(b, payload(1, 4, 0)), str(decode(b)))
        check("the any-source receive posted before it the second", torch.equal(a, payload(1, 4, 1)), str(decode(a)))
        check("source rank", wa._source_rank() == 1 and wb._source_rank() == 1)
    elif rank == 1:
        dist.recv(torch.zeros(1), 0, tag=40)
        for k in range(2):
            dist.send(payload(1, 4, k), 0, tag=4)

    # 4. Nobody answers: the receive fails after the group's timeout; the group keeps working.
    g = dist.new_group(list(range(n)), timeout=datetime.timedelta(seconds=2))
    if rank == 0 and BACKEND != "gloo":  # gloo's recv timeout leaves its pair unusable
        t0 = time.monotonic()
        try:
            dist.recv(torch.zeros(3), tag=9, group=g)
            check("unanswered any-source receive raises", False)
        except RuntimeError as e:
            took = time.monotonic() - t0
            check("unanswered any-source receive: timeout", 1.5 < took < 20, f"{took:.1f} s")
            check("unanswered any-source receive: message", "from any source with tag 9" in str(e) and
                  "2000 ms" in str(e), str(e))
    dist.barrier()
    if rank == 0:
        t = torch.zeros(7)
        src = dist.recv(t, tag=5, group=g)
        check("any-source after a timeout", src == n - 1 and torch.equal(t, payload(n - 1, 5, 0)), str(decode(t)))
    elif rank == n - 1:
        dist.send(payload(n - 1, 5, 0), 0, tag=5, group=g)
    dist.barrier()
    # In a sub-group whose ranks are not the global ones: recv reports the sender's global rank.
    sub = dist.new_group([0, n - 1])
    if rank == 0:
        t = torch.zeros(7)
        w = dist.irecv(t, tag=8, group=sub)
        w.wait()
        src = dist.recv(torch.zeros(7), tag=8, group=sub)
        check("sub-group: irecv's source rank is the group rank", w._source_rank() == 1, str(w._source_rank()))
        check("sub-group: recv returns the global rank", src == n - 1 and torch.equal(t, payload(n - 1, 8, 0)),
              f"{src} {decode(t)}")
    elif rank == n - 1:
        for k in range(2):
            dist.send(payload(n - 1, 8, k), 0, tag=8, group=sub)
    dist.barrier()

    if BACKEND == "gloo":
        dist.destroy_process_group()
        return report()

    # 5. The last rank dies (no clean-up at all) after the pairs are up. HCCL_EXEC_TIMEOUT of the job bounds
    #    everything else; the group's timeout is 3 s.
    g3 = dist.new_group(list(range(n)), timeout=datetime.timedelta(seconds=3))
    dead = n - 1
    if rank == 0:
        dist.send(torch.zeros(1), dead, tag=6, group=g3)
    elif rank == dead:
        dist.recv(torch.zeros(1), 0, tag=6, group=g3)
    dist.barrier()
    if rank == dead:
        os._exit(0)
    time.sleep(0.5)
    if rank == 0:
        t0 = time.monotonic()
        try:
            dist.recv(torch.zeros(1), dead, tag=7, group=g3)
            check("specific receive from a dead rank raises", False)
        except RuntimeError as e:
            took = time.monotonic() - t0
            check("dead rank: specific receive fails fast", took < 2.5, f"{took:.1f} s")
            check("dead rank: specific receive names the pair", f"ranks 0 and {dead}" in str(e), str(e))
        t0 = time.monotonic()
        try:
            dist.recv(torch.zeros(1), tag=7, group=g3)
            check("any-source receive with a dead rank raises", False)
        except RuntimeError as e:
            took = time.monotonic() - t0
            if n == 2:  # no live peer is left: at once
                check("dead rank: any-source fails at once", took < 2.5, f"{took:.1f} s")
                check("dead rank: any-source names why", "with every other rank failed" in str(e), str(e))
            else:  # rank 1 lives but sends nothing: the group's timeout
                check("dead rank: any-source times out", 2.5 < took < 20, f"{took:.1f} s")
                check("dead rank: any-source names the timeout", "3000 ms" in str(e), str(e))
    else:
        time.sleep(5)  # alive but silent while rank 0 waits
    report(exit_now=True)  # the group has a dead rank: no clean shutdown


if __name__ == "__main__":
    main()
