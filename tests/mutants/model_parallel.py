"""Lesson 03_model_parallel: its mutants, each a wrong answer autograde must mark down by exactly its challenge's points."""

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

def bubble_cell(measured_bubble):
    """Lesson 03's challenge 2 cell: the right formula and a ``measured_bubble``."""
    return BUBBLE_FORMULA + measured_bubble

BUBBLE_FORMULA = """
def bubble(stages, micro_batches):
    return (stages - 1) / (micro_batches + stages - 1)

"""

MUTANTS = {
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
    # The timeline the test hands it rewritten so that the bubble the test then computes is none.
    "rewrites_the_timeline": ("c2_bubble", bubble_cell("""
def measured_bubble(works):
    start = 0.0
    for w in works:
        w.rank, w.start, w.end = 0, start, start + 1.0
        start += 1.0
    return 0.0
""")),
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
    # Every rank gathers the whole model; on GPUs it stays there (on a CPU grader rank 0's copy looks right).
    "full_without_cpu_offload": ("c5_full_state", """
def full_state_dict(model):
    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
"""),
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
}
