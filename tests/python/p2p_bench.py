"""Point-to-point timing on 2 ranks (run under launch.py --ranks 2), for comparing builds of the backend in one
run (docs/PYTORCH.md). Rank 0 prints one line per (pattern, size): the median over iterations, in us.

  pingpong   rank 0 send, recv; rank 1 recv, send (the receiver is usually waiting: its CTS is there first)
  exchange   both ranks isend then irecv, then wait (the sends come first: they announce themselves)
  anysource  pingpong with rank 0 receiving from any source

  launch.py --ranks 2 p2p_bench.py [BACKEND] [--iters N] [--patterns pingpong,exchange,anysource]
"""

import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

args = [a for i, a in enumerate(sys.argv[1:], 1) if not a.startswith("--") and not sys.argv[i - 1].startswith("--")]
BACKEND = args[0] if args else "hccltune"
ITERS = int(sys.argv[sys.argv.index("--iters") + 1]) if "--iters" in sys.argv else 200
PATTERNS = (sys.argv[sys.argv.index("--patterns") + 1] if "--patterns" in sys.argv else
            "pingpong,exchange,anysource").split(",")
SIZES = [8, 4096, 65536, 1 << 20, 16 << 20]
rank = int(os.environ["RANK"])
other = 1 - rank


def pingpong(t, r, any_source):
    if rank == 0:
        dist.send(t, other)
        dist.recv(r) if any_source else dist.recv(r, other)
    else:
        dist.recv(r, other)
        dist.send(t, other)


def exchange(t, r, _):
    s = dist.isend(t, other)
    w = dist.irecv(r, other)
    s.wait()
    w.wait()


def main():
    dist.init_process_group(BACKEND)
    assert dist.get_world_size() == 2
    for name, fn, any_source in (("pingpong", pingpong, False), ("exchange", exchange, False),
                                 ("anysource", pingpong, True)):
        if name not in PATTERNS:
            continue
        for size in SIZES:
            t = torch.ones(size // 4 if size >= 4 else 1)
            r = torch.empty_like(t)
            iters = max(10, ITERS if size <= 65536 else ITERS // 10)
            times = []
            for i in range(iters + 5):
                t0 = time.perf_counter()
                fn(t, r, any_source)
                if i >= 5:  # warm-up
                    times.append((time.perf_counter() - t0) * 1e6)
            if rank == 0:
                print(f"{name} {size} {statistics.median(times):.1f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
