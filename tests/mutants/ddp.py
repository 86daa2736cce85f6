"""Lesson 02_ddp: its mutants, each a wrong answer autograde must mark down by exactly its challenge's points."""

# Lesson 02, challenge 2: the solution's DDP loop, to vary.
DDP_TRAIN = """
def ddp_train(steps, per_rank):
    rank, world, device = init_distributed()
    model = DDP(mlp(in_features=16, hidden=32).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = synthetic_batch(per_rank * world, in_features=16)
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x[mine].to(device)), y[mine].to(device)).backward()
        opt.step()
    return one_vector(model)
"""

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

MUTANTS = {
    "forgets_set_epoch": ("c1_sampler", """
def shard_indices(n, world_size, epoch, seed=0):
    return [list(DistributedSampler(range(n), num_replicas=world_size, rank=r, shuffle=True, seed=seed))
            for r in range(world_size)]
"""),
    "plain_model_on_the_global_batch": ("c2_ddp_train", ON_THE_GLOBAL_BATCH),
    "ddp_on_the_global_batch": ("c2_ddp_train", ON_THE_GLOBAL_BATCH.replace(
        "model = mlp(in_features=16, hidden=32).to(device)", "model = DDP(mlp(in_features=16, hidden=32).to(device))")),
    # Right on CPU ranks, where every device is the CPU; on GPUs each replica must sit on its rank's GPU.
    "forgets_the_device": ("c2_ddp_train", DDP_TRAIN.replace("DDP(mlp(in_features=16, hidden=32).to(device))",
                                                             "DDP(mlp(in_features=16, hidden=32))")),
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
    "sleeps_instead_of_waiting": ("c4_checkpoint", """
import time


def save_checkpoint(ddp_model, path):
    if dist.get_rank() == 0:
        torch.save(ddp_model.module.state_dict(), path)
    else:
        time.sleep(1.0)  # rank 0 needs a moment to write the file
"""),
    # Sleeps longer than any save the test makes: every rank returns after the save, none waited for it.
    "sleeps_long_instead_of_waiting": ("c4_checkpoint", """
import time


def save_checkpoint(ddp_model, path):
    if dist.get_rank() == 0:
        torch.save(ddp_model.module.state_dict(), path)
    else:
        time.sleep(5.0)
"""),
    "waits_for_the_file_to_appear": ("c4_checkpoint", """
import os
import time


def save_checkpoint(ddp_model, path):
    if dist.get_rank() == 0:
        torch.save(ddp_model.module.state_dict(), path)
    while not os.path.exists(path):
        time.sleep(0.01)
"""),
    "hard_coded_speedup": ("c5_speedup", """
PER_RANK_BATCH = 16
my_speedup = 1.9  # measured once with a bigger batch, typed in
"""),
}
