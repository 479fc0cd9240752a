"""Tensors from hccl_tune_torch.empty_symmetric on backend hccltune, one rank of a job started by launch.py: every
collective that has a symmetric algorithm (all_reduce, all_gather_into_tensor, reduce_scatter_tensor, broadcast)
runs it on them — checked through the group's last configuration — and every rank checks its own result against
values it computes itself (small integers: exact in every dtype). Then the same all_reduce on an ordinary tensor
does not run it, a tensor freed before the group is fine, and asking an hccltune group for zero-size or a
non-hccltune group is an error.
"""

import warnings

import torch
import torch.distributed as dist

warnings.filterwarnings("ignore", message=".*(deprecated|private function).*")

import hccl_tune_torch  # noqa: E402  (empty_symmetric; the backend itself is registered by the .pth hook)
from rankcheck import BACKEND, n, rank, record, report  # noqa: E402

SYMMETRIC = "symmetric(link=auto)"


def data(r, count, dtype, salt=0):
    i = torch.arange(count, dtype=torch.int64)
    return ((i * 7 + r * 3 + salt) % 5 + 1).to(dtype)


def check(name, got, want, pg):
    ok = torch.equal(got, want)
    record(ok, "" if ok else f"{name}: got {got.flatten()[:8].tolist()} want {want.flatten()[:8].tolist()}")
    record(pg.last_config() == SYMMETRIC, f"{name}: ran {pg.last_config()}, not {SYMMETRIC}")


def main():
    dist.init_process_group(BACKEND)
    pg = dist.distributed_c10d._get_default_group()
    for dtype in (torch.float32, torch.bfloat16, torch.int32):
        for count in (8209, 1 << 20):  # odd, and above SymmetricFromBytes (at most 16 KiB) in every dtype here
            x = hccl_tune_torch.empty_symmetric((count,), dtype)
            record(torch.count_nonzero(x).item() == 0, f"fresh symmetric tensor not zeroed ({dtype})")
            x.copy_(data(rank, count, dtype))
            dist.all_reduce(x)
            check(f"all_reduce {dtype} {count}", x, sum(data(r, count, dtype) for r in range(n)).to(dtype), pg)

            y = hccl_tune_torch.empty_symmetric((2, count), dtype)  # a row of a 2-D tensor, at an offset of 0
            y[0].copy_(data(rank, count, dtype, 1))
            dist.all_reduce(y[0], op=dist.ReduceOp.MAX)
            check(f"all_reduce max {dtype} {count}", y[0],
                  torch.stack([data(r, count, dtype, 1) for r in range(n)]).amax(0), pg)

            block = hccl_tune_torch.empty_symmetric((count,), dtype)
            block.copy_(data(rank, count, dtype, 2))
            gathered = hccl_tune_torch.empty_symmetric((n * count,), dtype)
            dist.all_gather_into_tensor(gathered, block)
            check(f"all_gather_into_tensor {dtype} {count}", gathered,
                  torch.cat([data(r, count, dtype, 2) for r in range(n)]), pg)

            full = hccl_tune_torch.empty_symmetric((n * count,), dtype)
            full.copy_(data(rank, n * count, dtype, 3))
            mine = hccl_tune_torch.empty_symmetric((count,), dtype)
            dist.reduce_scatter_tensor(mine, full)
            total = sum(data(r, n * count, dtype, 3) for r in range(n)).to(dtype)
            check(f"reduce_scatter_tensor {dtype} {count}", mine, total[rank * count:(rank + 1) * count], pg)

            root = count % n
            b = hccl_tune_torch.empty_symmetric((count,), dtype)
            if rank == root:
                b.copy_(data(root, count, dtype, 4))
            dist.broadcast(b, root)
            check(f"broadcast {dtype} {count} from {root}", b, data(root, count, dtype, 4), pg)
            del x, y, block, gathered, full, mine, b  # frees every region (the group is alive)

    plain = data(rank, 1 << 16, torch.float32)
    dist.all_reduce(plain)
    record(torch.equal(plain, sum(data(r, 1 << 16, torch.float32) for r in range(n))), "all_reduce on a plain tensor")
    record(pg.last_config() != SYMMETRIC, f"a plain tensor ran {pg.last_config()}")

    try:
        hccl_tune_torch.empty_symmetric((0,), torch.float32)  # one element's bytes: allowed, a 0-element view
        zero_ok = True
    except RuntimeError:
        zero_ok = False
    record(zero_ok, "a 0-element symmetric tensor was refused")
    gloo = dist.new_group(backend="gloo")
    try:
        hccl_tune_torch.empty_symmetric((4,), torch.float32, group=gloo)
        record(False, "a gloo group handed out symmetric memory")
    except TypeError as e:
        record("hccltune process group" in str(e), f"gloo group: {e}")
    dist.barrier()
    dist.destroy_process_group()
    report()


if __name__ == "__main__":
    main()
