"""Assertions for challenge cells.

Every failed check raises :class:`CheckFailed` (an ``AssertionError``) with three parts:
what was expected, what was found, and a hint; the notebook shows that message first.
Checks never write to stderr, because nbgrader gives a test cell that writes to stderr
zero points even when it passes.
"""

import contextlib
import io
import os
import sys
import traceback
import types
import warnings

import torch

_TOOLKIT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the grader package


class CheckFailed(AssertionError):
    r"""A check that failed. In a notebook (and in the feedback nbgrader returns) its message comes
    first, then only the lines of the notebook that led there: the toolkit's and IPython's frames
    are left out, as pytest leaves out its own.

    >>> try:
    ...     check_equal(0.3, 3.33, "my_speedup(10, 3)")
    ... except CheckFailed as failed:
    ...     print("\n".join(failed._render_traceback_()))
    CheckFailed: my_speedup(10, 3) is not right
      expected: 3.33
      got:      0.3
    <BLANKLINE>
    where:
      File "<doctest ...>", line 2, in <module>
        check_equal(0.3, 3.33, "my_speedup(10, 3)")
    """

    def _render_traceback_(self):  # IPython shows these lines instead of the whole traceback
        hidden = [_TOOLKIT] + [os.path.dirname(m.__file__) for m in (sys.modules.get("IPython"),) if m]
        frames = [f for f in traceback.extract_tb(self.__traceback__)
                  if not any(f.filename.startswith(folder + os.sep) for folder in hidden)]
        lines = [f"{type(self).__name__}: {self}"]
        if frames:
            lines += ["", "where:"]
        for frame in frames:
            lines += [f"  {_place(frame)}, line {frame.lineno}, in {frame.name}", f"    {frame.line}"]
        return lines


def _place(frame):
    """Where a frame's code is, as IPython names a notebook's cells ("Cell In[3]"), else its file."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    cell = getattr(getattr(shell, "compile", None), "format_code_name", lambda name: None)(frame.filename)
    return " ".join(cell) if cell else f'File "{frame.filename}"'


def _fail(what, expected, got, hint=""):
    lines = [f"{what}", f"  expected: {expected}", f"  got:      {got}"]
    if hint:
        lines.append(f"  hint: {hint}")
    raise CheckFailed("\n".join(lines))


@contextlib.contextmanager
def quiet():
    """Run a block with warnings and stderr captured, so a graded cell stays clean.

    >>> with quiet():
    ...     warnings.warn("not shown")
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.redirect_stderr(io.StringIO()):
            yield


def check_shape(tensor, expected, name="output"):
    """Assert ``tensor.shape`` (or a tuple) equals ``expected``.

    >>> check_shape(torch.zeros(16, 5), (16, 5))
    """
    got = tuple(tensor.shape) if hasattr(tensor, "shape") else tensor
    try:
        got = tuple(got)
    except TypeError:
        _fail(f"{name} should be a shape", tuple(expected), repr(got),
              "a shape is a tuple of ints such as (16, 5)")
    expected = tuple(expected)
    if got != expected:
        hint = ""
        if len(got) == len(expected) and got[1:] == expected[1:]:
            hint = "the batch dimension (dim 0) differs: outputs are gathered back to the full batch"
        elif len(got) != len(expected):
            hint = f"{len(expected)} dimensions expected, {len(got)} found"
        _fail(f"{name} has the wrong shape", expected, got, hint)


def check_equal(got, expected, name="value", hint=""):
    """Assert two plain values are equal.

    >>> check_equal([4, 4, 4, 4], [4, 4, 4, 4], "chunk sizes")
    """
    if _own_equality(got):
        _fail(f"{name} should be a plain value", repr(expected), f"an object of a class of the notebook's own, "
              f"{type(got).__name__}, whose == the notebook wrote", "return numbers, strings, lists, tuples or dicts")
    if got != expected or not got == expected:  # both ways: numpy's masked value is neither equal nor unequal
        _fail(f"{name} is not right", repr(expected), repr(got), hint)


def _own_equality(value):
    """Whether a value, or one inside it, compares with an ``==`` or ``!=`` written in the notebook.

    >>> notebook = {"__name__": "__main__"}   # a kernel's namespace
    >>> exec("class Liar:\\n    def __eq__(self, other):\\n        return True", notebook)
    >>> _own_equality([1, (2.0, "x")]), _own_equality([notebook["Liar"]()])
    (False, True)
    """
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(map(_own_equality, value))
    if isinstance(value, dict):
        return any(_own_equality(k) or _own_equality(v) for k, v in value.items())
    methods = (getattr(type(value), name, None) for name in ("__eq__", "__ne__"))
    return any(isinstance(m, types.FunctionType) and m.__module__ == "__main__" for m in methods)


def check_close(got, expected, name="value", rtol=1e-5, atol=1e-8, hint=""):
    """Assert numbers or tensors are equal within tolerance.

    >>> check_close(3.3333, 10 / 3, "speedup", rtol=1e-3)
    """
    if isinstance(got, torch.Tensor) or isinstance(expected, torch.Tensor):
        got_t, exp_t = torch.as_tensor(got), torch.as_tensor(expected)
        if got_t.shape != exp_t.shape:
            _fail(f"{name} has the wrong shape", tuple(exp_t.shape), tuple(got_t.shape), hint)
        got_t, exp_t = got_t.detach().cpu().double(), exp_t.detach().cpu().double()
        if not torch.allclose(got_t, exp_t, rtol=rtol, atol=atol):
            worst = (got_t - exp_t).abs().max().item()
            _fail(f"{name} differs", f"within rtol={rtol}, atol={atol}",
                  f"largest difference {worst:.3g}", hint)
        return
    try:
        g, e = float(got), float(expected)
    except (TypeError, ValueError):
        _fail(f"{name} should be a number", repr(expected), repr(got), hint)
    if not abs(g - e) <= atol + rtol * abs(e):
        _fail(f"{name} is not right", f"{e:.6g}", f"{g:.6g}", hint)


def check_rows(calls, x, rank, rows, name):
    """Assert every forward call in ``calls`` (:func:`grader.grading.record.watched`) saw this rank's
    slice of ``x``: rows ``rank*rows`` to ``(rank+1)*rows``, exactly.

    >>> from grader.grading import record
    >>> x = torch.arange(8.0).reshape(4, 2)
    >>> _, seen = record.watched(torch.nn.Identity(), x[2:])
    >>> check_rows(seen, x, 1, 2, "rank 1")
    """
    for f in calls:
        check_close(f.input, x[rank * rows:(rank + 1) * rows], f"{name}: the batch its forward pass saw", rtol=0,
                    atol=0, hint="each rank trains on its own slice: rows rank*per_rank to (rank+1)*per_rank")


def check_keys(state_dict, expected, name="state dict"):
    """Assert a state dict has exactly the expected keys; explain the difference.

    ``expected`` is a model, a state dict or any iterable of key names. The message
    lists missing and unexpected keys and spots a ``module.`` prefix, the mark that
    ``nn.DataParallel`` and DDP leave on every key.

    >>> m = torch.nn.Linear(2, 2)
    >>> check_keys(m.state_dict(), m)
    """
    if isinstance(expected, torch.nn.Module):
        expected = expected.state_dict()
    got_keys, exp_keys = set(state_dict), set(expected)
    if got_keys == exp_keys:
        return
    missing, unexpected = sorted(exp_keys - got_keys), sorted(got_keys - exp_keys)
    hint = ""
    if unexpected and all(k.startswith("module.") for k in unexpected):
        if {k[len("module."):] for k in unexpected} == set(missing):
            hint = ("every key carries a 'module.' prefix: the dict was saved from a wrapped "
                    "model; strip the prefix or save model.module.state_dict()")
    elif missing and all(k.startswith("module.") for k in missing):
        hint = "the model expects 'module.' keys: it is wrapped; load into model.module instead"
    _fail(f"{name} keys do not match",
          f"{len(exp_keys)} keys, missing {_short(missing)}",
          f"{len(got_keys)} keys, unexpected {_short(unexpected)}", hint)


def _short(keys, n=4):
    shown = ", ".join(repr(k) for k in keys[:n])
    return f"[{shown}{', ...' if len(keys) > n else ''}]" if keys else "none"


def check_same_parameters(a, b, name="model", atol=1e-6):
    """Assert two models hold the same parameter values, name by name.

    >>> m = torch.nn.Linear(2, 2)
    >>> check_same_parameters(m, m)
    """
    sa, sb = a.state_dict(), b.state_dict()
    check_keys(sa, sb, name)
    for k in sa:
        check_close(sa[k], sb[k], f"{name} parameter {k!r}", rtol=0, atol=atol)
