"""Benchmarks for the launcher and DDP scaling, printed as tables from one run.

    python tests/benchmarks/run_benchmarks.py [--repeats 5]

1. Start-up of 2 ranks that join a gloo group, all-reduce one number and leave: the
   course's launcher, torch.multiprocessing.spawn, the fork start method, and a torchrun
   command line. Each row is the median wall time from the call to every rank done.
2. DDP scaling of the course MLP (1.6 M parameters) on 2 CPU ranks against one process
   on the same global batch, one thread per process, at several per-rank batch sizes.
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from grader import hardware, scaling
from grader.launch import launch

RANKS = 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def join_reduce_leave(rank=None, world=None):
    if rank is not None:  # mp.spawn / start_processes give the rank as an argument
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    dist.init_process_group("gloo")
    t = torch.ones(1)
    dist.all_reduce(t)
    dist.destroy_process_group()
    return t.item()


TORCHRUN_SCRIPT = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
dist.destroy_process_group()
"""


def with_master_port(start):
    def run():
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
        start()
    return run


def startup_rows(repeats):
    script = os.path.join(tempfile.mkdtemp(), "join_reduce_leave.py")
    with open(script, "w") as f:
        f.write(TORCHRUN_SCRIPT)
    methods = {
        "course launcher (launch)": lambda: launch(join_reduce_leave, nprocs=RANKS, show_output=False),
        "torch.multiprocessing.spawn": with_master_port(
            lambda: mp.spawn(join_reduce_leave, args=(RANKS,), nprocs=RANKS)),
        "start_processes, fork": with_master_port(
            lambda: mp.start_processes(join_reduce_leave, args=(RANKS,), nprocs=RANKS, start_method="fork")),
        "torchrun command line": lambda: subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={RANKS}", script],
            check=True, capture_output=True),
    }
    rows = []
    for name, start in methods.items():
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            start()
            times.append(time.perf_counter() - t0)
        rows.append((name, statistics.median(times), (max(times) - min(times)) / 2))
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"# on {hardware.describe()}\n")

    rows = startup_rows(args.repeats)
    base = rows[0][1]
    print(f"## Start-up of {RANKS} ranks (join gloo, all-reduce, leave), median of {args.repeats}\n")
    print("| method | seconds | ± | × launcher |")
    print("|---|---|---|---|")
    for name, med, spread in rows:
        print(f"| {name} | {med:.2f} | {spread:.2f} | {med / base:.1f} |")

    print(f"\n## DDP on {RANKS} CPU ranks vs one process, same global batch, 1 thread each\n")
    print("| per-rank batch | global batch | speedup | efficiency |")
    print("|---|---|---|---|")
    for per_rank in (64, 256, 1024, 2048, 4096):
        s = statistics.median(scaling.ddp_speedup(per_rank, ranks=RANKS, steps=10, warmup=2)
                              for _ in range(max(1, args.repeats // 2)))
        print(f"| {per_rank} | {per_rank * RANKS} | {s:.2f}× | {s / RANKS:.0%} |")


if __name__ == "__main__":
    main()
