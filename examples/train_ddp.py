"""Trains a small model with DistributedDataParallel on hccl-tune — no hccl-tune import needed.

Launch (Debian's torchrun 1.13 needs `--redirects 9:0 --tee 9:0` on Python 3.11, see README):

  torchrun --redirects 9:0 --tee 9:0 --nproc_per_node 2 examples/train_ddp.py [--backend hccltune]
  python3 tests/python/launch.py --ranks 2 examples/train_ddp.py

With --compare, the same model is also trained over a gloo group of the same ranks on the same data: the script
then checks that the parameters agree and prints both median step times (docs/PERFORMANCE.md). With
--interleave the two trainings alternate step by step (hccltune first on even steps, gloo first on odd ones),
so both see the same machine load; --buckets also times every gradient bucket's allreduce (DDP's own
allreduce hook, reproduced with timestamps: from the bucket being ready to its future completing).
"""

import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def make_model(width, depth):
    torch.manual_seed(1234)  # identical initial parameters everywhere (DDP also broadcasts them)
    layers, d = [], 32
    for _ in range(depth):
        layers += [torch.nn.Linear(d, width), torch.nn.ReLU()]
        d = width
    layers.append(torch.nn.Linear(d, 8))
    return torch.nn.Sequential(*layers)


def batch(rank, step, size):
    g = torch.Generator().manual_seed(rank * 100003 + step)
    x = torch.randn(size, 32, generator=g)
    return x, x[:, :8].sin()


def train(group, args, rank):
    """Trains a fresh model over `group`; returns (flat parameters, per-step times in ms, the DDP model)."""
    model = DDP(make_model(args.width, args.depth), process_group=group)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    times = []
    for step in range(args.steps):
        x, y = batch(rank, step, args.batch)
        dist.barrier(group=group)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - t0) * 1e3)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return flat, times, model, loss.item()


class BucketTimer:
    """A DDP comm hook equal to DDP's default (divide by the world size, allreduce) that records, per bucket,
    the bytes and the milliseconds from the bucket being ready to its allreduce future completing."""

    def __init__(self, group):
        self.group = group
        self.samples = []  # (bucket index, bytes, ms)

    @staticmethod
    def hook(self, bucket):  # DDP passes the registered state (the timer) first
        t0 = time.perf_counter()
        buf = bucket.buffer()
        n = dist.get_world_size(self.group)
        fut = dist.all_reduce(buf.div_(n), group=self.group, async_op=True).get_future()

        def done(f):
            self.samples.append((bucket.index(), buf.numel() * buf.element_size(), (time.perf_counter() - t0) * 1e3))
            return f.value()[0]

        return fut.then(done)


def make_ddp(group, args):
    model = DDP(make_model(args.width, args.depth), process_group=group)
    timer = None
    if args.buckets:
        timer = BucketTimer(group)
        model.register_comm_hook(timer, BucketTimer.hook)
    return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), timer


def step_once(model, opt, group, x, y):
    dist.barrier(group=group)
    t0 = time.perf_counter()
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return (time.perf_counter() - t0) * 1e3, loss


def interleaved(args, rank, n):
    """Trains on the default group and on a gloo group, alternating steps; prints per-step medians."""
    gloo = dist.new_group(backend="gloo")
    runs = {"ours": make_ddp(None, args), "gloo": make_ddp(gloo, args)}
    groups = {"ours": None, "gloo": gloo}
    times = {"ours": [], "gloo": []}
    cpu = {"ours": [], "gloo": []}  # CPU time of this whole process (every thread) per step
    for step in range(args.steps):
        x, y = batch(rank, step, args.batch)
        order = ["ours", "gloo"] if step % 2 == 0 else ["gloo", "ours"]
        for k in order:
            model, opt, _ = runs[k]
            c0 = time.process_time()
            ms, _ = step_once(model, opt, groups[k], x, y)
            cpu[k].append((time.process_time() - c0) * 1e3)
            times[k].append(ms)
    flat = {k: torch.cat([p.detach().reshape(-1) for p in runs[k][0].parameters()]) for k in runs}
    all_flat = [torch.zeros_like(flat["ours"]) for _ in range(n)]
    dist.all_gather(all_flat, flat["ours"], group=gloo)
    same = all(torch.equal(all_flat[0], f) for f in all_flat)
    diff = (flat["ours"] - flat["gloo"]).abs().max().item()
    if rank == 0:
        skip = min(3, args.steps - 1)  # warm-up steps not counted
        med = {k: statistics.median(v[skip:]) for k, v in times.items()}
        print(f"RESULT interleaved world={n} params={flat['ours'].numel()} {args.backend}_ms={med['ours']:.3f} "
              f"gloo_ms={med['gloo']:.3f} ratio={med['ours'] / med['gloo']:.3f} bit_identical={same} "
              f"max_diff={diff:.3g} cpu_ms_per_step {args.backend}={statistics.median(cpu['ours'][skip:]):.1f} "
              f"gloo={statistics.median(cpu['gloo'][skip:]):.1f}", flush=True)
        for k in ("ours", "gloo"):
            timer = runs[k][2]
            if timer is None:
                continue
            per = {}
            for idx, nbytes, ms in timer.samples[skip * 4:]:
                per.setdefault((idx, nbytes), []).append(ms)
            name = args.backend if k == "ours" else "gloo"
            for (idx, nbytes), v in sorted(per.items()):
                print(f"BUCKET {name} bucket={idx} bytes={nbytes} median_ms={statistics.median(v):.3f} n={len(v)}",
                      flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="hccltune")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--compare", action="store_true", help="also train over gloo and compare")
    ap.add_argument("--interleave", action="store_true", help="with gloo, alternating steps (same load)")
    ap.add_argument("--buckets", action="store_true", help="time every bucket's allreduce (with --interleave)")
    args = ap.parse_args()
    torch.set_num_threads(1)

    dist.init_process_group(args.backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    if args.interleave:
        interleaved(args, rank, n)
        dist.destroy_process_group()
        return
    flat, times, model, loss = train(None, args, rank)
    pg = type(model.process_group).__name__
    if rank == 0:
        print(f"{args.backend}: {n} ranks, {args.steps} steps, process group {pg}, final loss {loss:.5f}, "
              f"{flat.numel()} parameters, median step {statistics.median(times):.3f} ms", flush=True)
    if args.compare:
        gloo = dist.new_group(backend="gloo")
        ref, gloo_times, _, _ = train(gloo, args, rank)
        # Every rank's parameters, gathered over gloo (independent of the backend under test).
        all_flat = [torch.zeros_like(flat) for _ in range(n)]
        dist.all_gather(all_flat, flat, group=gloo)
        same = all(torch.equal(all_flat[0], f) for f in all_flat)
        diff = (flat - ref).abs().max().item()
        if rank == 0:
            print(f"gloo: median step {statistics.median(gloo_times):.3f} ms; ranks bit-identical: {same}; "
                  f"max |{args.backend} - gloo| = {diff:.3g}", flush=True)
            print(f"RESULT world={n} params={flat.numel()} {args.backend}_ms={statistics.median(times):.3f} "
                  f"gloo_ms={statistics.median(gloo_times):.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
