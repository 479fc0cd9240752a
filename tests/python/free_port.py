"""A TCP port for a test job's rendezvous (MASTER_PORT, a rank table's store).

Asking the kernel for port 0 and closing the socket is racy when tests start jobs in parallel: two launchers can
be handed the same just-freed ephemeral port, and then one job's ranks join the other's store (seen in CI:
torch.ops.3 and torch.ddp.3 on one port). Instead each caller starts from a port derived from its process id —
distinct for jobs that run at the same time — in 20000-29999, below Linux's ephemeral range (32768-60999), and
takes the first one it can bind.

  python3 tests/python/free_port.py [SEED]    # prints the port; SEED defaults to the caller's pid ($PPID)
"""

import os
import socket
import sys

LOW, SPAN = 20000, 10000


def free_port(seed=None):
    seed = os.getpid() if seed is None else int(seed)
    start = (seed * 7919) % SPAN
    for i in range(SPAN):
        port = LOW + (start + i) % SPAN
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free TCP port in {LOW}-{LOW + SPAN - 1}")


if __name__ == "__main__":
    print(free_port(sys.argv[1] if len(sys.argv) > 1 else os.getppid()))
