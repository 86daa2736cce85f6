"""The border between the answer's kernel and the kernel that decides the grade: calls out, data back.

In autograde (:class:`grader.grading.integrity.IsolatedExecute`) a notebook runs in two kernels.
The answer's kernel, in :mod:`grader.grading.sandbox`, runs the lesson's cells and the
student's answer cells. The grader's kernel, unconfined and out of the answer's reach, runs the
lesson's cells too (its own copies of the lesson's objects) and then the test cells, where
each name an answer cell defined is bound by :func:`bind`: a function becomes a
:class:`Remote`, whose call runs the student's function in the answer's kernel with the
arguments the test chose, and a value is fetched once as data. What comes back is data only
(:func:`to_data`: tensors, numbers, strings, lists, tuples, dicts, sets, a module's class
and state dict, the toolkit's records), read with ``torch.load(weights_only=True)``: never code,
never an object whose ``__eq__`` the answer wrote. The tests' expected values, their inputs
and the checks stay in the grader's kernel, so nothing the answer does changes them.

>>> data = from_bytes(to_bytes({"x": torch.ones(2), "n": (1, 2.5, "a"), "s": {3}}))
>>> data["x"].tolist(), data["n"], data["s"]
([1.0, 1.0], (1, 2.5, 'a'), {3})
>>> to_bytes(object())
Traceback (most recent call last):
...
TypeError: a answer returned object, which the grader cannot take as data (return tensors, numbers, strings, lists, tuples, dicts or modules)
"""

import base64
import builtins
import contextlib
import dataclasses
import functools
import importlib
import io
import os
import pickle
import secrets
import signal
import tempfile
import traceback

import cloudpickle
import torch
from torch import nn

ANSWERS = "COURSE_ANSWER_KERNEL"  # the answer kernel's connection file, in the grader's kernel's environment
ANSWERS_PID = "COURSE_ANSWER_PID"  # and its process, interrupted when a call runs past the cell's time-out
INBOX = "COURSE_ANSWER_INBOX"  # a folder of the answer kernel's own (its temporary folder), where requests go
MIME = "application/x-course-answer"
TAG = "__course__"
# Data classes of the toolkit that may come back (rebuilt field by field, from data).
RECORDS = ("grader.grading.record.Forward", "grader.timing.Timing", "grader.pipeline.Work", "grader.memory.ShardingProfile")
# Where a returned module's class may come from; any other comes back as a plain module with its state.
MODULE_HOMES = ("torch.nn.", "torch.distributed.", "grader.")


class AnswerError(Exception):
    """The student's function raised, or its result could not come back as data; the message says which."""


@functools.cache
def raised(ename):
    """The exception class to raise here for ``ename`` raised in the answer's kernel: a Python exception
    (``ValueError``, which a test may expect) stays one, and is an :class:`AnswerError` too.

    >>> issubclass(raised("ValueError"), ValueError), raised("RankError") is AnswerError
    (True, True)
    """
    builtin = getattr(builtins, ename, None)
    if isinstance(builtin, type) and issubclass(builtin, Exception) and builtin is not Exception:
        return type(ename, (builtin, AnswerError), {"__module__": "builtins"})
    return AnswerError


# ---- data, both ways of the border ----

def to_data(obj, what="answer"):
    """``obj`` made of data only, for :func:`to_bytes`; raises TypeError on anything else."""
    if obj is None:
        return obj
    for kind in (bool, int, float, complex, str, bytes):  # plain values, whatever subclass held them
        if isinstance(obj, kind):
            return kind(obj)
    if isinstance(obj, torch.Size):
        return torch.Size(int(n) for n in obj)
    if isinstance(obj, torch.Tensor):
        return obj.detach().as_subclass(torch.Tensor) if type(obj) is not nn.Parameter else obj.detach()
    if hasattr(obj, "item") and type(obj).__module__ == "numpy" and getattr(obj, "ndim", 1) == 0:
        return obj.item()
    if isinstance(obj, (torch.dtype, torch.device)):
        return {TAG: type(obj).__name__, "name": str(obj)}
    if isinstance(obj, (list, tuple)) and type(obj) in (list, tuple):
        items = [to_data(v, what) for v in obj]
        return items if type(obj) is list else tuple(items)
    if type(obj) in (set, frozenset):
        return {TAG: "set", "items": [to_data(v, what) for v in obj]}
    if isinstance(obj, dict) and type(obj).__module__ in ("builtins", "collections"):
        return {to_data(k, what): to_data(v, what) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and f"{type(obj).__module__}.{type(obj).__qualname__}" in RECORDS:
        return {TAG: f"{type(obj).__module__}.{type(obj).__qualname__}",
                "fields": {f.name: to_data(getattr(obj, f.name), what) for f in dataclasses.fields(obj)}}
    if isinstance(obj, nn.Module):
        return {TAG: "module", "class": f"{type(obj).__module__}.{type(obj).__qualname__}",
                "parameters": [name for name, _ in obj.named_parameters()],
                "state": {k: to_data(v, what) for k, v in obj.state_dict().items()}}
    raise TypeError(f"a {what} returned {type(obj).__name__}, which the grader cannot take as data (return tensors, "
                    "numbers, strings, lists, tuples, dicts or modules)")


def from_data(obj):
    """The objects :func:`to_data` described, rebuilt in this kernel from data alone."""
    if isinstance(obj, list):
        return [from_data(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(from_data(v) for v in obj)
    if not isinstance(obj, dict):
        return obj
    kind = obj.get(TAG)
    if kind is None:
        return {k: from_data(v) for k, v in obj.items()}
    if kind == "callable":
        return obj
    if kind == "set":
        return {from_data(v) for v in obj["items"]}
    if kind == "dtype":
        return getattr(torch, obj["name"].removeprefix("torch."))
    if kind == "device":
        return torch.device(obj["name"])
    if kind in RECORDS:
        module, name = kind.rsplit(".", 1)
        return getattr(importlib.import_module(module), name)(**{k: from_data(v) for k, v in obj["fields"].items()})
    if kind == "module":
        return _module(obj["class"], obj["parameters"], {k: from_data(v) for k, v in obj["state"].items()})
    raise TypeError(f"unknown data kind {kind!r}")


class Returned(nn.Module):
    """A module that came back from the answer's kernel: its class (where torch or the toolkit defines
    it) and its parameters and buffers, under the same names. It holds state; it does not run."""

    def forward(self, *args, **kwargs):
        raise AnswerError(f"a module returned by an answer is checked by its state here, not run ({self._returned})")


def _module(qualified, parameters, state):
    cls = Returned
    if qualified.startswith(MODULE_HOMES):
        module, _, name = qualified.rpartition(".")
        try:
            found = getattr(importlib.import_module(module), name)
            if isinstance(found, type) and issubclass(found, nn.Module):
                cls = type(name, (Returned, found), {"forward": Returned.forward, "__repr__": Returned.__repr__})
        except (ImportError, AttributeError):
            pass
    root = cls.__new__(cls)
    nn.Module.__init__(root)
    root._returned = qualified
    for key, value in state.items():
        *path, leaf = key.split(".")
        owner = root
        for part in path:
            if part not in owner._modules:
                owner._modules[part] = nn.Module()
            owner = owner._modules[part]
        if key in parameters:
            owner._parameters[leaf] = nn.Parameter(value, requires_grad=value.is_floating_point())
        else:
            owner._buffers[leaf] = value
    return root


def to_bytes(obj, what="answer"):
    """``obj`` as bytes of data (``torch.save`` of :func:`to_data`)."""
    buffer = io.BytesIO()
    torch.save(to_data(obj, what), buffer)
    return buffer.getvalue()


def from_bytes(raw):
    """What :func:`to_bytes` wrote, read as data only (``weights_only=True``) and rebuilt (:func:`from_data`)."""
    return from_data(torch.load(io.BytesIO(raw), weights_only=True))


# ---- the answer's kernel ----

def answer(request):
    """Run in the answer's kernel by :func:`ask`: read the request from the file ``request`` (and remove
    it), look a name up in the notebook's namespace (or take the function the grader sent), call it if
    asked, and send back the result (or the error) as data, in a display message of type ``MIME``."""
    from IPython.display import display

    try:
        with open(request, "rb") as file:
            raw = file.read()
        os.unlink(request)
        target, call, args, kwargs = pickle.loads(raw)
        name = _called(target)
        value = answers_own(target) if isinstance(target, str) else target
        if call:
            value = value(*args, **kwargs)
        elif callable(value):
            value = {TAG: "callable"}
        # The arguments as the call left them: a test that checks its input was left alone sees what the answer did.
        payload = {"value": value, "arguments": [_state_after(a) for a in args],
                   "keywords": {k: _state_after(v) for k, v in kwargs.items()}}
        raw = to_bytes(payload, f"{name}(...)" if call else name)
    except BaseException as error:  # the student's code may raise anything, KeyboardInterrupt included
        lines = traceback.format_exception(error)
        raw = to_bytes({"error": [type(error).__name__, str(error), "".join(lines[-6:])]})
    display({MIME: base64.b64encode(raw).decode()}, raw=True)


def _called(target):
    """How messages name what :func:`ask` runs: the answer's name, or the test's function's."""
    return target if isinstance(target, str) else getattr(target, "__name__", "the test's function")


def answers_own(name):
    """In the answer's kernel: what the notebook's ``name`` holds there. A :class:`Remote` sent over
    (inside a test's function, say) is rebuilt as this, so it runs the student's own function."""
    from IPython import get_ipython

    namespace = get_ipython().user_ns
    if name not in namespace:
        raise NameError(f"name {name!r} is not defined")
    return namespace[name]


def _state_after(argument):
    """An argument as data, where it is made of data (tensors, containers): its state after the call; else None."""
    try:
        return to_data(argument)
    except TypeError:
        return None


def write_back(target, after):
    """Make ``target`` (an argument of the grader's kernel) hold what the answer's call left in its copy,
    in place: tensors' values, devices and dtypes, the items of lists and dicts made of such data. Only
    what the answer could change in its own kernel changes here, as data; containers that hold records
    or modules are left as they are. Tests compute what they expect before the call.

    >>> batch = {"x": torch.zeros(2), "n": [1]}
    >>> write_back(batch, {"x": torch.ones(2), "n": [1, 2]})
    >>> batch["x"].tolist(), batch["n"]
    ([1.0, 1.0], [1, 2])
    """
    if not (_plain_data(target) and _plain_data(after)):
        return
    if isinstance(target, torch.Tensor) and isinstance(after, torch.Tensor):
        with torch.no_grad():
            target.data = after
    elif type(target) is list and type(after) is list:
        target[:] = [_merged(t, a) for t, a in zip(target, after)] + after[len(target):]
    elif isinstance(target, dict) and isinstance(after, dict):
        merged = {k: _merged(target[k], v) if k in target else v for k, v in after.items()}
        target.clear()
        target.update(merged)
    elif type(target) is tuple and type(after) is tuple:
        for t, a in zip(target, after):
            write_back(t, a)


def _plain_data(obj):
    """Whether ``obj`` is made of tensors, plain values, lists, tuples and dicts only."""
    if obj is None or type(obj) in (bool, int, float, complex, str, bytes) or isinstance(obj, torch.Tensor):
        return True
    if type(obj) in (list, tuple):
        return all(_plain_data(v) for v in obj)
    if isinstance(obj, dict) and type(obj).__module__ in ("builtins", "collections") and TAG not in obj:
        return all(_plain_data(v) for v in obj.values())
    return False


def _merged(target, after):
    """``after`` in place of ``target``: ``target`` itself, updated, where it can be."""
    if isinstance(target, torch.Tensor) and isinstance(after, torch.Tensor) or \
            type(target) is type(after) and type(target) in (list, tuple, dict):
        write_back(target, after)
        return target
    return after


# ---- the grader's kernel ----

_client = None


def _answers():
    global _client
    if _client is None:
        from jupyter_client import BlockingKernelClient

        _client = BlockingKernelClient(connection_file=os.environ[ANSWERS])
        _client.load_connection_file()
        _client.start_channels()
        _client.wait_for_ready(timeout=60)
    return _client


def ask(name, args=(), kwargs=None, call=True):
    """From the grader's kernel: ``name(*args, **kwargs)`` run in the answer's kernel (or, with
    ``call=False``, the value of ``name``), back as data. The answer's printed output is printed here.
    ``name`` may also be a function of this kernel's, sent over to run there (see :func:`run`).

    The arguments go over as pickles of this kernel's objects (cloudpickle: a test's own functions
    and lambdas by value; the answer's kernel gets copies: nothing it does to them reaches the
    test's own). An error in the answer raises :class:`AnswerError` with its message and the end
    of its traceback.

    The request goes as a file in the answer kernel's own folder, named in the code it runs: a
    model's weights written into that code would make the kernel hash megabytes of source in Python
    (ipykernel names every cell by a hash of its code), seconds a call. The name is new and random
    (``O_EXCL``, ``O_NOFOLLOW``), so no link the answer lays can redirect the write.
    """
    client = _answers()
    request = os.path.join(os.environ.get(INBOX) or tempfile.gettempdir(), f"course-request-{secrets.token_hex(16)}")
    descriptor = os.open(request, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    os.fchmod(descriptor, 0o644)  # whatever the umask: the answer's user, where it is another, reads it
    with os.fdopen(descriptor, "wb") as file:
        file.write(_dumps((name, call, tuple(args), dict(kwargs or {}))))
    name = _called(name)
    msg_id = client.execute(f"__import__('grader.grading.remote', fromlist=['answer']).answer({request!r})",
                            silent=False, store_history=False, allow_stdin=False)
    raw = None
    try:
        while True:
            msg = client.get_iopub_msg()
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                print(content["text"], end="")
            elif kind == "display_data" and MIME in content["data"]:
                raw = base64.b64decode(content["data"][MIME])
            elif kind == "error":
                raise AnswerError(f"{name}: {content['ename']}: {content['evalue']}")
            elif kind == "status" and content["execution_state"] == "idle":
                break
    except KeyboardInterrupt:  # the cell's time-out: stop the answer too, then give up
        if os.environ.get(ANSWERS_PID):
            os.kill(int(os.environ[ANSWERS_PID]), signal.SIGINT)
        raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(request)  # where the answer's kernel did not get to it
    if raw is None:
        raise AnswerError(f"{name}: the answer's kernel sent nothing back")
    payload = from_bytes(raw)
    if "error" in payload:
        ename, message, tail = payload["error"]
        raise raised(ename)(f"{name} raised {ename}: {message}\n{tail}")
    for target, after in [*zip(args, payload["arguments"]), *((kwargs[k], v) for k, v in payload["keywords"].items()
                                                               if k in (kwargs or {}))]:
        if after is not None:
            write_back(target, after)
    return payload["value"]


def grading():
    """Whether this is the grader's kernel (or a process it started), beside an answer's kernel."""
    return ANSWERS in os.environ


def run(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` where the student's answers are: here, while a student works (one
    kernel); in the answer's kernel, sent there, when the grader's kernel calls it. What comes back
    is data (:func:`to_data`). For a test whose work must happen beside the answer, such as
    records of what the answer's own code did (a stand-in GPU, a watched training loop).

    >>> run(sum, [1, 2, 3])
    6
    """
    return ask(fn, args, kwargs) if grading() else fn(*args, **kwargs)


_sent = []  # the names of the Remotes pickled so far, in this process


class _Pickler(cloudpickle.Pickler):
    """cloudpickle, but a class the notebook defined (the lesson's ``Block``, say) goes by name: the
    answer's kernel has its own, which the student's code tests against (``isinstance``)."""

    def reducer_override(self, obj):
        if isinstance(obj, type) and obj.__module__ == "__main__":
            return answers_own, (obj.__qualname__,)
        return super().reducer_override(obj)


def _dumps(obj):
    buffer = io.BytesIO()
    _Pickler(buffer).dump(obj)
    return buffer.getvalue()


def reaches_answers(obj):
    """Whether ``obj`` (a function, its arguments) calls one of the answer's functions, a :class:`Remote`:
    then it must run in the answer's kernel, where that function is.

    >>> train = Remote("ddp_train")
    >>> reaches_answers((sum, [1, 2])), reaches_answers((sum, [train])), reaches_answers(lambda steps: train(steps))
    (False, True, True)
    """
    before = len(_sent)
    try:
        _dumps(obj)
    except Exception:  # it cannot go anywhere; whoever sends it says so
        return False
    return len(_sent) > before


class Remote:
    """A student's function, as the tests in the grader's kernel see it: calling it runs it in the
    answer's kernel (:func:`ask`). Sent to the answer's kernel inside a test's function, it is the
    student's function there (:func:`answers_own`)."""

    def __init__(self, name):
        self.__name__ = self.__qualname__ = name

    def __call__(self, *args, **kwargs):
        return ask(self.__name__, args, kwargs)

    def __reduce__(self):
        _sent.append(self.__name__)
        return answers_own, (self.__name__,)

    def __repr__(self):
        return f"<the answer's {self.__name__}>"


def bind(namespace, names):
    """Bind in the grader's kernel each of ``names`` the answer's kernel has: a function as a
    :class:`Remote`, a value as its data. Names it lacks are left unbound (the tests then fail)."""
    for name in names:
        try:
            value = ask(name, call=False)
        except AnswerError:
            namespace.pop(name, None)
            continue
        namespace[name] = Remote(name) if isinstance(value, dict) and value.get(TAG) == "callable" else value
