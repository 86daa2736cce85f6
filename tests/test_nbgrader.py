"""The nbgrader round trip with real nbgrader commands and a real gradebook."""

import copy
import json

import pytest
from nbgrader.api import Gradebook

from conftest import LESSONS, REPO, assert_ran_cleanly, graded_cells, lesson_notebook, nbgrader, read_nb

pytestmark = pytest.mark.slow

# Mutants: plausible wrong answers a student might write, one student each. Each must lose
# exactly its challenge's points. Every challenge keeps at least one (a test checks it); a
# mutant that scores is a bug in the challenge.
# Every rank trains on the whole global batch: the same parameters as DDP, by the wrong route.
ON_THE_GLOBAL_BATCH = """
def ddp_train(steps, per_rank):
    rank, world, device = init_distributed()
    model = mlp(in_features=16, hidden=32).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = synthetic_batch(per_rank * world, in_features=16)
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x.to(device)), y.to(device)).backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()]).cpu()
"""
# Lesson 03: weight shapes and the stage cut worked out by the rule (the solution), to vary.
STAGES_BY_THE_RULE = """
def weight_shapes(sizes):
    return [(out, inp) for inp, out in zip(sizes, sizes[1:])]


def stage_parameters(model, stages):
    layers = [name for name, _ in model.named_children()]
    base, extra = divmod(len(layers), stages)
    result, first = [], 0
    for stage in range(stages):
        count = base + (1 if stage < extra else 0)
        mine = set(layers[first:first + count])
        result.append([name for name, _ in model.named_parameters() if name.split(".")[0] in mine])
        first += count
    return result
"""
FSDP_TRAIN = """
def fsdp_train(steps, per_rank):
    rank, world, device = init_distributed()
    model = fully_shard(mlp(in_features=16, hidden=32).to(device), mesh=init_device_mesh(device.type, (world,)))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = synthetic_batch(per_rank * world, in_features=16)
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x[mine].to(device)), y[mine].to(device)).backward()
        opt.step()
    return torch.cat([p.full_tensor().detach().flatten() for p in model.parameters()]).cpu()
"""
# Lesson 03, challenge 6: every Block, then the root (the solution), to vary.
SHARD_BLOCKS = """
def shard(model, mesh, stage=3):
    keep = {"reshard_after_forward": False} if stage == 2 else {}
    for module in model.modules():
        if isinstance(module, Block):
            fully_shard(module, mesh=mesh, **keep)
    fully_shard(model, mesh=mesh, **keep)
    return model
"""

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
GLOBAL_BATCH = 512
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


def bubble_cell(measured_bubble, options=""):
    """Lesson 03's challenge 2 cell: the right formula, a ``measured_bubble``, and the GPipe run."""
    run = f'pipeline.run_schedule(MICRO_BATCHES, "gpipe"{", " + options if options else ""})'
    return BUBBLE_FORMULA + measured_bubble + f"\n\nMICRO_BATCHES = 4\nmy_works = {run}\n"


BUBBLE_FORMULA = """
def bubble(stages, micro_batches):
    return (stages - 1) / (micro_batches + stages - 1)

"""
MUTANTS = {
    "00_foundations": {
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
    },
    "01_data_parallel": {
        "splits_the_output": ("c1_output_shape", """
def dp_output_shape(batch, in_features, out_features, n_gpus):
    return (batch // n_gpus, out_features)
"""),
        "equal_chunks": ("c2_chunk_sizes", "def dp_chunk_sizes(batch, n_devices):\n    return [batch // n_devices] * n_devices\n"),
        "consumes_the_callers_dict": ("c3_three_ways", """
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present


def load_by_stripping(plain, state_dict):
    plain.load_state_dict({k.removeprefix("module."): v for k, v in state_dict.items()})
    return plain


def load_by_consuming(plain, state_dict):
    consume_prefix_in_state_dict_if_present(state_dict, "module.")
    plain.load_state_dict(state_dict)
    return plain


def load_by_wrapping(plain, state_dict):
    wrapper = nn.DataParallel(plain)
    wrapper.load_state_dict(state_dict)
    return wrapper.module
"""),
        "times_nothing": ("c4_compare", """
def compare_dp(make_model, batch, target):
    single = timing.measure(lambda: None, label="single")
    dp = timing.measure(lambda: None, label="dp")
    return {"single": single, "dp": dp, "speedup": timing.speedup(single, dp)}
"""),
        "times_the_wrapper_twice": ("c4_compare", """
def compare_dp(make_model, batch, target):
    wrapped = nn.DataParallel(make_model())
    single = timing.measure(train_step_fn(wrapped, batch, target), label="single")
    dp = timing.measure(train_step_fn(wrapped, batch, target), label="dp")
    return {"single": single, "dp": dp, "speedup": timing.speedup(single, dp)}
"""),
    },
    "02_ddp": {
        "forgets_set_epoch": ("c1_sampler", """
def shard_indices(n, world_size, epoch, seed=0):
    return [list(DistributedSampler(range(n), num_replicas=world_size, rank=r, shuffle=True, seed=seed))
            for r in range(world_size)]
"""),
        "plain_model_on_the_global_batch": ("c2_ddp_train", ON_THE_GLOBAL_BATCH),
        "ddp_on_the_global_batch": ("c2_ddp_train", ON_THE_GLOBAL_BATCH.replace(
            "model = mlp(in_features=16, hidden=32).to(device)", "model = DDP(mlp(in_features=16, hidden=32).to(device))")),
        "sums_without_dividing": ("c3_average", """
def average_gradients(model):
    for p in model.parameters():
        dist.all_reduce(p.grad)
"""),
        "every_rank_saves": ("c4_checkpoint", """
def save_checkpoint(ddp_model, path):
    torch.save(ddp_model.module.state_dict(), path)
"""),
        "rank0_saves_nobody_waits": ("c4_checkpoint", """
def save_checkpoint(ddp_model, path):
    if dist.get_rank() == 0:
        torch.save(ddp_model.module.state_dict(), path)
"""),
        "hard_coded_speedup": ("c5_speedup", """
PER_RANK_BATCH = 16
my_speedup = 1.9  # measured once with a bigger batch, typed in
"""),
    },
    "03_model_parallel": {
        "transposed_shapes": ("c1_stages", STAGES_BY_THE_RULE.replace(
            "return [(out, inp) for inp, out in zip(sizes, sizes[1:])]", "return list(zip(sizes, sizes[1:]))")),
        "extra_layers_last": ("c1_stages", STAGES_BY_THE_RULE.replace(
            "count = base + (1 if stage < extra else 0)", "count = base + (extra if stage == stages - 1 else 0)")),
        "asks_the_toolkit_to_split": ("c1_stages", STAGES_BY_THE_RULE.split("def stage_parameters")[0] + """
from grader.pipeline import split as cut  # renamed, so no one sees pipeline.split called


def stage_parameters(model, stages):
    return [[name for name, _ in part.named_parameters()] for part in cut(model, stages)]
"""),
        "formula_as_measurement": ("c2_bubble", bubble_cell("""
def measured_bubble(works):  # counts stages and micro-batches, times nothing
    return bubble(len({w.rank for w in works}), len({w.micro for w in works}))
""")),
        "each_rank_its_own_span": ("c2_bubble", bubble_cell("""
def measured_bubble(works):
    ranks = {w.rank for w in works}
    idle = 0
    for r in ranks:
        mine = [w for w in works if w.rank == r]
        span = max(w.end for w in mine) - min(w.start for w in mine)
        idle += 1 - sum(w.end - w.start for w in mine) / span
    return idle / len(ranks)
""")),
        "assumes_records_in_order": ("c2_bubble", bubble_cell("""
def measured_bubble(works):  # the first record starts first, the last one ends last
    busy = sum(w.end - w.start for w in works) / len({w.rank for w in works})
    return 1 - busy / (works[-1].end - works[0].start)
""")),
        "timeline_of_three_stages": ("c2_bubble", bubble_cell("""
def measured_bubble(works):
    ranks = {w.rank for w in works}
    span = max(w.end for w in works) - min(w.start for w in works)
    return 1 - sum(w.end - w.start for w in works) / len(ranks) / span
""", "stages=3, width=64, layers=6, batch=64")),
        "gradients_sharded_at_stage_1": ("c3_zero", """
def zero_bytes(params, world, stage):
    return {"parameters": round(4 * params / (world if stage >= 3 else 1)),
            "gradients": round(4 * params / (world if stage >= 1 else 1)),
            "optimizer": round(8 * params / (world if stage >= 1 else 1))}
"""),
        "asks_the_toolkit": ("c3_zero", """
from grader.memory import per_rank as predicted


def zero_bytes(params, world, stage):
    return predicted(params, data=world, zero=stage)
"""),
        "ddp_not_fsdp": ("c4_fsdp", FSDP_TRAIN.replace(
            "fully_shard(mlp(in_features=16, hidden=32).to(device), mesh=init_device_mesh(device.type, (world,)))",
            "DDP(mlp(in_features=16, hidden=32).to(device))").replace("p.full_tensor()", "p")),
        "plain_model_named_like_fsdp": ("c4_fsdp", """
class FSDPSequential(nn.Sequential):  # the name FSDP gives, on a plain model averaged by hand
    pass

""" + FSDP_TRAIN.replace(
            "fully_shard(mlp(in_features=16, hidden=32).to(device), mesh=init_device_mesh(device.type, (world,)))",
            "FSDPSequential(*mlp(in_features=16, hidden=32)).to(device)").replace(
            ".backward()\n", ".backward()\n        for p in model.parameters():\n"
            "            dist.all_reduce(p.grad)\n            p.grad /= world\n").replace("p.full_tensor()", "p")),
        "fsdp_on_the_global_batch": ("c4_fsdp", FSDP_TRAIN.replace("x[mine]", "x").replace("y[mine]", "y")),
        "returns_the_shards": ("c5_full_state", "def full_state_dict(model):\n    return model.state_dict()\n"),
        "gathers_equal_pieces": ("c5_full_state", """
def full_state_dict(model):  # right only while every dim 0 splits evenly over the ranks
    full = {}
    for name, value in model.state_dict().items():
        local = value.to_local().contiguous()
        pieces = [torch.empty_like(local) for _ in range(dist.get_world_size())]
        dist.all_gather(pieces, local)
        full[name] = torch.cat(pieces).cpu()
    return full
"""),
        "returns_local_pieces": ("c5_full_state", """
def full_state_dict(model):
    return {k: v.to_local().cpu() for k, v in model.state_dict().items()}
"""),
        # One group, the whole model: gathered at once and held (ZeRO-3's saving at the peak never happens).
        "root_only": ("c6_shard", """
def shard(model, mesh, stage=3):
    return fully_shard(model, mesh=mesh, reshard_after_forward=stage == 3)
"""),
        # Every block its own root: the root's own parameters stay whole and unsynchronised.
        "blocks_without_the_root": ("c6_shard", """
def shard(model, mesh, stage=3):
    for module in model.modules():
        if isinstance(module, Block):
            fully_shard(module, mesh=mesh, reshard_after_forward=stage == 3)
    return model
"""),
        # Right while the blocks are the model's children, wrong once they sit one level down.
        "top_level_children": ("c6_shard", """
def shard(model, mesh, stage=3):
    keep = {"reshard_after_forward": False} if stage == 2 else {}
    for child in model.children():
        fully_shard(child, mesh=mesh, **keep)
    fully_shard(model, mesh=mesh, **keep)
    return model
"""),
        "one_setting_for_both_stages": ("c6_shard", SHARD_BLOCKS.replace(
            'keep = {"reshard_after_forward": False} if stage == 2 else {}', "keep = {}")),
    },
    "04_batch_scaling": {
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
        "a_batch_of_its_own": ("c4_serial", SERIAL_FIT + MEASURED_SPEEDUPS.replace(
            "GLOBAL_BATCH = 512", "GLOBAL_BATCH = 8192  # scales better")),
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
MY_EFFICIENCIES = {256: 0.63, 1024: 0.83, 4096: 0.89}  # the README's efficiencies of 2 ranks
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
    },
}


def points(lesson):
    """{test cell grade id: points} of a lesson's source notebook."""
    return {c["metadata"]["nbgrader"]["grade_id"]: c["metadata"]["nbgrader"]["points"]
            for c in graded_cells(read_nb(lesson_notebook("source", lesson)), "grade")}


def test_every_challenge_keeps_a_mutant():
    for lesson in LESSONS:
        covered = {f"{gid}_test" for gid, _ in MUTANTS.get(lesson, {}).values()}
        assert covered == set(points(lesson)), f"{lesson}: challenges without a mutant: {set(points(lesson)) - covered}"


@pytest.fixture(scope="module")
def released(course):
    for lesson in LESSONS:
        nbgrader("generate_assignment", lesson, "--force", cwd=course)
    return course


def test_regenerated_release_is_exactly_the_committed_one(released):
    for lesson in LESSONS:
        made = sorted(p.relative_to(released / "release") for p in (released / "release" / lesson).rglob("*") if p.is_file())
        committed = sorted(p.relative_to(REPO / "release") for p in (REPO / "release" / lesson).rglob("*") if p.is_file())
        assert made == committed, f"{lesson}: release files differ; run `make release`"
        for rel in made:
            assert (released / "release" / rel).read_bytes() == (REPO / "release" / rel).read_bytes(), \
                f"release/{rel} is out of date with source/; run `make release` and commit"


# That the source passes every test is proven by the solver's full marks below, and that
# every test fails on each lesson's release by the untouched student's zero (one notebook
# run per lesson instead of three). `validate --invert`, the student's own command, runs
# here once, on the lightest lesson, so the command itself stays checked.
@pytest.mark.parametrize("lesson", LESSONS[:1])
def test_validate_invert_fails_every_test_on_release(released, lesson):
    out = nbgrader("validate", "--invert", str(released / "release" / lesson / f"{lesson}.ipynb"),
                   cwd=released).stdout
    assert "Success! The notebook does not pass any tests." in out, out[-3000:]


def submission(lesson, answers=None, tests=None, drop=()):
    """The release notebook with the source's solutions filled in.

    ``answers`` replaces solution cells and ``tests`` replaces test cells, by grade id;
    ``drop`` deletes cells by grade id.
    """
    answers = answers or {}
    tests = tests or {}
    solutions = {c["metadata"]["nbgrader"]["grade_id"]: c["source"]
                 for c in graded_cells(read_nb(lesson_notebook("source", lesson)), "solution")}
    nb = copy.deepcopy(read_nb(REPO / "release" / lesson / f"{lesson}.ipynb"))
    kept = []
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        gid = meta.get("grade_id")
        if gid in drop:
            continue
        if meta.get("solution"):
            cell["source"] = answers.get(gid, solutions[gid])
        elif meta.get("grade") and gid in tests:
            cell["source"] = tests[gid]
        kept.append(cell)
    nb["cells"] = kept
    return nb


def submit(course, student, lesson, nb):
    path = course / "submitted" / student / lesson / f"{lesson}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nb if isinstance(nb, str) else json.dumps(nb))


def scores(course, lesson, student):
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        sub = gb.find_submission_notebook(lesson, lesson, student)
        return sub.score, sub.max_score, {g.name: g.score for g in sub.grades}


def mutant_students(lesson):
    """{student: {solution grade id: mutant name}}: the lesson's mutants packed into few students.

    A student carries at most one mutant per challenge, so each notebook run (the costly
    part of autograde) grades several wrong answers at once; per-cell scores tell them apart.
    """
    students = []
    for name, (gid, _) in MUTANTS[lesson].items():
        free = next((s for s in students if gid not in s), None)
        if free is None:
            students.append(free := {})
        free[gid] = name
    return {f"mutants_{i}": carried for i, carried in enumerate(students, 1)}


@pytest.fixture(scope="module")
def graded(released):
    """Every lesson autograded once, for a class with one kind of submission per student."""
    first = LESSONS[0]
    for lesson in LESSONS:
        submit(released, "solver", lesson, submission(lesson))
        submit(released, "untouched", lesson, (REPO / "release" / lesson / f"{lesson}.ipynb").read_text())
        for student, carried in mutant_students(lesson).items():
            submit(released, student, lesson, submission(
                lesson, answers={gid: MUTANTS[lesson][name][1].lstrip() for gid, name in carried.items()}))
    submit(released, "corrupt", first, '{"cells": [ this is not json')
    logs = {}
    for lesson in LESSONS:  # the class, under the course's own cell time-out
        proc = nbgrader("autograde", lesson, "--force", cwd=released, check=False)
        logs[lesson] = proc.stdout + proc.stderr
    # The robustness cases, in one student of the first lesson (each notebook run costs time):
    # a test cell rewritten to pass, a test cell deleted, and an endless loop, graded alone
    # with a short cell time-out so the suite need not wait the course's 120 s.
    submit(released, "tamperer", first, submission(first, answers={
        "c1_speedup": "def my_speedup(t1, tn):\n    return tn / t1\n",
        "c2_to_device": MUTANTS[first]["does_nothing"][1],
        "c3_gpus_needed": "def gpus_needed(*args, **kwargs):\n    while True:\n        pass\n"},
        tests={"c2_to_device_test": "pass"}, drop={"c1_speedup_test"}))
    nbgrader("autograde", first, "--student=tamperer", "--force", "--Execute.timeout=20", cwd=released)
    return released, logs


@pytest.mark.parametrize("lesson", LESSONS)
def test_solution_gets_full_marks(graded, lesson):
    score, max_score, _ = scores(graded[0], lesson, "solver")
    assert max_score >= 10
    assert score == max_score


@pytest.mark.parametrize("lesson", LESSONS)
def test_solution_runs_top_to_bottom_without_errors_or_stderr(graded, lesson):
    # The solver's notebook is the source run top to bottom, under nbgrader's cell time-out.
    assert_ran_cleanly(read_nb(graded[0] / "autograded" / "solver" / lesson / f"{lesson}.ipynb"))


@pytest.mark.parametrize("lesson", LESSONS)
def test_untouched_release_gets_zero(graded, lesson):
    score, max_score, per_cell = scores(graded[0], lesson, "untouched")
    assert (score, max_score >= 10) == (0, True)
    assert set(per_cell) == set(points(lesson)) and not any(per_cell.values())  # every test cell failed


@pytest.mark.parametrize("lesson, mutant", [(lesson, name) for lesson in LESSONS for name in MUTANTS[lesson]])
def test_mutant_loses_exactly_its_challenges_points(graded, lesson, mutant):
    test_id = MUTANTS[lesson][mutant][0] + "_test"
    student, carried = next((s, c) for s, c in mutant_students(lesson).items() if mutant in c.values())
    _, _, per_cell = scores(graded[0], lesson, student)
    assert per_cell[test_id] == 0, f"{mutant} scored on {test_id}: the challenge accepts this wrong answer"
    # Every challenge this student answered rightly keeps its points: the mutants cost only their own.
    mutated = {f"{gid}_test" for gid in carried}
    right = {gid: pts for gid, pts in points(lesson).items() if gid not in mutated}
    assert {gid: per_cell[gid] for gid in right} == right, per_cell


def test_tampered_deleted_and_endless_cells_score_nothing_and_the_rest_is_graded(graded):
    # The rewritten test cell is restored, the deleted one put back, and the endless loop
    # stopped at the time-out: each of those challenges scores 0, every other one its points.
    score, max_score, per_cell = scores(graded[0], LESSONS[0], "tamperer")
    lost = {"c1_speedup_test", "c2_to_device_test", "c3_gpus_needed_test"}
    assert {gid: per_cell[gid] for gid in lost} == dict.fromkeys(lost, 0)
    assert score == max_score - sum(points(LESSONS[0])[gid] for gid in lost)


def test_corrupt_submission_is_logged_and_does_not_stop_the_class(graded):
    course, logs = graded
    assert "corrupt" in logs[LESSONS[0]]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        graded_students = {s.student.id for s in gb.assignment_submissions(LESSONS[0])}
    assert {"solver", "untouched", "tamperer"} <= graded_students
