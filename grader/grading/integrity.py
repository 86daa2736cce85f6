"""Grades an instructor can trust: the course's nbgrader preprocessors for autograde.

nbgrader runs a submission and then its tests in one kernel, so code a student wrote could
change what the tests do, and anything that kernel reports could be forged from inside it.
Here the verdicts are decided where no answer reaches, set in ``nbgrader_config.py`` around
nbgrader's own steps:

- :class:`RestoreRelease` (before execution) rebuilds the notebook from the pristine
  release: every cell but the answer cells is the lesson's own (test cells with their hidden
  tests, from the gradebook), the answers are the student's, matched by grade id; cells the
  student added or changed are left out and listed, in the notebook and in the log;
- :class:`ScanAnswers` reads each answer cell (:func:`scan`) for anything that could reach
  past the student's own code: IPython's shell, the namespace, modules' attributes,
  frames, code built at run time, files that Python or IPython would run. A flagged answer
  sends the test cells after it to manual grading (:class:`ManualGradeFlagged`): a first
  flag for the instructor, on which no grade depends;
- :class:`StampTests` / :class:`CheckStamps` give each test cell a random token to print,
  and score 0 a test cell that did not print it (it did not run as written);
- :class:`IsolatedExecute` is nbgrader's ``Execute`` with two kernels in clean rooms: the
  answer's, in :mod:`grader.grading.sandbox`, runs the answer cells, and the grader's runs
  the test cells, calling the answer's functions through :mod:`grader.grading.remote`;
- :class:`ManualGradeFlagged` (after ``SaveAutoGrades``) leaves the flagged tests' scores to
  the instructor, with the reason in the cell's output, the answer's comment and the log.
"""

import ast
import builtins
import collections.abc
import contextlib
import copy
import functools
import importlib.machinery
import importlib.util
import inspect
import json
import os
import pkgutil
import re
import secrets
import sys
import tempfile
import time
import types
import uuid
from collections import defaultdict
from pathlib import Path

import nbformat
from IPython.core.inputtransformer2 import TransformerManager
from nbformat.v4 import new_markdown_cell, new_output
from nbgrader.api import Gradebook
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from nbgrader.utils import is_grade, is_solution
from traitlets import Bool, Unicode

from grader.grading import sandbox, zygote

KEY = "course_integrity"
NO_CWD = "--InteractiveShellApp.ignore_cwd=True"  # IPython >= 8: the working directory stays off sys.path

# Modules an answer may use. Everything else a lesson's answers never need (sys, inspect,
# importlib, subprocess, ctypes, gc, builtins, ...), and is refused.
ALLOWED = {"__future__", "torch", "numpy", "grader", "math", "statistics", "time", "functools", "itertools",
           "collections", "contextlib", "dataclasses", "typing", "random", "copy", "warnings", "tempfile",
           "pathlib", "os", "timeit"}
# Of these modules, only these names: a timer and plain file handling, nothing that runs code.
LIMITED = {"os": {"environ", "getenv", "getpid", "cpu_count", "sched_getaffinity", "path", "sep", "makedirs", "replace",
                  "remove", "listdir"},
           "timeit": {"default_timer"}}
# Attributes of allowed modules that change the library itself or run code hidden in data.
DENY = {"library", "cpp_extension", "hub", "package", "overrides", "benchmark", "collect_env", "multiprocessing",
        "ctypeslib", "f2py", "distutils", "extbuild", "get_type_hints", "ForwardRef", "make_dataclass", "serialization",
        "format", "npyio", "integrity", "autograde", "fairness", "graph", "ExitStack", "AsyncExitStack",
        "get_device_module", "swap_tensors", "ops", "fx", "use_deterministic_algorithms", "HERE", "as_strided",
        "stride_tricks", "prune", "CUDAPluggableAllocator", "XPUPluggableAllocator", "change_current_allocator",
        "jiterator", "rename_privateuse1_backend", "generate_methods_for_privateuse1_backend", "CompilationUnit"}
# Process groups and stores an answer would make for itself: messages on them are out of the tests'
# records (``record.messages`` sees the process groups the ranks were given).
GROUPS = {"ProcessGroupGloo", "ProcessGroupNCCL", "ProcessGroupMPI", "ProcessGroupUCC", "FileStore", "TCPStore",
          "HashStore", "PrefixStore", "new_group", "new_subgroups", "new_subgroups_by_enumeration", "split_group"}
# Settings for every later cell an answer may change: the threads of its own process.
SETTINGS = {"set_num_threads", "set_num_interop_threads"}
# Attributes that run code or reach IPython, or keep a context on after the cell, whatever they are attributes of.
RUNS = {"exec", "eval", "compile", "get_ipython", "run_cell", "system", "popen", "enter_context", "enter_async_context",
        "setattr", "getattr", "delattr", "loads", "load_library"}
# What an answer's classes may build on: plain objects, exceptions, torch's modules, datasets and
# autograd functions. A library class with hooks of its own (a dispatch mode, a module tracker)
# would run an answer's overrides inside the tests.
BASES = ("torch.nn.Module", "torch.utils.data.Dataset", "torch.utils.data.IterableDataset", "torch.autograd.Function",
         "typing.NamedTuple")
# Builtin types whose objects never change: their methods, reached through the type, change nothing (``str.lower``).
IMMUTABLE = (str, bytes, int, float, complex, bool, tuple, frozenset, range)
# Modules that give an answer reach past its own code: reached as an attribute of anything but the
# module chain an answer imported (``torch.get_device_module("cpu").torch.sys``), each is flagged.
MODULE_NAMES = {"sys", "builtins", "os", "importlib", "subprocess", "inspect", "gc", "ctypes", "io", "pickle", "marshal",
                "types", "runpy", "shutil", "threading", "multiprocessing", "signal", "atexit", "codecs", "torch",
                "numpy", "np", "grader", "functools", "contextlib", "warnings", "pathlib", "tempfile", "dataclasses"}
# A library's containers (``warnings.filters``, ``os.environ``), which an answer may read, not hand on.
MUTABLE = (list, dict, set, bytearray, collections.abc.MutableMapping, collections.abc.MutableSequence,
           collections.abc.MutableSet)
READERS = {"len", "list", "dict", "set", "tuple", "sorted", "sum", "min", "max", "print", "repr", "str", "enumerate",
           "zip", "iter", "any", "all", "isinstance", "reversed", "frozenset"}  # builtins that only read
# What may be read through a class reached from an object (``type(x)``, ``x.__class__``): its name.
CLASS_NAMES = {"__name__", "__qualname__"}
# What rewrites the class or object it is given: class decorators, only on the answer's own classes, and
# functools' attribute copiers (the wrapped object's ``__dict__`` too), only onto the answer's own functions.
CLASS_DECORATORS = {"dataclass", "total_ordering"}
WRAPPERS = {"update_wrapper", "wraps"}
# Keyword arguments that make a library set attributes it is told the names of (functools.update_wrapper, wraps),
# and the most positional arguments of calls whose next ones would do that, or unpickle (numpy.load's allow_pickle).
NAMES_ATTRIBUTES = {"assigned", "updated"}
POSITIONAL = {"update_wrapper": 2, "wraps": 1, "load": 2}
SHELL = {"get_ipython", "In", "Out", "_ih", "_oh", "_dh", "_i", "_ii", "_iii", "__", "___", "exit", "quit"}
DYNAMIC = {"exec", "eval", "compile", "globals", "locals", "vars", "breakpoint"}
SPECIAL = {"__init__", "__name__", "__main__"}  # special names an answer may use
READ_ONLY = {"__class__"}  # special attributes an answer may read, never set
# The interpreter's own records: frames, generators, coroutines, tracebacks, code objects. Through
# them code reaches any namespace (``gen().gi_frame.f_globals``) and the builtins.
INTERPRETER = re.compile(r"(f|gi|cr|ag|tb|co)_[a-z_]+")
# Tensor fields a training loop sets on the tensors it holds (``p.grad /= world``).
TENSOR_FIELDS = {"grad", "data", "requires_grad"}
# Functions that change what they are given (``torch.nn.init.zeros_``, ``numpy.copyto``, ``random.shuffle``).
IN_PLACE = r"[a-z]\w*[a-z0-9]_|vector_to_parameters|copyto|put|place|putmask|fill_diagonal|put_along_axis|shuffle|" \
           r"broadcast|all_reduce|reduce|all_gather\w*|reduce_scatter\w*|scatter|gather|all_to_all\w*|i?recv|" \
           r"(remove_)?(weight|spectral)_norm|orthogonal|convert_\w+|fuse_\w+|prepare\w*|replace_\w+|fully_shard|" \
           r"parallelize_module|checkpoint_wrapper|apply_\w+"
# Calls that may hand back (part of) what they are given: builtins, and a module's views of a tensor's memory.
ALIASING = {"next", "iter", "list", "tuple", "reversed", "sorted", "enumerate", "zip", "dict", "vars", "asarray",
            "asanyarray", "as_tensor", "from_numpy", "from_dlpack", "frombuffer", "view_as_real",
            "view_as_complex", "narrow", "select", "squeeze", "unsqueeze", "flatten", "reshape", "ravel", "t",
            "transpose", "permute", "movedim", "unflatten", "detach", "broadcast_to", "expand_copy", "chunk", "split",
            "unbind", "tensor_split", "hsplit", "vsplit", "swapaxes", "moveaxis", "atleast_1d", "atleast_2d"}
METHODS = SPECIAL | {"__post_init__", "__repr__", "__str__", "__len__", "__getitem__", "__iter__", "__next__",
                     "__call__", "__enter__", "__exit__"}  # special methods an answer's class may define
MUTATORS = {"update", "append", "extend", "insert", "pop", "popitem", "clear", "remove", "setdefault", "add",
            "discard", "sort", "reverse"}
BUILTINS = {name for name in dir(builtins) if not name.startswith("_")}
# What names a file Python or IPython would run, or a place they run files from at start-up.
PYTHON_FILES = (".py", ".pyc", ".pyw", ".ipy", ".pth")
STARTUP = ("/startup", "startup/", "site-packages", "dist-packages", "sitecustomize", "usercustomize", ".ipython",
           "profile_default", "ipython_config", "ipython_kernel_config", ".jupyter", "jupyter_", "kernel.json",
           "pythonstartup", "ipythondir", "pythonpath", "pythonuserbase", "pythonhome")
# The process's own memory and the machine's devices, as files (``/proc/self/mem``): writing there rewrites code.
SYSTEM = ("/proc", "/dev/", "/sys/")
# What moves a file's position or reads and writes its raw bytes there (``numpy.fromfile(f, offset=...)``).
RAW_FILES = {"seek", "fromfile", "tofile", "memmap", "from_file", "pwrite", "pread", "lseek"}
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class _Literal(ast.NodeTransformer):
    """``getattr(x, "name")`` reads as ``x.name`` (and ``getattr(x, "name", d)`` as ``x.name or d``)."""

    def visit_Call(self, node):
        self.generic_visit(node)
        name = _folded(node.args[1]) if len(node.args) in (2, 3) else None
        if isinstance(node.func, ast.Name) and node.func.id == "getattr" and name is not None and not node.keywords:
            attribute = ast.copy_location(ast.Attribute(value=node.args[0], attr=name, ctx=ast.Load()), node)
            return ast.copy_location(ast.BoolOp(op=ast.Or(), values=[attribute, *node.args[2:]]), node) \
                if len(node.args) == 3 else attribute
        return node


@functools.cache
def _parse(source):
    """The AST of a cell as IPython runs it (magics become ``get_ipython()`` calls); None if it does not compile."""
    try:
        source = TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 (IPython refuses it, and so would the kernel)
        pass
    try:
        tree = compile(source, "<cell>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except (SyntaxError, ValueError):
        return None
    return _Literal().visit(tree)


@functools.cache
def _is_module(name):
    """Whether ``name`` is a module that can be imported, found without importing it."""
    parts = name.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):
        return False
    for i in range(1, len(parts)):
        if spec is None or not spec.submodule_search_locations:
            return False
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:i + 1]), spec.submodule_search_locations)
    return spec is not None


@functools.cache
def _defines(module):
    """The public names a module of the toolkit defines or re-exports (not what it imports from elsewhere)."""
    spec = importlib.util.find_spec(module)
    names = {m.name for m in pkgutil.iter_modules(spec.submodule_search_locations or [])}
    body = list(ast.parse(Path(spec.origin).read_text()).body)
    while body:
        node = body.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("grader")):
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            body += [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                     *[s for h in getattr(node, "handlers", []) for s in h.body]]
    return frozenset(n for n in names if not n.startswith("_"))


def _step(module, attr):
    """``(what is wrong or None, the module reached or None)`` for attribute ``attr`` of the module named ``module``."""
    name = f"{module}.{attr}"
    if attr.startswith("__"):
        return None, None  # special names have a rule of their own
    if attr.startswith("_"):
        return f"reaches {name}, private to {module}", None
    reached = name if _is_module(name) else None
    if attr in DENY:
        return f"reaches {name}, which changes the library, runs hidden code or decides grades", reached
    if attr.startswith("register_") or attr.startswith("set") and attr not in SETTINGS and not reached:
        return f"reaches {name}, which registers hooks or changes a setting for every later cell", reached
    if module in LIMITED:
        return (None if attr in LIMITED[module] else f"uses {name}"), ("os.path" if name == "os.path" else None)
    alias = _module_attribute(module, attr)
    if alias and not reached and not alias.startswith(f"{module}."):  # ``torch.nn.functional.torch``
        return f"reaches the module {alias} through {module}", alias
    if reached is None and attr in sys.stdlib_module_names and isinstance(_resolve(name), (types.ModuleType, type(None))):
        return (None if attr in ALLOWED else f"reaches the module {attr} through {module}"), attr
    if module.split(".")[0] == "grader" and attr not in _defines(module):
        return f"reaches {name}, which {module} does not define", reached
    return None, reached


def _module_attribute(module, attr):
    """The name of the module that attribute ``attr`` of the (allowed) module ``module`` is, if it is one.

    The module is imported to see (:func:`_resolve`): a module's attribute can be another module
    under a name no import would find (``torch.nn.functional.torch`` is torch).
    """
    value = _resolve(f"{module}.{attr}")
    return value.__name__ if isinstance(value, types.ModuleType) else None


@functools.cache
def _resolve(dotted):
    """The object a dotted name of an allowed module means (``torch.nn.Sequential``), or None.

    The longest prefix that is a module is imported; the rest is read with ``getattr``.
    """
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        if parts[0] in ALLOWED and _is_module(".".join(parts[:i])):
            try:
                value = importlib.import_module(".".join(parts[:i]))
                for attr in parts[i:]:
                    value = getattr(value, attr)
            except Exception:  # noqa: BLE001 (nothing there to reach)
                return None
            return value
    return getattr(builtins, dotted, None) if len(parts) == 1 else None


def _through_class(cls, attr):
    """Whether ``cls.attr`` is what an object of ``cls`` runs as a method or reads as a property:
    called through the class, it runs on (or changes) any object it is given."""
    try:
        found = inspect.getattr_static(cls, attr)
    except AttributeError:
        return False
    return not isinstance(found, (classmethod, staticmethod, types.ClassMethodDescriptorType)) and \
        (inspect.isroutine(found) or inspect.isdatadescriptor(found))


def _base_allowed(cls):
    """Whether an answer's class may build on the library class ``cls`` (``BASES``, exceptions, ``object``)."""
    bases = [_resolve(base) for base in BASES]  # typing.NamedTuple is a function, named as a base
    return any(cls is b for b in bases) or isinstance(cls, type) and (
        cls is object or issubclass(cls, BaseException) or
        any(isinstance(b, type) and issubclass(cls, b) for b in bases))


@functools.cache
def _read_methods():
    """What an answer may call on the lesson's objects: the methods that only read, a tensor's, a module's
    or a container's."""
    import torch

    tensor = {n for n in dir(torch.Tensor) if not n.startswith("_") and not n.endswith("_")} - {
        "backward", "retain_grad", "resize", "resize_as", "record_stream", "register_hook",
        "register_post_accumulate_grad_hook", "storage", "untyped_storage", "numpy", "share_memory"}
    module = {"parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children", "modules",
              "named_modules", "state_dict", "get_submodule", "get_parameter", "get_buffer", "extra_repr", "forward"}
    container = {"keys", "values", "items", "get", "copy", "index", "count"} | {n for n in dir(str) if n[0] != "_"}
    return frozenset((tensor | module | container) - MUTATORS)


def _literals(trees, containers=False):
    """Names the lesson's cells bind only to literals that never change (``TARGET = 0.75``), and with
    ``containers`` also to lists, dicts and sets it wrote out (``SWEEP = [n for n in (1, 2, 4) if ...]``)."""
    bindings, literal = defaultdict(set), set()
    written = (ast.List, ast.ListComp, ast.Set, ast.SetComp, ast.Dict, ast.DictComp) if containers else ()
    for tree in trees:
        for name, _, node in _bindings(tree):
            bindings[name].add(node)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                continue
            if isinstance(node.value, written):
                literal.add(node.targets[0])
                continue
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
            if all(isinstance(v, IMMUTABLE) for v in (value if isinstance(value, tuple) else [value])):
                literal.add(node.targets[0])
    return {name for name, nodes in bindings.items() if nodes <= literal}


def _imported(node):
    """``{name: what it is bound to}`` for an import statement: ``{"nn": "torch.nn"}`` for ``from torch import nn``."""
    if isinstance(node, ast.Import):
        return {a.asname or a.name.split(".")[0]: a.name if a.asname else a.name.split(".")[0] for a in node.names}
    return {a.asname or a.name: f"{'.' * node.level}{node.module or ''}.{a.name}" for a in node.names}


def _bindings(tree):
    """``[(name, import target or None, node)]``: what a cell binds in the notebook's namespace."""
    found = []

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.append((node.name, None, node))
            found.extend((n, None, g) for g in ast.walk(node) if isinstance(g, ast.Global) for n in g.names)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.extend((name, target, node) for name, target in _imported(node).items())
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            found.append((node.id, None, node))
        if isinstance(node, SCOPES[3:]):  # a comprehension binds only what ``:=`` assigns in it
            found.extend((n.target.id, None, n) for n in ast.walk(node) if isinstance(n, ast.NamedExpr))
        elif not isinstance(node, ast.Lambda):
            for child in ast.iter_child_nodes(node):
                visit(child)

    visit(tree)
    return found


def _reads(tree, deferred=False):
    """Names a cell reads; with ``deferred``, only those read inside its functions (run later, when called)."""
    roots = [n for n in ast.walk(tree) if isinstance(n, SCOPES[:3])] if deferred else [tree]
    return {n.id for root in roots for n in ast.walk(root) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _chain(node):
    """``(root Name node or None, [attributes])`` of an expression such as ``a.b[0].c``."""
    attrs = []
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute):
            attrs.append(node.attr)
        node = node.value
    return (node if isinstance(node, ast.Name) else None), attrs[::-1]


def _folded(node):
    """The text of a string built from literals only (``"a." + "py"``, ``"".join(["a", ".py"])``), or a
    path joined from them (``Path("/", "proc") / "self"``), else None."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Div)):
        parts = [_folded(node.left), _folded(node.right)]
        if isinstance(node.op, ast.Div) and None not in parts:  # ``Path("/") / "proc"``
            return os.path.join(*parts)
    elif isinstance(node, ast.JoinedStr):
        parts = [_folded(v) for v in node.values]
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
          and len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple))):
        parts = [_folded(v) for v in node.args[0].elts]
        sep = _folded(node.func.value)
        return None if sep is None or None in parts else sep.join(parts)
    elif isinstance(node, ast.Call) and _callee(node) in ("Path", "PurePath", "PosixPath", "join") and node.args:
        parts = [_folded(a) for a in node.args]  # ``Path("/", "proc", "self")``, ``os.path.join(...)``
        return None if None in parts or node.keywords else os.path.join(*parts)
    else:
        return None
    return None if None in parts else "".join(parts)


def _callee(call):
    """The name a call's function goes by: ``wraps`` for ``functools.wraps(...)`` and ``wraps(...)``."""
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)


def _classy(node):
    """Whether an expression reads an object's class: ``type(x)`` or ``x.__class__``."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type") or \
        (isinstance(node, ast.Attribute) and node.attr == "__class__")


def _other_bindings(node):
    """Names a node binds other than as a plain assignment target or an argument."""
    if isinstance(node, (ast.MatchAs, ast.MatchStar, ast.ExceptHandler, ast.FunctionDef, ast.AsyncFunctionDef,
                         ast.ClassDef)):
        return [node.name] if node.name else []
    if isinstance(node, ast.MatchMapping):
        return [node.rest] if node.rest else []
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return list(_imported(node))
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return node.names
    return []


def _annotation(node, parents):
    """Whether a node is (inside) a type annotation, where naming a class only describes a value."""
    while node in parents:
        parent = parents[node]
        if node is getattr(parent, "annotation", None) or node is getattr(parent, "returns", None):
            return True
        node = parent
    return False


def _same_scope(node):
    """The nodes inside ``node`` that run in its scope (not in functions or classes it defines)."""
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (*SCOPES, ast.ClassDef)):
            yield child
            yield from _same_scope(child)


def _class_use(name, parents):
    """Whether the answer's own class is named to be called, built on, tested against, annotated or
    read an attribute of (whose methods are flagged apart): nothing that hands the class on."""
    parent = parents.get(name)
    if isinstance(parent, ast.Call):
        return parent.func is name or (isinstance(parent.func, ast.Name) and
                                       parent.func.id in ("isinstance", "issubclass", "super"))
    if isinstance(parent, ast.Tuple) and isinstance(parents.get(parent), ast.Call):
        return getattr(parents[parent].func, "id", None) in ("isinstance", "issubclass")
    return isinstance(parent, (ast.ClassDef, ast.Attribute, ast.Compare)) or _annotation(name, parents)


def _handed_on(node, parents):
    """Whether a value is given to a call other than a reading builtin's, or bound to a name."""
    parent = parents.get(node)
    if isinstance(parent, ast.keyword):
        node, parent = parent, parents.get(parent)
    if isinstance(parent, ast.Call) and parent.func is not node:
        return getattr(parent.func, "id", None) not in READERS
    return isinstance(parent, (ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.Starred, ast.List, ast.Tuple, ast.Dict,
                               ast.Lambda, ast.Return, ast.Yield))


def _trees(sources):
    return [t for t in map(_parse, [sources] if isinstance(sources, str) else sources) if t is not None]


def scan(source, before=(), after=(), answered=(), hooks=()):
    """Reasons why an answer cell could change what the tests check, other than by its own values; one per finding.

    ``before`` and ``after`` are the sources of the lesson's own cells (not answers) that run
    before and after it, ``answered`` the earlier answer cells. What the lesson imports and
    defines, an answer may use but not change; the modules it may import are listed in ``ALLOWED``.
    ``hooks`` names the hook methods (``register_post_accumulate_grad_hook``) the answer may call on
    objects it is given, where registering them is the challenge.

    >>> scan("get_ipython().input_transformers_cleanup.append(lambda lines: [])")
    ["line 1: uses IPython's shell (get_ipython)"]
    >>> scan("checks.check_equal = lambda *a, **k: None", before="from grader.grading import checks")
    ['line 1: changes checks.check_equal, which the notebook imported']
    >>> scan("import sys\\nsys.modules['grader.grading.checks'] = None")
    ['line 1: imports sys, which answers may not use', 'line 2: changes sys.modules, which the notebook imported', 'line 2: uses sys, which answers may not use']
    >>> scan("%run -i helper.py")
    ['line 1: names a Python file or a start-up place (-i helper.py)', 'line 1: runs an IPython magic or shell command']
    >>> scan("def my_speedup(t1, tn):\\n    return t1 / tn"), scan("w = getattr(model, 'weight')")
    ([], [])
    """
    tree = _parse(source)
    if tree is None:
        return []  # it does not compile, so nothing in it runs
    before, after = _trees(before), _trees(after)
    given = {name: target for t in before for name, target, _ in _bindings(t)}  # the lesson's names so far
    imports = {name: target for t in [*before, *_trees(answered), tree] for name, target, _ in _bindings(t) if target}
    # Imports inside the answer's functions too: a module a function imports and returns is still that module.
    imports.update((name, target) for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                   for name, target in _imported(node).items())
    used = set().union(*(_reads(t) for t in after), *(_reads(t, deferred=True) for t in before))
    protected = (set(given) | BUILTINS) & used  # what the lesson's code still to run reads: not to be rebound
    held = {name: imports.get(name) for name in set(imports) | protected}  # the lesson's objects and modules
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    classes = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    functions = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    lambdas = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda)
               for t in node.targets if isinstance(t, ast.Name)}
    earlier = {node.name for t in _trees(answered) for node in ast.walk(t) if isinstance(node, ast.ClassDef)}
    # Objects the answer made itself, whose attributes it may set: its classes' ``self`` and their instances.
    methods = {(c.name, f.name): f for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
               for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    # An instance method's first argument is the object it is called on, as long as nothing calls
    # it through its class (``K.put(torch, ...)`` would make torch that argument: flagged below).
    selves = {f: f.args.args[0].arg for f in methods.values() if f.args.args and not any(
        isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod") for d in f.decorator_list)}
    typed, binds = set(), defaultdict(set)  # how each name is bound: "made" only by calling one of the answer's classes
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            binds[node.arg].add("argument")
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            statement = parents.get(node)
            value = getattr(statement, "value", None)
            mine = isinstance(statement, ast.Assign) and isinstance(value, ast.Call) and \
                isinstance(value.func, ast.Name) and value.func.id in classes
            binds[node.id].add("made" if mine else "other")
        else:  # every other way a name is bound: ``case x:``, ``except E as x``, imports, definitions
            for name in _other_bindings(node):
                binds[name].add("other")
        if isinstance(node, ast.Assign) and any(_classy(n) for n in ast.walk(node.value)):
            typed |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}  # ``kind = type(x)``
    made = {name for name, how in binds.items() if how == {"made"}}
    scopes = {}
    found = set()

    def flag(node, reason):
        found.add((getattr(node, "lineno", 1), reason))

    def local(scope):
        if scope not in scopes:
            if isinstance(scope, SCOPES[:3]):
                a = scope.args
                names = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x}
                body = scope.body if isinstance(scope.body, list) else [scope.body]
            else:
                names, body = set(), [g.target for g in scope.generators]
            nodes = [n for b in body for n in ast.walk(b)]
            names |= {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
            names |= {n.name for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
            scopes[scope] = names - {g for n in nodes if isinstance(n, ast.Global) for g in n.names}
        return scopes[scope]

    def lesson(name):
        """Whether a Name node means one of the lesson's objects (held, and not a local of the same name)."""
        if name is None or name.id not in held:
            return False
        node = name
        while node in parents:
            node = parents[node]
            if isinstance(node, SCOPES) and name.id in local(node):
                return False
        return True

    def called(node):  # the chain starting at this name is a call's function: ``torch.zeros(3)``
        while isinstance(parents.get(node), ast.Attribute):
            node = parents[node]
        return isinstance(parents.get(node), ast.Call) and parents[node].func is node

    def module_of(root, attrs):
        """The module ``root.attrs`` is, if it is one: ``torch.nn``."""
        module = held.get(root.id) if root is not None else None
        for attr in attrs:
            module = _step(module, attr)[1] if module and (_is_module(module) or module == "os.path") else None
        return module if module and (_is_module(module) or module == "os.path") else None

    def own(obj, attr):
        """Whether setting ``attr`` on the object ``obj`` changes only what the answer made itself:
        ``self`` in a method of its class, or an object of its class it made."""
        root, attrs = _chain(obj)
        if root is None or lesson(root) or derived(obj) or root.id in typed or "__class__" in attrs:
            return False
        return attr in TENSOR_FIELDS or (not attrs and (selves.get(scope_of(root)) == root.id or root.id in made))

    def scope_of(node):
        """The function, lambda or comprehension a node runs in (None: the cell itself)."""
        node = parents.get(node)
        while node is not None and not isinstance(node, SCOPES):
            node = parents.get(node)
        return node

    def derived(node):
        """The name of the lesson's object an expression's value may be, or be part of (``model.weight.view(-1)``,
        ``next(model.parameters())``, ``torch.default_generator``), else None. A module's function or
        class called makes a new object; so does calling the lesson's object itself (``model(x)``)."""
        if isinstance(node, ast.Name):
            if (scope_of(node), node.id) in aliases:
                return aliases[scope_of(node), node.id]
            return node.id if node.id in objects and lesson(node) and not module_of(node, []) else None
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            root, attrs = _chain(node)
            if module_of(root, attrs):
                return None
            module = module_of(root, attrs[:-1])
            if module:  # a module's own object: its state (``torch.default_generator``), not a class or a function
                value = _resolve(f"{module}.{attrs[-1]}")
                return None if callable(value) or isinstance(value, IMMUTABLE) else root.id
            return derived(node.value)
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and not module_of(*_chain(node.func.value)):
                return derived(node.func.value)  # a method of the object: it may return a view of it
            root, attrs = _chain(node.func)
            name = ".".join([held.get(root.id) or root.id, *attrs]) if root is not None and given.get(
                root.id, root.id) else None  # an import or a builtin, not the lesson's own function
            if _callee(node) in ALIASING or isinstance(name and _resolve(name), type):
                # ``next(model.parameters())``, ``np.asarray(batch)``, ``torch.optim.SGD(model.parameters())``
                return next(filter(None, map(derived, [*node.args, *(k.value for k in node.keywords)])), None)
            return None  # a function computes something new: ``torch.matmul(a, b)``, ``model(x)``
        if isinstance(node, (ast.Tuple, ast.List)):
            return next(filter(None, map(derived, node.elts)), None)
        if isinstance(node, (ast.Starred, ast.NamedExpr)):
            return derived(node.value)
        return None

    def rewrites(node):
        """Whether a reference to a class decorator or to functools' copiers is used on something but the
        answer's own: ``@dataclass`` on its class, ``@functools.wraps(f)`` on its function,
        ``update_wrapper(its_function, f)``; not bound to another name, handed on or aimed elsewhere."""
        name = node.attr if isinstance(node, ast.Attribute) else (held.get(node.id) or node.id).rsplit(".")[-1]
        if name not in CLASS_DECORATORS | WRAPPERS:
            return False
        call = parents.get(node) if isinstance(parents.get(node), ast.Call) and parents[node].func is node else None
        owner = parents.get(call or node)
        kind = ast.ClassDef if name in CLASS_DECORATORS else (ast.FunctionDef, ast.AsyncFunctionDef)
        if name != "update_wrapper" and isinstance(owner, kind) and (call or node) in owner.decorator_list:
            return name == "wraps" and call is None  # ``@wraps`` bare would wrap the function in itself
        return not (name == "update_wrapper" and call is not None and call.args and
                    isinstance(call.args[0], ast.Name) and call.args[0].id in functions)

    def walk(module, attrs, node):
        """Follow ``attrs`` from the module named ``module``, flagging the first step an answer may not take."""
        if not module or not (_is_module(module) or module == "os.path"):
            return
        for attr in attrs:
            if not module:
                return
            reason, module = _step(module, attr)
            if reason:
                return flag(node, reason)

    # Names bound to values reached from the lesson's objects are held too: ``a = torch.nn`` then ``a.x = 1``.
    aliases, bound, objects = {}, [], set(held) - _literals(before)  # aliases: {(scope, name): the lesson's name}
    data = _literals(before, containers=True)  # numbers the lesson wrote out: an answer may hand them on
    for node in ast.walk(tree):
        pairs = []
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None:
            pairs = [(t, node.value) for t in getattr(node, "targets", [getattr(node, "target", None)])]
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            pairs = [(node.target, node.iter)]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            pairs = [(node.optional_vars, node.context_expr)]
        for target, value in pairs:
            if any(isinstance(n, ast.Name) and lesson(n) and not called(n) for n in ast.walk(value)):
                root, attrs = _chain(value)
                module = module_of(root, attrs) or (".".join([held[root.id], *attrs]) if isinstance(
                    value, (ast.Name, ast.Attribute)) and root is not None and module_of(root, []) else None)
                held.update((n.id, module) for n in ast.walk(target) if isinstance(n, ast.Name))
            bound.append((target, value))
    # Names bound to what may be part of the lesson's objects, in the scope they are bound in:
    # ``p = next(model.parameters())`` in a function, then ``p.data = ...``. Repeated until nothing is added.
    while True:
        known = len(aliases)
        aliases.update(((scope_of(n), n.id), lesson_name) for target, value in bound if (lesson_name := derived(value))
                       for n in ast.walk(target) if isinstance(n, ast.Name))
        if len(aliases) == known:
            break

    for n, line in enumerate(source.splitlines(), 1):
        if line.lstrip().startswith(("%", "!")):
            found.add((n, "runs an IPython magic or shell command"))
    magic = {line for line, _ in found}
    for name, target, node in _bindings(tree):
        if name in protected and (target is None or target != given.get(name)):
            flag(node, f"rebinds {name}, which the lesson uses")

    for node in ast.walk(tree):
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load) and rewrites(node):
            flag(node, f"uses {ast.unparse(node)[:60]} on something other than its own classes and functions, "
                       "which rewrites what it is given")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            # ``import a.b.c`` runs a.b.c whatever name it binds: the whole path is checked.
            imported = [a.name for a in node.names] if isinstance(node, ast.Import) else _imported(node).values()
            for target in imported:
                if target.split(".")[-1] in GROUPS:
                    flag(node, f"makes a process group or store of its own ({target}), whose messages no test sees")
                top, *attrs = target.split(".")
                module = ".".join([top, *attrs]) if isinstance(node, ast.Import) else ".".join([top, *attrs[:-1]])
                if top not in ALLOWED:
                    flag(node, f"imports {top or target}, which answers may not use")
                elif any(a.startswith("__") for a in attrs):  # ``torch.backends.__init__``: a package run again
                    flag(node, f"imports {target}, through a special name")
                elif attrs[-1:] == ["*"]:
                    flag(node, f"imports every name of {target[:-2]}")
                elif module and module != "os.path" and not _is_module(module):  # written while it ran, or not there
                    flag(node, f"imports {module}, which is not installed")
                else:
                    walk(top, attrs, node)
        elif isinstance(node, (ast.arg, ast.AnnAssign, ast.FunctionDef, ast.AsyncFunctionDef)):
            note = node.annotation if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else node.returns
            if note is not None and any(isinstance(n, (ast.Call, ast.Lambda, ast.NamedExpr)) or isinstance(n, ast.Constant)
                                        and isinstance(n.value, str) for n in ast.walk(note)):
                flag(note, "writes an annotation that calls or holds code as a string, which libraries that read "
                           "annotations run (functools.singledispatch)")
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in _same_scope(node)):
                flag(node, "keeps a context open across a yield, which a paused generator would leave on")
        elif isinstance(node, ast.Name):
            if node.id in classes and isinstance(node.ctx, ast.Load) and not _class_use(node, parents):
                flag(node, f"hands its class {node.id} around as a value")
            if node.id in SHELL or re.fullmatch(r"_i?\d+", node.id):
                if node.lineno not in magic:
                    flag(node, f"uses IPython's shell ({node.id})")
            elif node.id in DYNAMIC:
                flag(node, f"runs or reaches code by name at run time ({node.id})")
            elif node.id in ("getattr", "setattr", "delattr") and not called(node):
                flag(node, f"passes {node.id} around as a value")
            elif node.id.startswith("__") and node.id not in SPECIAL:
                flag(node, f"uses the special name {node.id}")
            elif isinstance(node.ctx, ast.Load) and lesson(node) and held[node.id]:
                target = held[node.id]
                if target.split(".")[0] not in ALLOWED:
                    flag(node, f"uses {node.id}, which answers may not use")
                elif _is_module(target) and not isinstance(parents.get(node), ast.Attribute):
                    flag(node, f"passes the module {node.id} around as a value")
        elif isinstance(node, ast.ClassDef):
            if node.keywords:
                flag(node, f"gives its class {node.name} a metaclass or class options")
            for base in node.bases:
                root, attrs = _chain(base)
                if isinstance(base, ast.Name) and base.id in classes | earlier:
                    continue
                if root is None or (root.id not in held and root.id not in BUILTINS):
                    flag(base, f"builds its class {node.name} on {ast.unparse(base)[:60]}, which the scan cannot tell")
                    continue
                cls = _resolve(".".join([held.get(root.id) or root.id, *attrs]))
                if not _base_allowed(cls):
                    flag(base, f"builds its class {node.name} on {ast.unparse(base)[:60]} (answers' classes build on "
                               "plain objects, exceptions, torch modules, datasets and autograd functions)")
                for item in node.body:  # a private method of the library class, overridden: library code calls it
                    name = getattr(item, "name", "")
                    if name.startswith("_") and not name.startswith("__") and hasattr(cls, name):
                        flag(item, f"overrides {name}, private to {ast.unparse(base)[:60]}, which the library calls")
            for item in node.body:
                targets = [*getattr(item, "targets", []), getattr(item, "target", None)]
                for name in [getattr(item, "name", "")] + [t.id for t in targets if isinstance(t, ast.Name)]:
                    if name.startswith("__") and name not in METHODS:
                        flag(item, f"defines {name}, which changes how its objects behave")
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and (node.value.id, node.attr) in methods:
                flag(node, f"reaches the method {node.attr} through its class {node.value.id}")
            if (_classy(node.value) or isinstance(node.value, ast.Name) and node.value.id in typed) and \
                    node.attr not in CLASS_NAMES:
                flag(node, f"reaches {node.attr} through an object's class ({ast.unparse(node)[:60]}), "
                           "where it would run on any object it is given")
            if node.attr.startswith("__") and node.attr not in SPECIAL and \
                    not (node.attr in READ_ONLY and isinstance(node.ctx, ast.Load)):
                flag(node, f"uses the special attribute {node.attr}")
            if INTERPRETER.fullmatch(node.attr):
                flag(node, f"reaches the interpreter's frames or code ({node.attr})")
            if node.attr in RAW_FILES:  # a file written anywhere but at its start: the process's memory, through /proc
                flag(node, f"reads or writes a file's raw bytes at a position ({ast.unparse(node)[:60]}), "
                           "which answers never need")
            if node.attr in RUNS:
                flag(node, f"runs code, reaches IPython or keeps a context on after the cell ({node.attr})")
            if node.attr in GROUPS:
                flag(node, f"makes a process group or store of its own ({node.attr}), whose messages no test sees")
            if node.attr.startswith("_") and not node.attr.startswith("__") and not own(node.value, node.attr):
                flag(node, f"reaches {node.attr}, private to an object it did not make")
            if node.attr == "gen" and not own(node.value, node.attr):  # a context manager's generator, to pause inside
                flag(node, f"reaches the generator of a context ({ast.unparse(node)[:60]}), which can keep it on")
            if node.attr in MODULE_NAMES and not module_of(*_chain(node.value)):
                flag(node, f"reaches the module {node.attr} through {ast.unparse(node.value)[:60]}")
            call = parents.get(node)
            called_here = isinstance(call, ast.Call) and call.func is node
            if node.attr in MUTATORS and isinstance(node.value, ast.Name) and node.value.id in BUILTINS:
                flag(node, f"reaches {node.value.id}.{node.attr}, which changes whatever it is given")
            elif node.attr in MUTATORS and not called_here and lesson(_chain(node.value)[0]):
                flag(node, f"passes {ast.unparse(node)[:60]} around as a value, which changes the lesson's object")
            if node.attr.startswith("register_") and node.attr not in hooks and not own(node.value, node.attr):
                flag(node, f"registers a hook on an object it did not make ({ast.unparse(node)[:60]})")
            root, attrs = _chain(node)
            if (lesson(root) or root is not None and root.id in BUILTINS and root.id not in binds) and \
                    isinstance(node.value, (ast.Name, ast.Attribute)) and not isinstance(node.ctx, ast.Del):
                cls = _resolve(".".join([held.get(root.id) or root.id, *attrs[:-1]]))
                if isinstance(cls, type) and cls not in IMMUTABLE and _through_class(cls, node.attr):
                    flag(node, f"reaches {ast.unparse(node)[:60]} through its class, where it would run on "
                               "any object it is given")
            if lesson(root) and not isinstance(parents.get(node), ast.Attribute):
                container = held[root.id] and _resolve(".".join([held[root.id], *attrs]))
                if isinstance(container, MUTABLE) and _handed_on(node, parents):
                    flag(node, f"hands {ast.unparse(node)[:60]}, a library's own "
                               f"{type(container).__name__}, to code that could change it")
                walk(held[root.id], attrs, node)
                module = module_of(root, attrs)
                call = parents.get(node)
                if module and not (isinstance(call, ast.Call) and call.func is node):
                    flag(node, f"passes the module {module} around as a value")
        elif isinstance(node, ast.keyword):
            if node.arg and node.arg.startswith("__") and node.arg not in METHODS:
                flag(node.value, f"names the special attribute {node.arg}")
            safe = {"weights_only": True, "allow_pickle": False}
            if node.arg in safe and not (isinstance(node.value, ast.Constant) and node.value.value is safe[node.arg]):
                flag(node.value, f"may load pickled objects, which can run code ({node.arg}={ast.unparse(node.value)})")
            if node.arg is None and isinstance(parents.get(node), ast.Call) and \
                    isinstance(parents[node].func, ast.Attribute) and parents[node].func.attr in ("load", "loads"):
                flag(node.value, "loads with options it does not name (** expanded)")
            if node.arg in NAMES_ATTRIBUTES:
                flag(node.value, f"has a library set attributes it names ({node.arg}=)")
        text = _folded(node)
        if text is not None and _folded(parents.get(node)) is None:
            if re.fullmatch(r"__\w+__", text.strip()) and text.strip() not in METHODS:
                flag(node, f"names the special attribute {text.strip()}")
            lowered = text.strip().lower()
            if lowered.endswith(PYTHON_FILES) or any(place in lowered for place in STARTUP):
                flag(node, f"names a Python file or a start-up place ({text.strip()[:60]})")
            if lowered.startswith(SYSTEM) or any("/" + place.strip("/") + "/" in lowered for place in SYSTEM):
                flag(node, f"names the process's memory or the machine's devices ({text.strip()[:60]})")

        # Changes to what the lesson holds: assignments, deletions, setattr and in-place methods.
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            for target in getattr(node, "targets", [getattr(node, "target", None)]):
                root, attrs = _chain(target)
                if isinstance(target, (ast.Attribute, ast.Subscript)) and (lesson(root) or derived(target.value)):
                    what = ".".join([root.id, *attrs]) if root is not None else ast.unparse(target)[:60]
                    flag(target, f"changes {what}, which the notebook "
                                 f"{'imported' if root is not None and root.id in imports else 'uses'}")
                elif isinstance(target, ast.Attribute) and not own(target.value, target.attr):
                    flag(target, f"sets {target.attr} on an object it did not make ({ast.unparse(target)[:60]})")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("setattr", "delattr", "getattr"):
            if len(node.args) < 2 or _folded(node.args[1]) is None:
                flag(node, f"names an attribute at run time ({node.func.id})")
            elif node.func.id != "getattr" and lesson(_chain(node.args[0])[0]):
                flag(node, f"changes {_chain(node.args[0])[0].id} with {node.func.id}, which the lesson uses")
            elif node.func.id != "getattr" and not own(node.args[0], _folded(node.args[1])):
                flag(node, f"sets {_folded(node.args[1])} on an object it did not make ({node.func.id})")
        elif isinstance(node, ast.Call) and _callee(node) in POSITIONAL and len(node.args) > POSITIONAL[_callee(node)]:
            flag(node, f"passes {_callee(node)} more than it needs, by position (names to set, or pickles to load)")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type" and \
                len(node.args) + len(node.keywords) > 1:
            flag(node, "builds a class at run time (type with three arguments)")
        # The lesson's objects, read, never changed: only reading methods of them, and nothing that writes into them.
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr not in _read_methods() and derived(node.func.value):  # ``model.load_state_dict(...)``
            flag(node, f"calls {node.func.attr} on {ast.unparse(node.func.value)[:60]}, which the lesson holds: "
                       "answers read the lesson's objects, never change them")
        if isinstance(node, ast.Call) and (isinstance(node.func, ast.Attribute) and module_of(*_chain(node.func.value))
                                           or isinstance(node.func, ast.Name) and lesson(node.func)):
            name = (held[node.func.id] or "") if isinstance(node.func, ast.Name) else node.func.attr
            inputs = [*node.args, *(k.value for k in node.keywords if k.arg not in ("out", "inplace"))]
            if re.fullmatch(IN_PLACE, name.rsplit(".")[-1]) and any(map(derived, inputs)):  # ``nn.init.zeros_(w)``
                flag(node, f"changes what it is given in place ({ast.unparse(node)[:60]}), which the lesson holds")
        if isinstance(node, ast.Call) and (isinstance(node.func, ast.Lambda) or isinstance(node.func, ast.Name) and
                                           node.func.id in functions | classes | lambdas and not lesson(node.func)):
            handed = next(filter(None, map(derived, [*node.args, *(k.value for k in node.keywords)])), None)
            if handed is not None and handed not in data:  # its function could change it: ``tune(model)``
                flag(node, f"hands the lesson's {handed} to its own {ast.unparse(node.func)[:40]}, which could "
                           "change it")
        if isinstance(node, ast.Call) and any(k.arg == "out" and derived(k.value) or k.arg == "inplace" and any(
                map(derived, node.args)) for k in node.keywords):
            flag(node, f"writes its result into the lesson's objects ({ast.unparse(node)[:60]})")
    return [f"line {line}: {reason}" for line, reason in sorted(found)]


def answer_findings(nb):
    """``{grade id: findings}`` of :func:`scan` for every answer cell of a notebook, each read in its place.

    For example ``answer_findings(nbformat.read("source/00_foundations/00_foundations.ipynb", 4))``
    gives ``{"c1_speedup": [], "c2_to_device": [], ...}``: the solutions raise nothing. The notebook's
    metadata (the release's, in autograde) may let a challenge register hooks on what it is given:
    ``"course": {"hooks": {"c3_overlap": ["register_post_accumulate_grad_hook"]}}``.
    """
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    hooks = nb.metadata.get("course", {}).get("hooks", {})
    found = {}
    for i, cell in enumerate(code):
        if is_solution(cell):
            found[cell.metadata.nbgrader.grade_id] = scan(
                cell.source, before=[c.source for c in code[:i] if not is_solution(c)],
                after=[c.source for c in code[i + 1:] if not is_solution(c)],
                answered=[c.source for c in code[:i] if is_solution(c)],
                hooks=hooks.get(cell.metadata.nbgrader.grade_id, ()))
    return found


def _grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _is_test(cell):
    return cell.cell_type == "code" and is_grade(cell) and not is_solution(cell)


def _error(reason):
    return new_output("error", ename="GradingIntegrityError", evalue=reason, traceback=[f"GradingIntegrityError: {reason}"])


class RestoreRelease(NbGraderPreprocessor):
    """Before execution: the notebook as the course released it, with the student's answer cells in their places.

    Every other cell is the lesson's own: from ``release/<lesson>/``, test cells (hidden tests
    included) and other locked cells from the gradebook. A submitted cell that is neither an
    answer cell nor a cell of the release is left out, and listed in a note at the top of the
    graded notebook (so in the feedback) and in the log.
    """

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        coursedir = CourseDirectory(parent=self)
        path = Path(coursedir.format_path(coursedir.release_directory, ".", info["assignment"]), f"{info['notebook']}.ipynb")
        if not path.is_file():
            raise FileNotFoundError(f"No release notebook {path}: run `nbgrader generate_assignment {info['assignment']}` "
                                    "first (autograde rebuilds each submission from it)")
        release = nbformat.read(path, as_version=4)
        with Gradebook(info["db_url"]) as gb:
            lesson = {c.name: c.source for c in gb.find_notebook(info["notebook"], info["assignment"]).source_cells}
        answers = {}
        for cell in nb.cells:
            if is_solution(cell) and _grade_id(cell) in lesson:
                answers.setdefault(_grade_id(cell), cell)
        released = {c.source.strip() for c in release.cells} | {s.strip() for s in lesson.values()}
        left_out = [(i, cell) for i, cell in enumerate(nb.cells, 1) if cell.source.strip()
                    and answers.get(_grade_id(cell)) is not cell and _grade_id(cell) not in lesson
                    and cell.source.strip() not in released]

        rebuilt = copy.deepcopy(release)
        for cell in rebuilt.cells:
            gid = _grade_id(cell)
            if is_solution(cell) and gid in answers:
                cell.source = answers[gid].source
                if "attachments" in answers[gid]:
                    cell.attachments = answers[gid].attachments
            elif gid in lesson:
                cell.source = lesson[gid]
        if left_out:
            listed = [f"cell {i} ({cell.cell_type}): {cell.source.strip().splitlines()[0][:80]}" for i, cell in left_out]
            self.log.warning("Grading integrity: %s left out %d cells that are not answer cells: %s",
                             info["student"], len(left_out), "; ".join(listed))
            rebuilt.cells.insert(0, new_markdown_cell(
                "**Only answer cells are graded.** These cells of the submitted notebook are not answer cells, "
                "so they were left out when it was graded (every other cell is the lesson's own):\n\n"
                + "\n".join(f"- `{line.replace('`', chr(39))}`" for line in listed)))
        return rebuilt, resources


class ScanAnswers(NbGraderPreprocessor):
    """Before execution: scan each answer cell (:func:`scan`); note the test cells after a flagged one.

    Those tests go to manual grading (:class:`ManualGradeFlagged`): they still run, and the
    instructor reads the answer and sets the score.
    """

    def preprocess(self, nb, resources):
        findings = answer_findings(nb)
        flagged, tests, reason = {}, {}, None
        for cell in nb.cells:
            gid = _grade_id(cell)
            if findings.get(gid):
                flagged[gid] = findings[gid]
                self.log.warning("Grading integrity: %s %s %s", resources["nbgrader"]["student"], gid, "; ".join(findings[gid]))
                reason = reason or f"{gid} {findings[gid][0]}"
            elif reason and _is_test(cell):
                tests[gid] = reason
        resources[KEY] = {"answers": flagged, "tests": tests}
        return nb, resources


class StampTests(NbGraderPreprocessor):
    """Before execution: give each test cell a line that prints a fresh random token, its proof of running."""

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            if _is_test(cell):
                token = secrets.token_hex(16)
                cell.metadata[KEY] = token
                cell.source = cell.source.rstrip("\n") + f"\nprint({token!r})  # proof that this test ran"
        return nb, resources


class CheckStamps(NbGraderPreprocessor):
    """After execution: a test cell that did not print its token scores 0; the tokens are removed again."""

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            token = cell.metadata.pop(KEY, None)
            if not _is_test(cell) or token is None:
                continue
            cell.source = "\n".join(line for line in cell.source.split("\n") if token not in line)
            printed = False
            for output in cell.outputs:
                if output.output_type == "stream" and token in output.text:
                    printed = True
                    output.text = output.text.replace(f"{token}\n", "").replace(token, "")
            cell.outputs = [o for o in cell.outputs if not (o.output_type == "stream" and o.text == "")]
            if not printed and not any(o.output_type == "error" for o in cell.outputs):
                reason = "this test cell did not run as written (its proof of running is missing)"
                self.log.warning("Grading integrity: %s %s scores 0: %s", resources["nbgrader"]["student"],
                                 _grade_id(cell), reason)
                cell.outputs.append(_error(reason))
        return nb, resources


SLOW_CELL = 5  # seconds: a cell that takes longer is named in the autograde log


class IsolatedExecute(Execute):
    """nbgrader's ``Execute`` in a clean room, and with the verdicts out of the answer's reach.

    The notebook runs in two kernels, each started in an empty working directory, which
    IPython leaves off ``sys.path`` (so a ``grader/`` folder shipped beside the notebook, or a
    module written while it runs, is never imported), with a ``HOME``, an IPython directory and
    a temporary folder of its own (no start-up files, no profile), no user site-packages and no
    ``PYTHONSTARTUP``; all of it is deleted afterwards.

    - **The answer's kernel** runs the lesson's cells and the answer cells. It starts inside
      :mod:`grader.grading.sandbox` (``python -m grader.grading.sandbox`` in place of
      ``ipykernel_launcher``): it and every process it starts write files only in its own
      folders, read nothing of the course directory, the exchange or the instructor's home
      (:meth:`secrets`), and reach no other process's memory.
    - **The grader's kernel** runs the lesson's cells too (its own copies of the lesson's
      objects) and the test cells, whose outputs decide the points. After each answer cell it
      binds the names the cell defines (:func:`answer_names`) to the answer's kernel
      (:func:`grader.grading.remote.bind`): a test's call runs the student's function there with
      inputs the test chose, and only data comes back. Ranks a test launches with the student's
      code, and a test's own function sent with ``record.beside_answer``, run there too.

    Both are forked from a zygote that has imported torch and IPython's kernel
    (:mod:`grader.grading.zygote`), where it can serve them (``fork_kernels``).
    """

    fork_kernels = Bool(True, help="Start the kernels as forks of a process that has imported torch and "
                        "IPython's kernel (about 4 s of CPU less a kernel); False: each kernel from scratch").tag(config=True)
    answer_user = Unicode("", help="Where autograde runs as root: the user the answer's kernel and its "
                          "ranks run as (nobody, say), so that the operating system's permissions keep "
                          "the course directory from it too; empty: the grading user").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        self.grader_kernel = None
        # Test cells to run in the grader's kernel: without any, the notebook runs in the answer's alone.
        self.verdicts_outside = any(_is_test(c) for c in nb.cells)
        with tempfile.TemporaryDirectory(prefix="course-grading-", ignore_cleanup_errors=True) as room:
            self.room = Path(room)
            for part in ("home", "ipython", "work", "tmp"):
                for kernel in ("answers", "grader"):
                    (self.room / kernel / part).mkdir(parents=True)
            if self.answer_user:  # the answer's user may pass through to its own folders, and no further
                self.room.chmod(0o711)
                (self.room / "grader").chmod(0o700)
            try:
                return super().preprocess(nb, resources, km)
            finally:
                if isinstance(self.grader_kernel, tuple):  # started (a start that failed has raised already)
                    with self._in_grader_kernel():
                        self._cleanup_kernel()

    def secrets(self):
        """Paths the answer's kernel must not read: the course directory, the exchange, this user's home and
        Jupyter's runtime folder (other kernels' connection files, the grader's kernel's among them)."""
        from jupyter_core.paths import jupyter_runtime_dir
        from nbgrader.exchange.default.exchange import Exchange

        return [CourseDirectory(parent=self).root, Exchange(parent=self).root, os.path.expanduser("~"),
                jupyter_runtime_dir()]

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        if self.fork_kernels:
            km.kernel_id = str(uuid.uuid4())
            km.provisioner = zygote.ForkedProvisioner(kernel_id=km.kernel_id, kernel_spec=km.kernel_spec, parent=km)
        argv = km.kernel_spec.argv
        if self.grader_kernel is False:  # the grader's own kernel: as the kernelspec starts it
            return km
        if "ipykernel_launcher" in argv:
            argv[argv.index("ipykernel_launcher")] = "grader.grading.sandbox"
            # Channels over Unix sockets in its own folder, so that the sandbox can give it a network of its own.
            km.transport, km.ip, km.cache_ports = "ipc", str(self.room / "answers" / "tmp" / "kernel"), False
        else:
            self.log.warning("Grading sandbox: kernel %s does not start ipykernel_launcher (%s); it runs unconfined",
                             km.kernel_name, argv)
        return km

    def start_new_kernel(self, **kwargs):
        # Here, not at the top: they import torch, which every other nbgrader command (loading the
        # course's config, so this module) would then spend seconds on.
        from grader.grading import fairness, remote

        kernel = "grader" if self.grader_kernel is False else "answers"
        # Not the learner's progress file either: a graded notebook's review widgets keep theirs in the room.
        # Nor the shell's PWD (where autograde was started: the course directory), which names no folder of the kernel's.
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONSTARTUP", "PYTHONUSERBASE", "JUPYTER_CONFIG_DIR", "COURSE_PROGRESS", "PWD", "OLDPWD")}
        room = self.room / kernel
        env.update(HOME=str(room / "home"), IPYTHONDIR=str(room / "ipython"), TMPDIR=str(room / "tmp"), PYTHONNOUSERSITE="1",
                   **{fairness.GRADING: "1"})
        if kernel == "answers":
            env[sandbox.SECRETS] = json.dumps(self.secrets())
            env[sandbox.USER] = self.answer_user
            withheld = self.nb.metadata.get("course", {}).get("withheld", [])
            if withheld and self.verdicts_outside:
                env.update({sandbox.WITHHELD: json.dumps(withheld), sandbox.TOOLKIT: str(room / "toolkit")})
        else:
            env.update({remote.ANSWERS: self.answers_km.connection_file,
                        remote.ANSWERS_PID: str(self.answers_km.provisioner.pid),
                        remote.INBOX: str(self.room / "answers" / "tmp")})
        self.extra_arguments = [*self.extra_arguments, *(a for a in (NO_CWD,) if a not in self.extra_arguments)]
        super().start_new_kernel(cwd=str(room / "work"), env=env, **kwargs)

    @contextlib.contextmanager
    def _in_grader_kernel(self):
        """Run what follows in the grader's kernel (started the first time, beside the answer's)."""
        answers = self.km, self.kc
        if self.grader_kernel is None:
            self.answers_km, self.grader_kernel, self.km, self.kc = self.km, False, None, None
            try:
                self.km = self.create_kernel_manager()
                self.start_new_kernel()
                self.start_new_kernel_client()
                self.grader_kernel = self.km, self.kc
            finally:
                self.km, self.kc = answers
        self.km, self.kc = self.grader_kernel
        try:
            yield
        finally:
            self.km, self.kc = answers

    def preprocess_cell(self, cell, resources, index):
        start = time.monotonic()
        try:
            return self._grade_cell(cell, resources, index)
        finally:
            # Where grading's time goes (and, when it stops short, the last cell that finished).
            seconds = time.monotonic() - start
            if seconds >= SLOW_CELL:
                self.log.info("Grading: cell %d (%s) took %.1f s", index, _grade_id(cell) or "the lesson's", seconds)

    def _grade_cell(self, cell, resources, index):
        tags = cell.metadata.get("tags", [])
        if cell.cell_type != "code" or self.skip_cells_with_tag in tags or not self.verdicts_outside:
            return super().preprocess_cell(cell, resources, index)
        if _is_test(cell):
            with self._in_grader_kernel():
                return super().preprocess_cell(cell, resources, index)
        if is_solution(cell):
            cell, resources = super().preprocess_cell(cell, resources, index)
            self._in_grader(f"__import__('grader.grading.remote', fromlist=['bind']).bind(globals(), "
                            f"{answer_names(cell.source)!r})", index, "binding the answer's names")
            return cell, resources
        # The lesson's own cell: in the answer's kernel for the objects answers use (where a function the
        # grading build withholds fails, the lesson's output is not lost), and in the grader's, whose output shows.
        self._run_aside(copy.deepcopy(cell), index, "the lesson's cell, in the answer's kernel,")
        with self._in_grader_kernel():
            return super().preprocess_cell(cell, resources, index)

    def _in_grader(self, source, index, what):
        """Run ``source`` in the grader's kernel; its outputs are not the notebook's. An error is logged:
        the tests after it may fail for the grader's sake, not the student's."""
        with self._in_grader_kernel():
            self._run_aside(nbformat.v4.new_code_cell(source), index, f"{what}, in the grader's kernel,")

    def _run_aside(self, scratch, index, what):
        """Execute the cell ``scratch`` where cell ``index`` runs, leaving the notebook's cell as it was."""
        kept = self.nb.cells[index]
        try:
            self.execute_cell(scratch, index, store_history=True)
        finally:
            self.nb.cells[index] = kept
        for output in scratch.outputs:
            if output.output_type == "error":
                self.log.warning("Grading: %s (cell %d) failed: %s: %s", what, index, output.ename, output.evalue)


def answer_names(source):
    r"""The names an answer cell binds at its top level (functions, classes, assignments), which the
    tests may use: read from its source, so an answer that binds others only loses its own points.

    >>> answer_names("import math\n\n\ndef f(x):\n    y = 1\n\n\nN, M = 2, 3\nclass C:\n    pass\nZ: int = 4")
    ['C', 'M', 'N', 'Z', 'f']
    """
    try:
        tree = ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return []
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return sorted(names)


# What the toolkit raises where this machine cannot decide a grade: a measurement whose reference
# missed its bar too (grader.grading.fairness), a torch whose FSDP2 grader.memory cannot count.
UNDECIDED = ("Inconclusive", "UnreadableTorch")


class ManualGradeFlagged(NbGraderPreprocessor):
    """After ``SaveAutoGrades``: left to the instructor, saying why, are the tests after a flagged
    answer, and tests this machine could not decide (they raised
    :class:`grader.grading.fairness.Inconclusive`: the reference missed its bar too; or
    :class:`grader.memory.UnreadableTorch`: this torch's FSDP2 cannot be counted).

    Each such grade gets no automatic score and ``needs_manual_grade`` (the formgrader asks
    for a score), its cell an output that gives the reason (the feedback shows it), and a
    flagged answer cell an automatic comment listing the findings.
    """

    def preprocess(self, nb, resources):
        flags = resources.get(KEY) or {"answers": {}, "tests": {}}
        # Only the toolkit raises them: an answer that names one (its own class, say) is not believed.
        named = any(is_solution(cell) and any(name in cell.source for name in UNDECIDED) for cell in nb.cells)
        undecided = {_grade_id(cell): output.evalue for cell in nb.cells if _is_test(cell) and not named
                     for output in cell.outputs if output.output_type == "error" and output.ename in UNDECIDED}
        if not flags["answers"] and not undecided:
            return nb, resources
        info = resources["nbgrader"]
        where = (info["notebook"], info["assignment"], info["student"])
        with Gradebook(info["db_url"]) as gb:
            for cell in nb.cells:
                gid = _grade_id(cell)
                reason = flags["tests"].get(gid)
                if not _is_test(cell) or not (reason or gid in undecided):
                    continue
                if reason:
                    cell.outputs.append(_error(f"sent to manual grading: {reason}, so this test's result "
                                               "cannot be trusted; the instructor grades it"))
                else:
                    self.log.warning("Grading: %s %s sent to manual grading: %s", info["student"], gid, undecided[gid])
                grade = gb.find_grade(gid, *where)
                grade.auto_score, grade.needs_manual_grade = None, True
            for gid, findings in flags["answers"].items():
                gb.find_comment(gid, *where).auto_comment = (
                    "Sent to manual grading by the course's scan of answer cells: " + "; ".join(findings)
                    + ". The tests after this cell need an instructor's score.")
            gb.db.commit()
        if flags["answers"]:
            self.log.warning("Grading integrity: %s sent to manual grading: %s", info["student"],
                             ", ".join(flags["tests"]) or "no test cell")
        return nb, resources
