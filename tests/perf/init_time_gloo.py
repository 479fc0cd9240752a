"""Gloo's init time under a real launcher, as tests/perf/init_time.cc times hccl-tune's: init_process_group
("gloo", env://) and a first barrier, from after the torch import; prints "init_ms RANK MS START END" (wall-clock
seconds). Rank and size from Open MPI's or MPICH's variables;
MASTER_ADDR/MASTER_PORT from the caller (Gloo needs them)."""
import os
import time

t0 = time.monotonic()
import torch.distributed as dist  # noqa: E402  (the import is part of what a job pays; timed from before it)

rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1")))
t1 = time.monotonic()
start = time.time()
dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=size)
dist.barrier()
print(f"init_ms {rank} {(time.monotonic() - t1) * 1000:.1f} {start:.6f} {time.time():.6f}", flush=True)
dist.destroy_process_group()
