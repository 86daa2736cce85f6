"""Lesson 00_foundations: its mutants, each a wrong answer autograde must mark down by exactly its challenge's points."""

UNSYNCHRONISED = """
import statistics
import time


def median_time(fn, repeats=5, warmup=1):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
"""

MUTANTS = {
    "efficiency_times_n": ("c1_speedup", """
def my_speedup(t1, tn):
    return t1 / tn


def my_efficiency(t1, tn, n):
    return my_speedup(t1, tn) * n
"""),
    "does_nothing": ("c2_to_device", "def to_device(batch, device):\n    return batch\n"),
    "tuples_become_lists": ("c2_to_device", """
def to_device(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return [to_device(v, device) for v in batch]
    return batch
"""),
    "rounds_down": ("c3_gpus_needed", """
def gpus_needed(n_params, gpu_gb, bytes_per_param=16):
    return max(1, int(n_params * bytes_per_param / (gpu_gb * 1e9)))
"""),
    # Times every call but never waits for queued GPU work: on a GPU it times the launches.
    "never_synchronizes": ("c4_median_time", UNSYNCHRONISED),
    "fastest_not_median": ("c4_median_time", UNSYNCHRONISED.replace("return statistics.median(times)", "return min(times)")
                           .replace("times = []", "times = []\n    sync = torch.cuda.synchronize if torch.cuda.is_available() "
                                    "else (lambda: None)").replace("        fn()\n        times", "        fn()\n        "
                                                                     "sync()\n        times")),
    "typed_in_time": ("c4_median_time", """
def median_time(fn, repeats=5, warmup=1):
    for _ in range(warmup + repeats):
        fn()
    return 0.007  # what a 10 ms sleep measured, near enough
"""),
    "times_the_warmup": ("c4_median_time", """
import statistics
import time


def median_time(fn, repeats=5, warmup=1):
    times = []
    for _ in range(warmup + repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
"""),
}
