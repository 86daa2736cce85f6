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

# Lesson 05, challenges 3 and 4: a bucketed answer whose plan and launch are varied.
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
            if waiting[b] == 0 and IN_BACKWARD:
                send(b)
        return on_ready

    for i, p in enumerate(params):
        p.register_post_accumulate_grad_hook(hook(i))

    def finish():
        if not IN_BACKWARD:
            for b in range(len(plan)):
                send(b)
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
    "reduce_scatter_only": ("c2_ring", RING.replace("CHUNKS", "t.view(-1).tensor_split(world)")
                            .replace("ALL_GATHER", "")),
    # Right whenever the size divides by the rank count (the visible test's), wrong otherwise.
    "assumes_divisible_sizes": ("c2_ring", RING.replace("CHUNKS", "t.view(world, -1)").replace("ALL_GATHER", BY_HAND)),
    # The reduce-scatter by hand, then the library's all-gather.
    "gathers_with_the_library": ("c2_ring", RING.replace("CHUNKS", "t.view(-1).tensor_split(world)").replace("ALL_GATHER", """
    gathered = [torch.empty_like(chunks[(r + 1) % world]) for r in range(world)]
    dist.all_gather(gathered, chunks[(rank + 1) % world].contiguous())
    for r, part in enumerate(gathered):
        chunks[(r + 1) % world].copy_(part)""".strip())),
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
    "forgets_to_average": ("c3_overlap", """
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

    return finish
"""),
    "buckets_from_the_first_parameter": ("c4_buckets", BUCKETS.replace("PLAN", FORWARD_PLAN)
                                         .replace("IN_BACKWARD", "True")),
    "buckets_after_backward": ("c4_buckets", BUCKETS.replace("PLAN", DDP_PLAN).replace("IN_BACKWARD", "False")),
    "one_message_per_parameter": ("c4_buckets", """
def attach_buckets(model, cap_bytes):
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
"""),
    "a_bucket_per_parameter": ("c5_bucket_mb", "BUCKET_MB = 1e-6" + MEASURED),
    "typed_in_speedup": ("c5_bucket_mb", """
BUCKET_MB = 1e-6
my_speedup = 3.0
print(f"buckets of {BUCKET_MB} MB: {my_speedup:.2f}x faster than one all-reduce per parameter")
"""),
}
