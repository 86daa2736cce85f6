"""Lesson 01_data_parallel: its mutants, each a wrong answer autograde must mark down by exactly its challenge's points."""

MUTANTS = {
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
    # Timings typed in, with the forward passes made outside any timing.
    "typed_in_timings": ("c4_compare", """
def compare_dp(make_model, batch, target):
    plain, wrapped = make_model(), nn.DataParallel(make_model())
    for _ in range(3):
        plain(batch)
        wrapped(batch)
    single = timing.Timing([0.0005] * 3, label="single")
    dp = timing.Timing([0.0005] * 3, label="dp")
    return {"single": single, "dp": dp, "speedup": timing.speedup(single, dp)}
"""),
    # Times the forward pass only: no backward, no optimizer step.
    "times_the_forward_only": ("c4_compare", """
def compare_dp(make_model, batch, target):
    plain, wrapped = make_model(), nn.DataParallel(make_model())
    single = timing.measure(lambda: plain(batch), label="single")
    dp = timing.measure(lambda: wrapped(batch), label="dp")
    return {"single": single, "dp": dp, "speedup": timing.speedup(single, dp)}
"""),
    # Measured, then its times edited: a 2.5x speedup that a pass-through DataParallel never gives.
    "edits_the_timing": ("c4_compare", """
def compare_dp(make_model, batch, target):
    single = timing.measure(train_step_fn(make_model(), batch, target), label="single")
    dp = timing.measure(train_step_fn(nn.DataParallel(make_model()), batch, target), label="dp")
    dp.times[:] = [t / 2.5 for t in single.times]
    return {"single": single, "dp": dp, "speedup": timing.speedup(single, dp)}
"""),
    "times_the_wrapper_twice": ("c4_compare", """
def compare_dp(make_model, batch, target):
    wrapped = nn.DataParallel(make_model())
    single = timing.measure(train_step_fn(wrapped, batch, target), label="single")
    dp = timing.measure(train_step_fn(wrapped, batch, target), label="dp")
    return {"single": single, "dp": dp, "speedup": timing.speedup(single, dp)}
"""),
    # A wrapper of its own under torch's name: it splits nothing, and the records tell it from torch's.
    "own_class_named_dataparallel": ("c4_compare", """
class DataParallel(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x):
        return self.module(x)


def compare_dp(make_model, batch, target):
    single = timing.measure(train_step_fn(make_model(), batch, target), label="single")
    dp = timing.measure(train_step_fn(DataParallel(make_model()), batch, target), label="dp")
    return {"single": single, "dp": dp, "speedup": timing.speedup(single, dp)}
"""),
}
