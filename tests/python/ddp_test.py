"""DDP for 20 steps (or the first argument's) on backend hccltune, one rank of a job started by launch.py. Asserts
that the process group really is hccl-tune's (not a gloo fallback), that every rank ends with bit-identical
parameters, and that they equal a gloo run's (same model, same data, same ranks) within float tolerance."""

import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import train_ddp  # noqa: E402


class Args:
    steps, batch, width, depth = 20, 16, 64, 2


def main():
    if len(sys.argv) > 1:
        Args.steps = int(sys.argv[1])
    torch.set_num_threads(1)
    dist.init_process_group("hccltune")
    import hccl_tune_torch

    rank, n = dist.get_rank(), dist.get_world_size()
    flat, _, model, loss = train_ddp.train(None, Args, rank)
    assert isinstance(model.process_group, hccl_tune_torch.ProcessGroupHcclTune), type(model.process_group)
    assert dist.get_backend() == "hccltune"
    gloo = dist.new_group(backend="gloo")
    ref, _, gmodel, _ = train_ddp.train(gloo, Args, rank)
    assert isinstance(gmodel.process_group, dist.ProcessGroupGloo)
    gathered = [torch.zeros_like(flat) for _ in range(n)]
    dist.all_gather(gathered, flat, group=gloo)
    for r, f in enumerate(gathered):
        assert torch.equal(f, gathered[0]), f"rank {r}'s parameters differ from rank 0's"
    initial = torch.cat([p.detach().reshape(-1) for p in train_ddp.make_model(Args.width, Args.depth).parameters()])
    assert not torch.equal(flat, initial), "parameters did not change"
    diff = (flat - ref).abs().max().item()
    assert torch.allclose(flat, ref, rtol=1e-4, atol=1e-5), f"hccltune and gloo differ by {diff}"
    print(f"OK rank {rank}/{n}: {flat.numel()} parameters bit-identical across ranks, "
          f"max |hccltune - gloo| = {diff:.3g}, loss {loss:.5f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
