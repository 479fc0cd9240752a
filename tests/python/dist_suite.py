"""Runs torch's own distributed test suite (torch/testing/_internal/distributed/distributed_test.py, shipped by
Debian's python3-torch) against a backend, as PyTorch's test/distributed/test_distributed_spawn.py does.

  BACKEND=hccltune WORLD_SIZE=2 python3 dist_suite.py [-v] [-k PATTERN ...]

The only change to the suite is declaring our backend's features in its own per-backend tables
(DistTestCases): it is a plugin backend and supports DDP and subgroups (send/recv from any source needs no
entry: the suite skips it only for the backends listed in its skip table). Tests gated on the
backend being literally "gloo" skip themselves, as they do for every non-gloo backend; our own tests
(tests/python/ops_test.py, p2p_test.py, sparse_test.py) cover those operations. Backend registration comes from
the .pth hook.
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "stubs"))  # expecttest

os.environ.setdefault("BACKEND", "hccltune")
os.environ.setdefault("WORLD_SIZE", "2")
os.environ.setdefault("INIT_METHOD", "env://")
if "TEMP_DIR" not in os.environ:  # children (multiprocessing spawn) inherit the parent's
    tmp = tempfile.mkdtemp(prefix="hccltune-dist-suite-")
    os.mkdir(os.path.join(tmp, "barrier"))
    os.mkdir(os.path.join(tmp, "test_dir"))
    os.environ["TEMP_DIR"] = tmp

import torch  # noqa: E402
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402
from torch.testing._internal.common_utils import run_tests  # noqa: E402

BACKEND = os.environ["BACKEND"]
if BACKEND in ("hccltune", "hccl"):
    for feature in ("ddp", "subgroup", "plugin"):
        DistTestCases.backend_feature[feature].add(BACKEND)

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()


if __name__ == "__main__":
    run_tests()
