"""Lesson 05_communication: its mutants, each a wrong answer autograde must mark down by exactly its challenge's points."""

# Lesson 05, challenge 2: the ring's two halves, to vary.
RING = """
def ring_all_reduce(t):
    rank, world = dist.get_rank(), dist.get_world_size()
    right, left = (rank + 1) % world, (rank - 1) % world
    chunks = CHUNKS

    def exchange(send, receive):
        incoming = torch.empty_like(chunks[receive])
        for request in (dist.isend(chunks[send].contiguous(), right), dist.irecv(incoming, left)):
            request.wait()
        return incoming

    for step in range(world - 1):
        receive = (rank - step - 1) % world
        chunks[receive].add_(exchange((rank - step) % world, receive))
    ALL_GATHER
"""
BY_HAND = """for step in range(world - 1):
        receive = (rank - step) % world
        chunks[receive].copy_(exchange((rank + 1 - step) % world, receive))"""

# Lesson 05, challenge 4: a bucketed answer whose plan (PLAN), launch from the hooks (LAUNCH) and
# launch after backward (AFTER_BACKWARD) are varied.
BUCKETS = """
def attach_buckets(model, cap_bytes):
    params = [p for p in model.parameters() if p.requires_grad]
    plan = PLAN
    bucket_of = {i: b for b, bucket in enumerate(plan) for i in bucket}
    waiting = [len(bucket) for bucket in plan]
    flats, works = {}, []

    def send(b):
        flats[b] = torch.cat([params[j].grad.flatten() for j in plan[b]])
        works.append(dist.all_reduce(flats[b], async_op=True))

    def hook(i):
        def on_ready(p):
            b = bucket_of[i]
            waiting[b] -= 1
            LAUNCH
        return on_ready

    for i, p in enumerate(params):
        p.register_post_accumulate_grad_hook(hook(i))

    def finish():
        AFTER_BACKWARD
        for work in works:
            work.wait()
        for b, bucket in enumerate(plan):
            pieces = flats[b].split([params[j].numel() for j in bucket])
            for j, piece in zip(bucket, pieces):
                params[j].grad.copy_(piece.view_as(params[j].grad) / dist.get_world_size())
        works.clear()
        waiting[:] = [len(bucket) for bucket in plan]

    return finish
"""
DDP_PLAN = "comms.buckets(comms.gradient_sizes(model), cap_bytes)"
WHEN_FULL = "if waiting[b] == 0:\n                send(b)"  # the solution's launch
NONE = "pass"
# The size rule walked from the first parameter: the buckets DDP would not make.
FORWARD_PLAN = """[]
    bucket, held = [], 0
    for i, size in enumerate(comms.gradient_sizes(model)):
        bucket.append(i)
        held += size
        if held >= cap_bytes:
            plan.append(bucket)
            bucket, held = [], 0
    if bucket:
        plan.append(bucket)"""

# Lesson 05, challenge 3: the solution, a per-parameter overlap, to vary.
OVERLAP = """
def attach_overlap(model):
    works = []

    def on_ready(p):
        works.append(dist.all_reduce(p.grad, async_op=True))

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(on_ready)

    def finish():
        for work in works:
            work.wait()
        works.clear()
        for p in model.parameters():
            p.grad /= dist.get_world_size()

    return finish
"""
AVERAGE = """        for p in model.parameters():
            p.grad /= dist.get_world_size()
"""

MEASURED = """
my_speedup = comms.bucket_speedup(BUCKET_MB, SIZES, ranks=2)
print(f"buckets of {BUCKET_MB} MB: {my_speedup:.2f}x faster than one all-reduce per parameter")
"""

MUTANTS = {
    "algorithm_bandwidth": ("c1_bus_bandwidth", """
def bus_bandwidth(op, nbytes, seconds, world):
    return nbytes / seconds
"""),
    "ring_factor_for_every_collective": ("c1_bus_bandwidth", """
def bus_bandwidth(op, nbytes, seconds, world):
    return nbytes / seconds * 2 * (world - 1) / world
"""),
    "all_reduce_counted_once": ("c1_bus_bandwidth", """
def bus_bandwidth(op, nbytes, seconds, world):
    factor = 1.0 if op in ("broadcast", "reduce") else (world - 1) / world
    return nbytes / seconds * factor
"""),
    "asks_the_toolkit": ("c1_bus_bandwidth", """
def bus_bandwidth(op, nbytes, seconds, world):
    return comms.bandwidths(op, nbytes, seconds, world)[1]
"""),
    "calls_all_reduce": ("c2_ring", """
def ring_all_reduce(t):
    dist.all_reduce(t)
"""),
    # Every rank sends its whole tensor to every other: the right sum, by the wrong route.
    "swaps_whole_tensors": ("c2_ring", """
def ring_all_reduce(t):
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = t.clone()
    incoming = [torch.empty_like(t) for _ in range(world)]
    requests = []
    for other in range(world):
        if other != rank:
            requests += [dist.isend(mine, other), dist.irecv(incoming[other], other)]
    for request in requests:
        request.wait()
    for other in range(world):
        if other != rank:
            t.add_(incoming[other])
"""),
    # Right whenever the size divides by the rank count, wrong (an error) otherwise.
    "assumes_divisible_sizes": ("c2_ring", RING.replace("CHUNKS", "t.view(world, -1)").replace("ALL_GATHER", BY_HAND)),
    # Tensor.chunk gives fewer than n pieces for some sizes (4 elements on 3 ranks: 2 pieces).
    "splits_with_chunk": ("c2_ring", RING.replace("CHUNKS", "t.view(-1).chunk(world)").replace("ALL_GATHER", BY_HAND)),
    # Everyone sends to rank 0, which sends the sum back, in as many messages as the ring, not its chunks.
    "gathers_at_rank_0_in_pieces": ("c2_ring", """
def ring_all_reduce(t):
    rank, n = dist.get_rank(), dist.get_world_size()
    k = 2 * (n - 1)
    if rank == 0:
        for src in range(1, n):
            for piece in t.tensor_split(k):
                buf = torch.empty_like(piece)
                dist.recv(buf, src)
                piece += buf
        for dst in range(1, n):
            for piece in t.tensor_split(2):
                dist.send(piece.contiguous(), dst)
    else:
        for piece in t.tensor_split(k):
            dist.send(piece.contiguous(), 0)
        for piece in t.tensor_split(2):
            buf = torch.empty_like(piece)
            dist.recv(buf, 0)
            piece.copy_(buf)
"""),
    # The sum worked out from what the visible test's inputs look like, the ring's messages sent for show.
    "sums_the_inputs_formula": ("c2_ring", """
def ring_all_reduce(t):
    rank, n = dist.get_rank(), dist.get_world_size()
    total = (t - rank) / (rank + 1) * sum(range(1, n + 1)) + sum(range(n))
    right, left = (rank + 1) % n, (rank - 1) % n
    chunks = t.tensor_split(n)
    for s in range(2 * (n - 1)):
        buf = torch.empty_like(chunks[(rank - s - 1) % n])
        for request in (dist.isend(chunks[(rank - s) % n].contiguous(), right), dist.irecv(buf, left)):
            request.wait()
    t.copy_(total)
"""),
    # Lesson section 4's way (a): correct, but nothing starts before backward returns.
    "reduces_after_backward": ("c3_overlap", """
def attach_overlap(model):
    return attach_after_backward(model)
"""),
    "waits_in_the_hook": ("c3_overlap", """
def attach_overlap(model):
    def on_ready(p):
        dist.all_reduce(p.grad)

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(on_ready)

    def finish():
        for p in model.parameters():
            p.grad /= dist.get_world_size()

    return finish
"""),
    # Started at once, then waited for through its future, or by polling: no overlap, and no Work.wait.
    "waits_on_the_future_in_the_hook": ("c3_overlap", """
def attach_overlap(model):
    def on_ready(p):
        dist.all_reduce(p.grad, async_op=True).get_future().wait()
        p.grad /= dist.get_world_size()

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(on_ready)
    return lambda: None
"""),
    "polls_until_done_in_the_hook": ("c3_overlap", """
def attach_overlap(model):
    def on_ready(p):
        work = dist.all_reduce(p.grad, async_op=True)
        while not work.is_completed():
            pass
        p.grad /= dist.get_world_size()

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(on_ready)
    return lambda: None
"""),
    # Every all-reduce started from the last gradient's hook: nothing of backward is left to overlap.
    "starts_all_once_every_gradient_is_ready": ("c3_overlap", """
def attach_overlap(model):
    params = list(model.parameters())
    state = {"ready": 0, "works": []}

    def on_ready(p):
        state["ready"] += 1
        if state["ready"] == len(params):
            for q in reversed(params):
                state["works"].append((q, dist.all_reduce(q.grad, async_op=True)))

    for p in params:
        p.register_post_accumulate_grad_hook(on_ready)

    def finish():
        for q, work in state["works"]:
            work.wait()
            q.grad /= dist.get_world_size()
        state["works"], state["ready"] = [], 0

    return finish
"""),
    "forgets_to_average": ("c3_overlap", OVERLAP.replace(AVERAGE, "")),
    "buckets_from_the_first_parameter": ("c4_buckets", BUCKETS.replace("PLAN", FORWARD_PLAN)
                                         .replace("LAUNCH", WHEN_FULL).replace("AFTER_BACKWARD", NONE)),
    "buckets_after_backward": ("c4_buckets", BUCKETS.replace("PLAN", DDP_PLAN).replace("LAUNCH", NONE).replace(
        "AFTER_BACKWARD", "for b in range(len(plan)):\n            send(b)")),
    # Every bucket started from the last gradient's hook: sizes and order right, nothing overlapped.
    "buckets_once_every_gradient_is_ready": ("c4_buckets", BUCKETS.replace("PLAN", DDP_PLAN).replace(
        "LAUNCH", "if sum(waiting) == 0:\n                for every in range(len(plan)):\n                    send(every)")
        .replace("AFTER_BACKWARD", NONE)),
    "bucket_waits_on_its_future": ("c4_buckets", BUCKETS.replace("PLAN", DDP_PLAN).replace(
        "LAUNCH", WHEN_FULL + "\n                works[-1].get_future().wait()").replace("AFTER_BACKWARD", NONE)),
    # Challenge 3's answer: the bucket size ignored.
    "one_message_per_parameter": ("c4_buckets", OVERLAP.replace("attach_overlap(model)", "attach_buckets(model, cap_bytes)")),
    "a_bucket_per_parameter": ("c5_bucket_mb", "BUCKET_MB = 1e-6" + MEASURED),
    "typed_in_speedup": ("c5_bucket_mb", """
BUCKET_MB = 1e-6
my_speedup = 3.0
print(f"buckets of {BUCKET_MB} MB: {my_speedup:.2f}x faster than one all-reduce per parameter")
"""),
}
