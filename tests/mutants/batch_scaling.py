"""Lesson 04_batch_scaling: its mutants, each a wrong answer autograde must mark down by exactly its challenge's points."""

# Lesson 04: the accumulation answer (the solution), to vary.
ACCUMULATE = """
def accumulation_train(steps, micro, accumulation):
    rank, world, device = init_distributed()
    model = DDP(mlp(in_features=16, hidden=32).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, weight_decay=0.01)
    per_rank = micro * accumulation
    for step in range(steps):
        x, y = synthetic_batch(per_rank * world, in_features=16, seed=step)
        mine = slice(rank * per_rank, (rank + 1) * per_rank)
        opt.zero_grad()
        for i, (xb, yb) in enumerate(zip(x[mine].split(micro), y[mine].split(micro))):
            with model.no_sync() if i < accumulation - 1 else contextlib.nullcontext():
                loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
                (loss / accumulation).backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()]).cpu()
"""

# Lesson 04: the batch arithmetic, right, to vary.
BATCH_ARITHMETIC = """
def global_batch(per_device, devices, accumulation=1):
    return per_device * devices * accumulation


def per_device_batch(global_batch, devices, accumulation=1):
    if global_batch % (devices * accumulation):
        raise ValueError("uneven")
    return global_batch // (devices * accumulation)


def scaled_lr(base_lr, base_batch, batch, rule="linear"):
    k = batch / base_batch
    return base_lr * (k if rule == "linear" else math.sqrt(k))
"""

SERIAL_FIT = """
def fit_serial(ns, speedups):
    pairs = [(1 - 1 / n, 1 / s - 1 / n) for n, s in zip(ns, speedups) if n > 1]
    return sum(a * b for a, b in pairs) / sum(a * a for a, _ in pairs)

"""

MEASURED_SPEEDUPS = """
GLOBAL_BATCH = scaling.strong_batch(max(SWEEP))
points = scaling.strong_scaling(GLOBAL_BATCH, ranks=SWEEP, steps=15)
MY_NS = [p.ranks for p in points]
MY_SPEEDUPS = [p.speedup for p in points]
MY_SERIAL = fit_serial(MY_NS, MY_SPEEDUPS)
"""

SMALLEST = """
def smallest_batch(efficiencies, target):
    reaching = [batch for batch, efficiency in efficiencies.items() if efficiency >= target]
    return min(reaching) if reaching else None

"""

EFFICIENCIES_MEASURED = """
TARGET = scaling.expected_ddp_speedup(2) / 2
candidates = [256, 1024, 2048]
MY_EFFICIENCIES = {b: s / 2 for b, s in zip(candidates, scaling.ddp_speedups(candidates, ranks=2, steps=3))}
PER_RANK_BATCH = smallest_batch(MY_EFFICIENCIES, TARGET)
"""

MUTANTS = {
    "ignores_accumulation": ("c1_batch", BATCH_ARITHMETIC.replace(
        "global_batch // (devices * accumulation)", "global_batch // devices").replace(
        "global_batch % (devices * accumulation)", "global_batch % devices")),
    "floors_uneven_splits": ("c1_batch", BATCH_ARITHMETIC.replace(
        'if global_batch % (devices * accumulation):\n        raise ValueError("uneven")\n    ', "")),
    "checks_each_factor": ("c1_batch", BATCH_ARITHMETIC.replace(
        "if global_batch % (devices * accumulation):", "if global_batch % devices or global_batch % accumulation:")),
    "one_rule_for_all": ("c1_batch", BATCH_ARITHMETIC.replace(
        '(k if rule == "linear" else math.sqrt(k))', "k")),
    "warms_up_from_zero": ("c2_warmup", """
def warmup_scheduler(optimizer, base_lr, base_batch, batch, warmup_steps):
    k = batch / base_batch
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: k * min(1.0, step / warmup_steps))
"""),
    "forgets_to_scale": ("c2_warmup", """
def warmup_scheduler(optimizer, base_lr, base_batch, batch, warmup_steps):
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup_steps))
"""),
    "scaled_without_warmup": ("c2_warmup", """
def warmup_scheduler(optimizer, base_lr, base_batch, batch, warmup_steps):
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: batch / base_batch)
"""),
    "first_group_only": ("c2_warmup", """
def warmup_scheduler(optimizer, base_lr, base_batch, batch, warmup_steps):
    optimizer.param_groups[0]["lr"] = base_lr * batch / base_batch
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup_steps))
"""),
    "no_sync_around_backward_only": ("c3_accumulate", ACCUMULATE.replace(
        "            with model.no_sync() if i < accumulation - 1 else contextlib.nullcontext():\n"
        "                loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))\n",
        "            loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))\n"
        "            with model.no_sync() if i < accumulation - 1 else contextlib.nullcontext():\n")),
    # The same steps as dividing the loss for plain SGD, but not with weight decay.
    "learning_rate_divided_not_the_loss": ("c3_accumulate", ACCUMULATE.replace(
        "(loss / accumulation).backward()", "loss.backward()").replace("lr=0.1,", "lr=0.1 / accumulation,")),
    "one_backward_for_all": ("c3_accumulate", ACCUMULATE.replace(
        "        for i, (xb, yb)", "        losses = []\n        for i, (xb, yb)").replace(
        "                loss = nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))\n"
        "                (loss / accumulation).backward()\n",
        "                losses.append(nn.functional.cross_entropy(model(xb.to(device)), yb.to(device)))\n"
        "        (sum(losses) / accumulation).backward()\n")),
    "interleaved_rows": ("c3_accumulate", ACCUMULATE.replace(
        "zip(x[mine].split(micro), y[mine].split(micro))", "zip(x[rank::world].split(micro), y[rank::world].split(micro))")),
    "asks_the_toolkit": ("c4_serial", "from grader.scaling import fit_serial_fraction as fit_serial\n"
                         + MEASURED_SPEEDUPS),
    "typed_in_speedups": ("c4_serial", SERIAL_FIT + MEASURED_SPEEDUPS.replace(
        "MY_SPEEDUPS = [p.speedup for p in points]", "MY_SPEEDUPS = [1.0, 2.0]  # what two ranks should give").replace(
        "points = scaling.strong_scaling(GLOBAL_BATCH, ranks=SWEEP, steps=15)\n", "").replace(
        "[p.ranks for p in points]", "SWEEP")),
    "drops_the_first_point": ("c4_serial", """
def fit_serial(ns, speedups):  # the first point is the one-rank baseline
    xs = [1 - 1 / n for n in ns[1:]]
    ys = [1 / s - 1 / n for n, s in zip(ns[1:], speedups[1:])]
    return sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)

""" + MEASURED_SPEEDUPS),
    # Says GLOBAL_BATCH but sweeps a larger batch, which scales better.
    "a_batch_of_its_own": ("c4_serial", SERIAL_FIT + MEASURED_SPEEDUPS.replace(
        "scaling.strong_scaling(GLOBAL_BATCH, ", "scaling.strong_scaling(2048, ")),
    # Weak scaling's speedups (the batch per rank of two ranks on every rank) fitted instead of strong's.
    "fits_weak_scaling": ("c4_serial", SERIAL_FIT + MEASURED_SPEEDUPS.replace(
        "scaling.strong_scaling(GLOBAL_BATCH, ", "scaling.weak_scaling(GLOBAL_BATCH // 2, ")),
    "best_not_smallest": ("c5_efficiency", """
def smallest_batch(efficiencies, target):
    best = max(efficiencies, key=efficiencies.get)
    return best if efficiencies[best] >= target else None

""" + EFFICIENCIES_MEASURED),
    # Typed in from a table: no sweep of the learner's measured them.
    "typed_in_efficiencies": ("c5_efficiency", SMALLEST + """
TARGET = scaling.expected_ddp_speedup(2) / 2
MY_EFFICIENCIES = {256: 0.63, 1024: 0.83, 4096: 0.89}  # docs/measured.md's efficiencies of 2 ranks
PER_RANK_BATCH = smallest_batch(MY_EFFICIENCIES, TARGET)
"""),
    # Each batch's throughput over the best one's: measured, but not speedup / ranks.
    "throughput_over_best": ("c5_efficiency", SMALLEST + """
TARGET = scaling.expected_ddp_speedup(2) / 2
candidates = [256, 1024, 2048]
rates = scaling.throughput(candidates, ranks=2, steps=3)
MY_EFFICIENCIES = {b: r / max(rates) for b, r in zip(candidates, rates)}
PER_RANK_BATCH = smallest_batch(MY_EFFICIENCIES, TARGET)
"""),
    "speedups_as_efficiencies": ("c5_efficiency", SMALLEST + EFFICIENCIES_MEASURED.replace("s / 2", "s")),
    # A target out of anyone's reach: no batch reaches it, which would pass for a busy machine's doing.
    "raises_the_target": ("c5_efficiency", SMALLEST + EFFICIENCIES_MEASURED.replace(
        "TARGET = scaling.expected_ddp_speedup(2) / 2", "TARGET = 2.0")),
}
