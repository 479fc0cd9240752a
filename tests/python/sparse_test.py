"""all_reduce of sparse COO tensors (SUM) on backend hccltune (or the name in argv[1]), one rank of a job started
by launch.py. Every rank builds every rank's input itself, so it checks its result against the dense sum it
computes alone: uneven nnz (a rank with none), duplicate indices inside one input, hybrid sparse/dense tensors,
integer and half values, torch's own sparse cases (common_distributed.simple_sparse_reduce_tests, what the
suite's name-gated test_sparse_all_reduce_sum runs), then the errors: another ReduceOp at the call, ranks whose
shapes differ on every rank (and the group still works afterwards).
"""

import os
import sys
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "stubs"))  # expecttest

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

warnings.filterwarnings("ignore", message=".*(deprecated|private function|Sparse CSR).*")

from rankcheck import BACKEND, n, rank, record, report


def check(name, got, want):
    if got.layout != torch.sparse_coo or not got.is_coalesced():
        record(False, f"{name}: result is not a coalesced sparse COO tensor ({got.layout})")
        return
    ok = got.dtype == want.dtype and torch.equal(got.to_dense(), want)
    record(ok, "" if ok else f"{name}: got {got.to_dense().flatten()[:12].tolist()} want {want.flatten()[:12].tolist()}")


def coo(r, shape, dtype, dense_dims=0, salt=0):
    """Rank r's input: (r + salt) % 4 entries (some rank has none), with a repeated index (uncoalesced)."""
    g = torch.Generator().manual_seed(1000 * salt + r)
    nnz = (r + salt) % 4
    sparse_shape = shape[: len(shape) - dense_dims]
    idx = torch.stack([torch.randint(0, s, (nnz,), generator=g) for s in sparse_shape]) if nnz else \
        torch.zeros((len(sparse_shape), 0), dtype=torch.int64)
    if nnz > 1:
        idx[:, -1] = idx[:, 0]  # the same index twice in one input
    vals = torch.randint(-5, 6, (nnz,) + tuple(shape[len(sparse_shape):]), generator=g).to(dtype)
    return torch.sparse_coo_tensor(idx, vals, shape)


def case(name, shape, dtype, dense_dims=0, salt=0):
    inputs = [coo(r, shape, dtype, dense_dims, salt) for r in range(n)]
    want = sum(x.to_dense() for x in inputs)
    t = inputs[rank].clone()
    dist.all_reduce(t)
    check(name, t, want)
    # Asynchronously, through the work's future.
    t = inputs[rank].clone()
    fut = dist.all_reduce(t, async_op=True).get_future()
    check(name + " (async)", fut.wait()[0], want)


def main():
    dist.init_process_group(BACKEND)
    assert type(dist.distributed_c10d._get_default_group()).__name__ == "ProcessGroupHcclTune" or BACKEND == "gloo"

    case("2-D float32", (6, 5), torch.float32)
    case("2-D float64, other seed", (9, 4), torch.float64, salt=1)
    case("1-D int64", (13,), torch.int64, salt=2)
    case("hybrid [7 sparse, 3 dense] float32", (7, 3), torch.float32, dense_dims=1, salt=3)
    case("hybrid [4, 5 sparse, 2 dense] int32", (4, 5, 2), torch.int32, dense_dims=1, salt=1)
    if BACKEND != "gloo":  # torch 1.13's gloo cannot add sparse half tensors ("cadd_sparse" not implemented)
        case("float16", (8, 8), torch.float16, salt=2)
    # Every rank empty: nothing to gather, still a sparse zero tensor.
    empty = torch.sparse_coo_tensor(torch.zeros((2, 0), dtype=torch.int64), torch.zeros(0), (3, 3))
    t = empty.clone()
    dist.all_reduce(t)
    check("all ranks empty", t, torch.zeros(3, 3))

    # torch's own cases (the suite's test_sparse_all_reduce_sum is gated on the name "gloo").
    from torch.testing._internal.common_distributed import simple_sparse_reduce_tests

    for i, (inputs, outputs) in enumerate(simple_sparse_reduce_tests(rank, n, num_inputs=1)):
        t = inputs[0]
        dist.all_reduce(t, dist.ReduceOp.SUM)
        check(f"torch's simple_sparse_reduce_tests[{i}]", t.coalesce(), outputs[0].coalesce().to_dense())

    # Errors. Another ReduceOp is refused at the call, on every rank, before anything is sent.
    try:
        dist.all_reduce(coo(rank, (4, 4), torch.float32), op=dist.ReduceOp.MAX)
        record(False, "sparse all_reduce with MAX did not raise")
    except RuntimeError as e:
        record(BACKEND == "gloo" or "SUM only" in str(e), f"sparse MAX: unexpected error {e}")
    # Shapes that differ between ranks: every rank's work fails naming the ranks and shapes.
    if BACKEND != "gloo":
        bad = coo(rank, (4, 4 + (rank == n - 1)), torch.float32, salt=1)
        try:
            dist.all_reduce(bad)
            record(False, "sparse all_reduce with different shapes did not raise")
        except RuntimeError as e:
            want = f"rank {n - 1}'s tensor (sparse_dim 2, dense_dim 0, shape [4, 5], dtype Float) differs from " \
                   "rank 0's (sparse_dim 2, dense_dim 0, shape [4, 4], dtype Float)"
            record(want in str(e), f"shape mismatch: unexpected error {e}")
    # The group still works.
    case("after the errors", (5, 5), torch.float32, salt=3)
    x = torch.full((3,), float(rank))
    dist.all_reduce(x)
    record(torch.equal(x, torch.full((3,), float(sum(range(n))))), f"dense all_reduce after the sparse errors: {x.tolist()}")
    dist.barrier()
    dist.destroy_process_group()

    report()


if __name__ == "__main__":
    main()
