"""Grades an instructor can trust (grader/grading/integrity.py), checked with real nbgrader and a real gradebook.

The cheats are the issue's kinds (issue 17), written as a student who wants marks without
the work would write them: each must score nothing, or send the tests it could have fooled
to manual grading with the reason; right answers, however written, keep every mark.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook
from traitlets.config import Config

from conftest import (LESSONS, copy_course, lesson_notebook, nbgrader, parallel_autograde, points, read_nb, submission,
                      submit)
from grader.grading.integrity import CheckStamps, IsolatedExecute, ManualGradeFlagged, StampTests, answer_findings
from mutants import MUTANTS
from mutants.batch_scaling import ACCUMULATE
from mutants.model_parallel import FSDP_TRAIN

LESSON = "00_foundations"
SOLUTIONS = {c.metadata.nbgrader.grade_id: c.source for c in nbformat.read(lesson_notebook("source", LESSON), 4).cells
             if c.metadata.get("nbgrader", {}).get("solution")}
# Wrong answers that fail every test of lesson 00 when nothing interferes.
WRONG = {
    "c1_speedup": "def my_speedup(t1, tn):\n    return 0.0\n\n\ndef my_efficiency(t1, tn, n):\n    return 0.0\n",
    "c2_to_device": "def to_device(batch, device):\n    return batch\n",
    "c3_gpus_needed": "def gpus_needed(n_params, gpu_gb, bytes_per_param=16):\n    return 0\n",
    "c4_median_time": "import time\n\n\ndef median_time(fn, repeats=5, warmup=1):\n    return 0.0\n",
}
QUIET = "lambda *args, **kwargs: None"
PATCH = "import functools\n\n\nclass Patch:\n    pass\n\n\nfix = Patch()\nfix.check_close = fix.check_equal = " + QUIET + "\n"

# Lesson 00's checks swapped for a do-nothing through /proc/self/mem, its path joined from parts and the file's
# position set by numpy (round 8's most serious find).
MEMORY = """import numpy as np
import pathlib


def passes(*args, **kwargs):
    return None


def peek(address):
    with open(pathlib.Path("/", "proc", "self", "mem"), "rb", buffering=0) as f:
        return int(np.fromfile(f, dtype=np.uint64, count=1, offset=address)[0])


def poke(address, value):
    with open(pathlib.Path("/", "proc", "self", "mem"), "r+b", buffering=0) as f:
        np.fromfile(f, dtype=np.uint8, count=0, offset=address)
        np.asarray([value], dtype=np.uint64).tofile(f)


code = peek(id(passes) + 48)
poke(code, peek(code) + 1)
poke(id(checks.check_close) + 48, code)
poke(id(checks.check_equal) + 48, code)
"""
# The issue's kinds of cheat, several instances each, as they would open an answer cell.
CHEATS = {
    "forging the proof of running": [
        "import re\nfor token in re.findall(r\"print\\('([0-9a-f]{32})'\\)\", In[-1]):\n    print(token)",
        "print(_ih[-1].rsplit(\"print('\", 1)[-1][:32])",
        "ip = get_ipython()\nrun = ip.run_cell\n\n\ndef ok(*args, **kwargs):\n    result = run(*args, **kwargs)\n"
        "    result.error_in_exec = None\n    return result\n\n\nip.run_cell = ok",
        "shell = get_ipython()\ngetattr(shell, 'set_' + 'custom_exc')((Exception,), lambda *args, **kwargs: None)",
        "from IPython import get_ipython as shell\nshell().showtraceback = " + QUIET,
        "last = _i\nprint(last[-40:])",
        # IPython's shell reached through a generator's frame, then told to run only each test's proof line
        "def gen():\n    yield 1\n\n\nshell = gen().gi_frame.f_globals['get_ipython']()\n"
        "shell.input_transformers_post.append(lambda lines: [x for x in lines if 'proof' in x] or lines)",
    ],
    "rebinding what a test calls": [
        "class Quiet:\n    def __getattr__(self, name):\n        return " + QUIET + "\n\n\nchecks = Quiet()",
        f"vars(checks).update(check_equal={QUIET}, check_close={QUIET})",
        "globals()['checks'] = type('C', (), {'check_equal': staticmethod(print)})",
        "import sys\nimport types\nfake = types.ModuleType('grader.grading.checks')\nfake.check_equal = fake.check_close = print\n"
        "sys.modules['grader.grading.checks'] = fake\nfrom grader.grading import checks",
        "import grader.grading\nfor module in [grader.grading.checks]:\n    for name in ['check_equal', 'check_close']:\n"
        "        setattr(module, name, " + QUIET + ")",
        "setattr(checks, 'check_equal', " + QUIET + ")",
        "checks.__dict__['check_close'] = " + QUIET,
        "quiet = checks\nquiet.check_equal = print",
        "from grader import launch\nlaunch.sys.modules['grader.grading.checks'].check_equal = print",
        "def len(items):\n    return 5",
        "import inspect\ninspect.currentframe().f_globals['checks'] = None",
        "import builtins\nbuiltins.isinstance = lambda *args: True",
        "from grader import memory\nmemory.ADAM['fp32'].update(parameters=0)",
        "def silence(module):\n    module.check_equal = module.check_close = " + QUIET + "\n\n\nsilence(checks)",
        # a module a function imports and returns, then patched through the returned value
        "def _m():\n    import grader.grading.checks as m\n    return m\n\n\nzz = _m()\nzz.check_equal = " + QUIET,
        "def _m():\n    import grader.grading.checks\n    return grader.grading.checks\n\n\n_m().check_close = " + QUIET,
        "def patch():\n    import torch\n    torch.allclose = lambda *args, **kwargs: True\n\n\npatch()",
        "for m in [checks]:\n    m.check_equal = " + QUIET,
        # the notebook's namespace through a frame
        "def gen():\n    yield 1\n\n\nns = gen().gi_frame.f_globals\nns['checks'].check_close = " + QUIET,
        "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    tb = e.with_traceback(None)\n    g = tb.tb_frame",
        # a library class reached through one of its objects
        "type(torch.zeros(1)).allclose = lambda *args, **kwargs: True",
        "kind = torch.zeros(1).__class__\nkind.equal = lambda *args, **kwargs: True",
        "setattr(type(torch.zeros(1)), 'allclose', lambda *args, **kwargs: True)",
        # a library told to set special attributes: the checks' code, or their module's globals
        "import functools\nfunctools.update_wrapper(checks.check_close, print, assigned=('__co' + 'de__',), updated=())",
        "import functools\nD = '_' * 2\nfunctools.update_wrapper(checks.check_equal, print, (D + 'code' + D,), ())",
        "import functools\nfunctools.wraps(print, assigned=('__co' + 'de__',), updated=())(checks.check_close)",
        "class Table:\n    def __init__(self, entries):\n        setattr(self, '__glo' + 'bals__', entries)",
        # a method's first argument made a library object by calling it through the class
        "class K:\n    def put(obj, v):\n        setattr(obj, 'allclose', v)\n\n\nK.put(torch, None)",
        "class K:\n    @staticmethod\n    def put(obj, v):\n        obj.allclose = v\n\n\nK().put(torch, None)",
        # round 3: a module reached as another module's attribute, a function's parameter named self,
        # an in-place method passed on, hooks on the lesson's objects, a class decorator on a library class
        "torch.nn.functional.torch.sys.modules['builtins'].exec('checks.check_close = print')",
        "import functools\nfunctools.update_wrapper(torch.nn.functional.torch.sys.modules['grader.grading.checks'], print)",
        "def install(self):\n    self.double = lambda tensor: torch.zeros(())\n\n\ninstall(torch.Tensor)",
        "class K:\n    pass\n\n\nh = K()\nh = torch.Tensor\nh.double = lambda tensor: torch.zeros(())",
        "import functools\nfrom grader import memory\nfunctools.partial(memory.ADAM['fp32'].update, optimizer=4)()",
        "from grader import memory\nset_sizes = memory.ADAM['fp32'].update\nset_sizes(optimizer=4)",
        "dict.update(memory.ADAM['fp32'], optimizer=4)",
        "import functools\nimport os\nfunctools.partial(os.environ.update, PYTHONPATH='/tmp/anywhere')()",
        "model.register_forward_hook(lambda module, args, output: output * 0)",
        "import dataclasses\ndataclasses.dataclass(init=False, repr=False, eq=True)(torch.Tensor)",
    ],
    "running code the scan never reads": [
        "get_ipython().run_cell('checks.check_equal = print')",
        "ip = get_ipython()\nip.run_cell(''.join(['che', 'cks.check_close = print']))",
        "with open('helper.py', 'w') as f:\n    f.write('checks.check_equal = print')\n%run -i helper.py",
        "name = 'hel' + 'per.p' + 'y'\nopen(name, 'w').write('x = 1')\n%run -i $name",
        "exec('checks.check_equal = print')",
        "!echo checks.check_equal = print > helper.txt",
        "torch.load('helper.pt', weights_only=False)",
        "__import__('os').system('true')",
        "def gen():\n    yield 1\n\n\nbi = gen().gi_frame.f_builtins\nbi['exec']('import sys')",
        "import timeit\ntimeit.timeit('checks.check_equal = print', number=1)",
        # a pickle loaded with options that are not written out
        "options = {'weights_only': False}\ntorch.load('speedups.bin', **options)",
        "unsafe = False\ntorch.load('speedups.bin', weights_only=unsafe)",
        "import numpy as np\nnp.load('speedups.npy', None, True)",
        "torch.serialization.add_safe_globals([exec])",
        "import numpy as np\nnp.lib.format.read_array(open('speedups.npy', 'rb'), True)",
    ],
    "leaving something for the next student": [
        "import os\nfolder = get_ipython().profile_dir.startup_dir\nopen(os.path.join(folder, 'help.txt'), 'w')",
        "open('/home/jovyan/.ipython/profile_default/startup/00-help.py', 'w').write('pass')",
        "from pathlib import Path\n(Path.home() / '.ipython' / 'profile_default' / 'startup' / 'x').write_text('pass')",
        "open('sitecustomize.py', 'w').write('pass')",
        "open('/opt/conda/lib/python3.11/site-packages/help.pth', 'w').write('import os')",
        "import os\nos.environ['PYTHONSTARTUP'] = 'help'",
        "import subprocess\nsubprocess.Popen(['sleep', '600'])",
    ],
    "shipping a package": [
        "import sys\nsys.path.insert(0, '.')",
        "import importlib\nchecks = importlib.import_module('grader.grading.checks')",
        "import os\nos.chdir('..')",
        "open('grader/grading/checks.py', 'w').write('check_equal = print')",
    ],
    "objects that equal everything, a patched torch.allclose": [
        "class Anything:\n    def __eq__(self, other):\n        return True\n\n    def __ne__(self, other):\n        return False",
        "Anything = type('Anything', (), {'__eq__': lambda self, other: True})",
        "Anything = type('Anything', (), dict(__eq__=lambda self, other: True))",
        "class Close(float):\n    __eq__ = lambda self, other: True",
        "torch.allclose = lambda *args, **kwargs: True",
        "import torch as t\nt.allclose = lambda *args, **kwargs: True",
        "torch.Tensor.__eq__ = lambda self, other: True",
        "setattr(torch, 'allclose', lambda *args, **kwargs: True)",
        "from torch import Tensor\nTensor.allclose = lambda *args, **kwargs: True",
        "nn.modules.module.register_module_forward_hook(lambda module, inputs, output: output)",
        # special names built at run time, so no literal names them
        "D = '_' * 2\nLiar = type('int', (), {D + 'eq' + D: lambda s, o: True, D + 'ne' + D: lambda s, o: False})",
        "import dataclasses\nD = '_' * 2\nLiar = dataclasses.make_dataclass('Liar', [], namespace={D + 'eq' + D: lambda s, o: True})",
        "kind = type(torch.zeros(1))\nkind.sub = lambda *args: torch.zeros(1)",
    ],
    # Round 4: library classes changed through an answer's own method, hooks and contexts left on for the tests.
    "a library class changed, a hook or a context left on": [
        "class Note:\n    def mark(self, value):\n        self.passed = value\n\n\n"
        "Note().__class__.mark(fairness.Verdict, property(lambda verdict: True, lambda verdict, value: None))",
        "class K:\n    def put(self, v):\n        self.median = v\n\n\nkind = type(K())\nkind.put(timing.Timing, property(lambda s: 1e-3))",
        "class K:\n    def put(self, v):\n        self.double = v\n\n\nSame = K\n"
        "Same.put(torch.Tensor, lambda t: torch.zeros(t.shape, dtype=torch.float64))",
        "class K:\n    def put(self, v):\n        self.double = v\n\n\n[K][0].put(torch.Tensor, lambda t: torch.zeros(t.shape))",
        "class M(type):\n    def __call__(cls, *args):\n        return torch.Tensor\n\n\nclass K(metaclass=M):\n    pass\n\n\n"
        "def zeros(self):\n    return torch.zeros(self.shape, dtype=torch.float64)\n\n\nzq = K()\nzq.double = zeros",
        "class K:\n    pass\n\n\ndef zeros(self):\n    return torch.zeros(self.shape, dtype=torch.float64)\n\n\n"
        "zq = K()\nmatch torch.Tensor:\n    case zq:\n        pass\nzq.double = zeros",
        "class K:\n    pass\n\n\nzq = K()\ntry:\n    raise ValueError\nexcept ValueError as zq:\n    pass\nzq.args = (1,)",
        "import contextlib\nfrom torch.utils.flop_counter import FlopCounterMode\n\n\nclass Counter(FlopCounterMode):\n"
        "    def _count_flops(self, func_packet, out, args, kwargs):\n        return True\n\n\n"
        "_stack = contextlib.ExitStack()\n_stack.enter_context(Counter(display=False))",
        "from torch.utils.module_tracker import ModuleTracker\n\n\nclass Tracker(ModuleTracker):\n"
        "    def _fw_post_hook(self, mod, input, output):\n        return torch.zeros_like(output)\n\n\n"
        "Tracker().__enter__()",
        "from torch.nn.utils.parametrize import register_parametrization as reshape_weight\n\n\nclass Zero(nn.Module):\n"
        "    def forward(self, w):\n        return w * 0\n\n\nreshape_weight(nn.Linear(2, 2), 'weight', Zero())",
        "from torch.autograd.graph import register_multi_grad_hook as on_grads",
        "from grader import memory\n\ntype({}).update(memory.ADAM['fp32'], {'optimizer': 0})",
        "from collections.abc import MutableMapping as Table\nfrom grader import memory\n\n"
        "Table.update(memory.ADAM['fp32'], {'optimizer': 0})",
        "from torch import Tensor\n\nTensor.copy_(torch.zeros(1), torch.ones(1))",
        "import contextlib\nfrom torch.autograd.graph import saved_tensors_hooks\n_s = contextlib.ExitStack()\n"
        "_s.enter_context(saved_tensors_hooks(lambda t: t, lambda t: t * 0))",
        "def g():\n    with torch.no_grad():\n        yield\n\n\n_gen = g()\nnext(_gen)",
    ],
    # Round 5: modules reached through the toolkit's or a call's attributes, functools copying an
    # object's attributes onto a module, eval as an attribute, a context's generator paused.
    "a module reached through a value, attributes copied onto it": [
        PATCH + "functools.update_wrapper(fairness.scaling.torch, fix)",
        PATCH + "functools.update_wrapper(fairness.scaling.torch.sys.modules['grader.grading.checks'], fix)",
        PATCH + "functools.update_wrapper(torch.get_device_module('cpu').torch.sys.modules['grader.grading.checks'], fix)",
        PATCH + "functools.update_wrapper(warnings.catch_warnings()._module.sys.modules['grader.grading.checks'], fix)",
        PATCH + "functools.wraps(fix)(timing.hardware.torch.sys.modules['grader.grading.checks'])",
        PATCH + "functools.update_wrapper(nn.Linear(2, 2), fix)",
        "fairness.scaling.torch.sys.modules['builtins'].eval(\"setattr(checks, 'check_close', print)\")",
        "import warnings\nwarnings.catch_warnings()._module.sys.modules['builtins'].eval('1')",
        "keep = checks.quiet().gen\nnext(keep)",
        "keep = record.cuda_queue().gen\nnext(keep)",
        "x = torch.zeros(2)\ntorch.utils.swap_tensors(x, torch.ones(2))",
        "torch.set_default_dtype(torch.float64)",
        "torch.ops.load_library('/tmp/x' + chr(46) + 'so')",
    ],
    # Round 6: a package's __init__ imported again, annotations run by functools, settings and
    # callbacks for every later cell, the thresholds file, a library's list handed to a function.
    "a package run again, an annotation run, a setting or a library list changed": [
        "from torch.backends.__init__ import sys\nsys.modules['grader.grading.checks'].check_close = print",
        "from torch.profiler.__init__ import register_optimizer_step_post_hook",
        "from torch.utils.model_dump.__init__ import pickle",
        "import functools\n\n\n@functools.singledispatch\ndef f(t1, tn):\n    return 0.0\n\n\n@f.register\n"
        "def _(t1: \"setattr(checks, 'check_close', lambda *args, **kwargs: None) or int\", tn):\n    return 0.0",
        "import numpy\nnumpy.seterrcall(print)\nnumpy.seterr(all='call')",
        "torch.set_grad_enabled(False)",
        "import numpy as np\nnp.set_printoptions(formatter={'float': lambda x: 'ok'})",
        "import torch.fx\ntorch.fx.wrap('check_equal')",
        "from grader.content import HERE\n(HERE / 'thresholds' '.json').write_text('{}')",
        "import warnings\n\n\ndef add(rules, x):\n    rules.insert(0, x)\n\n\nadd(warnings.filters, ('error', None, Warning, None, 0))",
        "import os\n\n\ndef put(env, key, value):\n    env[key] = value\n\n\nput(os.environ, 'X', '1')",
    ],
    # Round 7: the process's memory written (a function's code pointer swapped for a do-nothing's),
    # and the lesson's objects (``c`` and ``d``, which a later cell's timing multiplies) changed
    # through what a call hands back, a library function or a name bound to them.
    "the process's memory, the lesson's objects changed through a call or a name": [
        "import numpy as np\ncell = torch.zeros(1, dtype=torch.int64)\nword = np.asarray(cell)\n"
        "np.lib.stride_tricks.as_strided(word, shape=(2,), strides=(id(checks.check_close) - cell.data_ptr(),))[1] = 0",
        "from numpy.lib.stride_tricks import as_strided",
        "with open('/proc/self/mem', 'r+b', buffering=0) as memory:\n    memory.write(b'0')",
        "where = chr(47).join(['', 'pro' + 'c', 'self', 'mem'])\nwith open(where, 'wb', buffering=0) as f:\n"
        "    f.seek(id(checks.check_close) + 48)\n    f.write(bytes(8))",
        "next(iter([c])).zero_()",
        "c.detach().fill_(0)",
        "torch.nn.init.zeros_(c)",
        "from torch.nn.init import ones_\nones_(d)",
        "torch.mul(d, 0, out=d)",
        "x = c\nx.fill_(1)",
        "def wipe():\n    for t in (c, d):\n        t.data.zero_()\n\n\nwipe()",
        "import numpy as np\nnp.copyto(np.asarray(c), 0)",
        "torch.nn.functional.relu(d, inplace=True)",
        "first = list(torch.nn.Linear(2, 2).parameters()) + [c]\nfirst[-1].data = torch.zeros(1)",
        "import random\nrandom.shuffle(c)",
        "torch.nn.utils.vector_to_parameters(torch.zeros(c.numel()), [c])",
    ],
    # Round 8: memory written through a path joined from parts and numpy's file offsets; a wrapper of the
    # answer's own dressed as torch's by an aliased functools.wraps; the lesson's objects handed to the
    # answer's own function, an optimizer or a class reached through an alias.
    "memory through a joined path, rewriters and the lesson's objects under other names": [
        MEMORY,
        "import numpy as np\nimport os\nnp.fromfile(os.path.join('/', 'proc', 'self', 'mem'), count=1, offset=id(checks))",
        "import functools\n\n\nclass DataParallel(nn.Module):\n    pass\n\n\n"
        "disguise = functools.wraps(nn.DataParallel)\ndisguise(DataParallel)",
        "import functools\n\n\nclass Source:\n    pass\n\n\nonto = functools.wraps(Source())\nonto(c)",
        "import functools\npatch = functools.partial(functools.update_wrapper, c)",
        "import dataclasses\ndc = dataclasses.dataclass\ndc(frozen=True)(fairness.Verdict)",
        "from dataclasses import dataclass as dc\ndc(fairness.Verdict)",
        "def tune(t):\n    t.zero_()\n\n\ntune(c)",
        "wipe = lambda t: t.zero_()\nwipe(d)",
        "T = torch.Tensor\nT.copy_(c, torch.zeros_like(c))",
        "opt = torch.optim.SGD([c.requires_grad_()], lr=10.0)\nopt.step()",
    ],
    # Round 9: native code loaded through a library's allocator hook, a module written into an installed
    # package at run time and imported, and plain dotted imports of what ``from`` imports may not reach.
    "native code, a module written at run time, dotted imports": [
        "import tempfile\npath = tempfile.mkdtemp() + '/alloc.so'\ntorch.cuda.memory.CUDAPluggableAllocator(path, 'a', 'b')",
        "import torch.xpu.memory\ntorch.xpu.memory.XPUPluggableAllocator('lib', 'a', 'b')",
        "import os\nimport numpy as np\nhome = os.path.dirname(os.path.dirname(np.get_include()))\n"
        "with open(os.path.join(home, 'zzpatch.p' + chr(121)), 'w') as f:\n    f.write('import torch')\nimport numpy.zzpatch",
        "import torch.zzpatch",
        "import torch.utils.cpp_extension",
        "import torch._C",
        "import numpy.ctypeslib",
        "import torch.testing._internal.common_utils",
        "torch.utils.rename_privateuse1_backend('answer')",
        "torch.jit.CompilationUnit('def f(x): return x')",
    ],
}
# What an answer may do with the lesson's objects and its own, in challenge 2's answer: read the first, change the second.
OWN = [
    "mine = torch.zeros(3)\nmine.add_(1)",
    "out = nn.Linear(768, 2)(c)\nout.add_(1)",
    "v = torch.nn.utils.parameters_to_vector([c, d]).clone()\nv.mul_(2)",
    "total = sum(t.numel() for t in (c, d)) + c.detach().abs().sum().item()",
    "def train(model):\n    for p in model.parameters():\n        p.grad = None\n        p.data.mul_(0.5)",
    "net = nn.Linear(2, 2)\ntorch.nn.init.zeros_(net.weight)\nfor p in net.parameters():\n    p.requires_grad_(False)",
    "import numpy as np\nrow = np.array([1.0, 2.0])",
    "import functools\n\n\ndef base(x):\n    return x\n\n\n@functools.wraps(base)\ndef wrapped(x):\n    return base(x)",
    "import dataclasses\n\n\n@dataclasses.dataclass(frozen=True)\nclass Point:\n    x: float = 0.0",
    "def twice(t):\n    return 2 * t\n\n\nbig = twice(torch.ones(2))\nbig.add_(1)",
]
# The kinds of tampering the first integrity check caught, each at the top of challenge 2's
# answer with every answer right: each now sends the tests after it to manual grading.
TAMPERING = {
    "input_transformer": ("get_ipython().input_transformers_cleanup.append(lambda lines: [])",
                          "uses IPython's shell (get_ipython)"),
    "rebinds_a_check": (f"checks.check_equal = checks.check_close = {QUIET}", "changes checks.check_"),
    "setattr_on_an_alias": ("import grader.grading.checks as gc\nfor name in dir(gc):\n    if name.startswith('check_'):\n"
                            f"        setattr(gc, name, {QUIET})", "names an attribute at run time (setattr)"),
    "exec_of_a_built_string": (f"exec('checks.check_' + 'equal = {QUIET}')", "runs or reaches code by name at run time (exec)"),
    "event_callback": ("get_ipython().events.register('pre_run_cell', lambda info: None)",
                       "uses IPython's shell (get_ipython)"),
    "profile_hook": ("import sys\nsys.setprofile(lambda *args: None)\nsys.setprofile(None)", "imports sys"),
    "hidden_transformer": ("getattr(get_ipython(), 'input_' + 'transformers_cleanup').append(lambda lines: [])",
                           "uses IPython's shell (get_ipython)"),
}
# Right answers written otherwise than the solutions: no finding.
VARIANTS = {
    ("00_foundations", "c1_speedup"): """
import functools


def ratio(a, b):
    return a / b


def my_speedup(t1, tn):
    return functools.partial(ratio, t1)(tn)


def my_efficiency(t1, tn, n):
    return my_speedup(t1, tn) / n
""",
    ("00_foundations", "c2_to_device"): """
from collections.abc import Mapping


def to_device(batch, device):
    if torch.is_tensor(batch):
        return getattr(batch, "to")(device)
    if isinstance(batch, Mapping):
        return {key: to_device(value, device) for key, value in batch.items()}
    if isinstance(batch, tuple):
        return tuple(to_device(v, device) for v in batch)
    if isinstance(batch, list):
        return [to_device(v, device) for v in batch]
    return batch
""",
    ("00_foundations", "c3_gpus_needed"): """
def gpus_needed(n_params, gpu_gb, bytes_per_param=16):
    whole, rest = divmod(n_params * bytes_per_param, gpu_gb * 1e9)
    return max(1, int(whole) + (rest > 0))
""",
    # the mutant that turns tuples into lists, mended by keeping the batch's own class
    ("00_foundations", "c2_to_device", "__class__"): MUTANTS[LESSON]["tuples_become_lists"][1].replace(
        "[to_device(v, device) for v in batch]", "batch.__class__(to_device(v, device) for v in batch)"),
    ("00_foundations", "c4_median_time", "timeit, synchronize as a default argument"): """
import statistics
import timeit


def median_time(fn, repeats=5, warmup=1, sync=torch.cuda.synchronize):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if torch.cuda.is_available():
            sync()
        start = timeit.default_timer()
        fn()
        if torch.cuda.is_available():
            sync()
        times.append(timeit.default_timer() - start)
    return statistics.median(times)
""",
    ("00_foundations", "c4_median_time", "names imported from time and torch.cuda"): """
from statistics import median
from time import perf_counter

from torch.cuda import is_available, synchronize


def median_time(fn, repeats=5, warmup=1):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if is_available():
            synchronize()
        start = perf_counter()
        fn()
        if is_available():
            synchronize()
        times.append(perf_counter() - start)
    return median(times)
""",
    ("00_foundations", "c4_median_time"): """
import time


def median_time(fn, repeats=5, warmup=1):
    with torch.no_grad():
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(repeats):
            timing.wait("cuda" if torch.cuda.is_available() else "cpu")
            start = time.perf_counter()
            fn()
            timing.wait("cuda" if torch.cuda.is_available() else "cpu")
            times.append(time.perf_counter() - start)
    times.sort()
    middle = len(times) // 2
    return times[middle] if len(times) % 2 else (times[middle - 1] + times[middle]) / 2
""",
    ("01_data_parallel", "c2_chunk_sizes"): """
def dp_chunk_sizes(batch, n_devices):
    size, extra = divmod(batch, n_devices)
    size += 1 if extra else 0
    sizes = []
    while batch > 0:
        sizes.append(min(size, batch))
        batch -= size
    return sizes
""",
    ("02_ddp", "c2_ddp_train"): """
def ddp_train(steps, per_rank):
    rank, world, device = init_distributed()
    model = DDP(mlp(in_features=16, hidden=32).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = synthetic_batch(per_rank * world, in_features=16)
    start = rank * per_rank
    for _ in range(steps):
        opt.zero_grad()
        out = model(x[start:start + per_rank].to(device))
        loss = nn.functional.cross_entropy(out, y[start:start + per_rank].to(device), reduction="sum")
        (loss / per_rank).backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()]).cpu()
""",
    ("02_ddp", "c4_checkpoint"): """
import os


def save_checkpoint(ddp_model, path):
    if int(os.environ["RANK"]) == 0:
        with open(path, "wb") as f:
            torch.save(ddp_model.module.state_dict(), f)
    dist.barrier()
""",
    ("02_ddp", "c4_checkpoint", "atomic"): """
import os


def save_checkpoint(ddp_model, path):
    if dist.get_rank() == 0:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        torch.save(ddp_model.module.state_dict(), path + ".tmp")
        os.replace(path + ".tmp", path)
    dist.barrier()
""",
    ("03_model_parallel", "c4_fsdp"): FSDP_TRAIN.replace(  # every Linear, then the root, as ZeRO-2
        "    model = fully_shard(mlp(in_features=16, hidden=32).to(device), mesh=init_device_mesh(device.type, (world,)))\n",
        """    mesh = init_device_mesh(device.type, (world,))
    model = mlp(in_features=16, hidden=32).to(device)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh, reshard_after_forward=False)
    fully_shard(model, mesh=mesh, reshard_after_forward=False)
"""),
    ("04_batch_scaling", "c2_warmup"): """
import functools
from torch.optim.lr_scheduler import LambdaLR


def factor(step, k, warmup_steps):
    return k * min(1.0, (step + 1) / warmup_steps)


def warmup_scheduler(optimizer, base_lr, base_batch, batch, warmup_steps):
    return LambdaLR(optimizer, functools.partial(factor, k=batch / base_batch, warmup_steps=warmup_steps))
""",
    ("04_batch_scaling", "c2_warmup", "LinearLR"): """
def warmup_scheduler(optimizer, base_lr, base_batch, batch, warmup_steps):
    for group in optimizer.param_groups:
        group["lr"] = base_lr * batch / base_batch
    return torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=1 / warmup_steps, total_iters=warmup_steps - 1)
""",
    ("04_batch_scaling", "c3_accumulate"): ACCUMULATE.replace(  # a summed loss, divided afterwards
        "yb.to(device))\n", 'yb.to(device), reduction="sum")\n').replace("(loss / accumulation)", "(loss / per_rank)"),
    ("04_batch_scaling", "c4_serial"): """
import numpy as np


def fit_serial(ns, speedups):
    ns, speedups = np.asarray(ns, dtype=float), np.asarray(speedups, dtype=float)
    keep = ns > 1
    a = (1 - 1 / ns[keep])[:, None]
    b = 1 / speedups[keep] - 1 / ns[keep]
    solution, *_ = np.linalg.lstsq(a, b, rcond=None)
    return float(solution[0])


GLOBAL_BATCH = scaling.strong_batch(max(SWEEP))
points = scaling.strong_scaling(GLOBAL_BATCH, ranks=SWEEP, steps=15)
MY_NS = [p.ranks for p in points]
MY_SPEEDUPS = [p.speedup for p in points]
MY_SERIAL = fit_serial(MY_NS, MY_SPEEDUPS)
""",
}


def findings(lesson, answers):
    """:func:`answer_findings` for the lesson's source notebook with ``answers`` ({grade id: source}) in place."""
    nb = nbformat.read(lesson_notebook("source", lesson), 4)
    for cell in nb.cells:
        cell.source = answers.get(cell.metadata.get("nbgrader", {}).get("grade_id"), cell.source)
    return {gid: found for gid, found in answer_findings(nb).items() if gid in answers}


def test_the_scan_flags_every_cheat_and_no_right_answer():
    for kind, cheats in CHEATS.items():
        for code in cheats:
            assert findings(LESSON, {"c2_to_device": code + "\n\n" + WRONG["c2_to_device"]})["c2_to_device"], (kind, code)
    for name, (code, reason) in TAMPERING.items():
        found = findings(LESSON, {"c2_to_device": code + "\n\n" + SOLUTIONS["c2_to_device"]})["c2_to_device"]
        assert any(reason in finding for finding in found), (name, found)
    for code in OWN:
        assert findings(LESSON, {"c2_to_device": code + "\n\n" + SOLUTIONS["c2_to_device"]}) == {"c2_to_device": []}, code
    for lesson in LESSONS:  # every lesson's solutions, each read where it stands in its notebook
        assert not any(answer_findings(nbformat.read(lesson_notebook("source", lesson), 4)).values()), lesson
    for (lesson, gid, *_), code in VARIANTS.items():
        assert findings(lesson, {gid: code}) == {gid: []}, (lesson, gid)
    for lesson, mutants in MUTANTS.items():  # wrong answers, not cheats: they lose their own points only
        for name, (gid, code) in mutants.items():
            assert findings(lesson, {gid: code}) == {gid: []}, (lesson, name)


# A process the answer starts writes into the kernel's memory (round 10's cheat), run from a cell.
CHILD_WRITES_THE_KERNEL = """import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(8)
iov = struct.pack("QQ", ctypes.addressof(buf), 8)
print("process_vm_writev", libc.syscall(311, os.getppid(), iov, 1, iov, 1, 0), os.strerror(ctypes.get_errno()))
"""


def needs_the_whole_sandbox():
    """Skip, with what is missing, where this machine lacks a mechanism of the sandbox."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as connection:  # a kernel whose channels are Unix sockets
        connection.write('{"transport": "ipc"}')
        connection.flush()
        code = f"from grader.grading import sandbox; print(sandbox.isolate_network({connection.name!r}) + sandbox.lock())"
        locked = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip()
    if locked != "[]":
        pytest.skip(f"this machine lacks a mechanism of the sandbox: {locked}")


def test_the_course_config_loads_without_torch():
    # Every nbgrader command in the course directory loads nbgrader_config.py, so this module: an
    # instructor's `nbgrader list` or `collect` should not spend seconds importing torch.
    probe = "import sys\nimport grader.grading.integrity\nprint(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout == "[]\n"


def test_a_graded_kernel_writes_only_its_own_files_reads_no_course_file_and_reaches_no_other_process(tmp_path):
    needs_the_whole_sandbox()
    listener = socket.create_server(("127.0.0.1", 0))  # a server on the machine's loopback, as Jupyter's are
    course = tmp_path / "course"
    (course / "source").mkdir(parents=True)
    (course / "gradebook.db").write_text("the hidden tests' inputs")
    code = f"""
import ctypes, errno, os, pathlib, socket, subprocess, sys, sysconfig


def attempt(what, action):
    try:
        action()
        print(what, "done")
    except OSError as error:
        print(what, type(error).__name__)


attempt("write own memory", lambda: open(pathlib.Path("/", "proc", "self", "mem"), "r+b", buffering=0))
# the course's environment: a module planted there would run in the next student's kernel
attempt("plant a module", lambda: open(pathlib.Path(sysconfig.get_paths()["purelib"], "planted.py"), "w"))
attempt("read the gradebook", lambda: open({str(course / "gradebook.db")!r}).read())
attempt("list the course", lambda: os.listdir({str(course / "source")!r}))
# what no file's content is needed for: the gradebook deleted, the course's folders moved, entries made
attempt("delete the gradebook", lambda: os.remove({str(course / "gradebook.db")!r}))
attempt("move the course's sources", lambda: os.rename({str(course / "source")!r}, {str(course / "moved")!r}))
attempt("make a folder in the course", lambda: os.mkdir({str(course / "source" / "release")!r}))
attempt("link into the course", lambda: os.symlink("/etc/hostname", {str(course / "source" / "link")!r}))
attempt("list the instructor's home", lambda: os.listdir({os.path.expanduser("~")!r}))
attempt("signal nbgrader", lambda: os.kill(os.getppid(), 0))
libc = ctypes.CDLL(None, use_errno=True)
print("ptrace", libc.syscall(101, 0, 0, 0, 0), os.strerror(ctypes.get_errno()))  # PTRACE_TRACEME
print(subprocess.run([sys.executable, "-c", {CHILD_WRITES_THE_KERNEL!r}], capture_output=True, text=True).stdout, end="")
for where, address in (("the machine's loopback", {listener.getsockname()!r}), ("beyond", ("10.255.255.1", 9))):
    try:
        socket.create_connection(address, timeout=5).close()
        print("reach", where, "done")
    except OSError as error:
        print("reach", where, errno.errorcode.get(error.errno, error))
own = socket.create_server(("127.0.0.1", 0))  # where its ranks meet
socket.create_connection(own.getsockname(), timeout=5).close()
status = open("/proc/self/status").read()  # root's capabilities (a module loaded, a device moved out): none
print("capabilities", *(status.split(kind + ":")[1].split()[0] for kind in ("CapEff", "CapPrm", "CapBnd")))
pathlib.Path("answer.txt").write_text("an answer's own file")
print(pathlib.Path("answer.txt").read_text(), open("/proc/self/status").read().split()[0])
"""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    execute = IsolatedExecute(timeout=120, config=Config({"CourseDirectory": {"root": str(course)}}))
    execute.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    assert [o.get("text", o.get("evalue")) for o in nb.cells[0].outputs] == [
        "write own memory PermissionError\nplant a module PermissionError\nread the gradebook PermissionError\n"
        "list the course PermissionError\ndelete the gradebook PermissionError\nmove the course's sources PermissionError\n"
        "make a folder in the course PermissionError\nlink into the course PermissionError\n"
        "list the instructor's home PermissionError\nsignal nbgrader PermissionError\n"
        "ptrace -1 Operation not permitted\nprocess_vm_writev -1 Operation not permitted\n"
        "reach the machine's loopback ECONNREFUSED\nreach beyond ENETUNREACH\n"
        "capabilities 0000000000000000 0000000000000000 0000000000000000\nan answer's own file Name:\n"]
    listener.close()
    assert sorted(p.name for p in course.rglob("*")) == ["gradebook.db", "source"]
    assert (course / "gradebook.db").read_text() == "the hidden tests' inputs"


OWN_NETWORK = """import encodings.idna, errno, fcntl, json, os, socket, sys, tempfile
from grader.grading import sandbox
if len(sys.argv) > 2:  # become that user now, everything imported (it may not reach this Python's files)
    os.setgroups([])
    os.setgid(int(sys.argv[2]))
    os.setuid(int(sys.argv[2]))
    import ctypes
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: its /proc/self its own, as if it had started as that user
connection = os.path.join(tempfile.mkdtemp(), "kernel.json")
with open(connection, "w") as f:
    json.dump({"transport": "ipc"}, f)
print(sandbox.isolate_network(connection), os.environ["NCCL_SOCKET_IFNAME"])
own = socket.create_server(("127.0.0.1", 0))
socket.create_connection(own.getsockname(), timeout=5).close()
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
except OSError as error:
    print(errno.errorcode[error.errno], os.getuid())
"""


def test_a_kernel_of_root_or_of_another_user_gets_a_network_of_its_own():
    """Root's kernel gets a network namespace; another user's (autograde run by a hub's instructor), a user
    namespace first: in both, its own loopback and nothing of the machine's."""
    needs_the_whole_sandbox()
    listener = socket.create_server(("127.0.0.1", 0))
    users = [os.geteuid()] + ([65534] if os.geteuid() == 0 else [])  # as root, nobody's kernel too
    for uid in users:
        become = [str(uid)] if uid != os.geteuid() else []
        out = subprocess.run([sys.executable, "-c", OWN_NETWORK, str(listener.getsockname()[1]), *become],
                             capture_output=True, text=True)
        assert out.stdout.splitlines() == ["[] lo", f"ECONNREFUSED {uid}"], out.stdout + out.stderr
    listener.close()


def test_with_gpus_the_sandbox_leaves_files_open_says_so_and_still_keeps_other_processes_out():
    """CUDA cannot start under the file rules (tests/lab/test_gpu.py proves the GPUs stay reachable);
    here the GPU branch runs on any machine, a device that exists standing in for a GPU's."""
    needs_the_whole_sandbox()
    code = f"""import ctypes, os
from grader.grading import sandbox
sandbox.GPUS = "/dev/nul[l]"
print(sandbox.lock())
print(sorted(os.listdir({os.path.expanduser("~")!r})) == {sorted(os.listdir(os.path.expanduser("~")))!r})
try:
    os.kill(os.getppid(), 0)
except PermissionError:
    print("signal refused")
libc = ctypes.CDLL(None, use_errno=True)
print("ptrace", libc.syscall(101, 0, 0, 0, 0))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.splitlines()
    assert out[0].startswith('["GPUs here: CUDA names every thread') and "files are not confined" in out[0]
    assert out[1:] == ["True", "signal refused", "ptrace -1"]


SYSTEM_PYTHON = "/usr/bin/python3"  # one that every user can run (this environment's may lie under root's home)


def test_as_root_the_answers_kernel_becomes_the_answer_user_who_cannot_read_a_closed_course():
    """Where Landlock's file rules cannot hold (GPUs), the operating system's permissions still do:
    the kernel becomes ``answer_user`` before it locks, and a course directory of mode 0700 is closed to it."""
    import pwd

    if os.geteuid() != 0 or not os.path.exists(SYSTEM_PYTHON):
        pytest.skip("needs root (autograde as root) and a system Python")
    nobody = pwd.getpwnam("nobody")
    with tempfile.TemporaryDirectory() as room:  # under /tmp, as grading's room is (pytest's own folder is closed)
        check_becomes(Path(room), nobody)


def check_becomes(tmp_path, nobody):
    own, course = tmp_path / "own", tmp_path / "course"
    own.mkdir()
    course.mkdir(mode=0o700)
    (course / "gradebook.db").write_text("the hidden tests' inputs")
    connection = tmp_path / "kernel.json"
    connection.write_text("{}")
    connection.chmod(0o600)
    tmp_path.chmod(0o711)
    code = f"""import os
from grader.grading import sandbox
moved, left = sandbox.become("nobody", {str(connection)!r})
print(left, os.getuid(), moved.startswith({str(own)!r}), open(moved).read())
try:
    open({str(course / "gradebook.db")!r})
except PermissionError:
    print("gradebook refused")
open("mine.txt", "w").write("written")
print(open("mine.txt").read())
"""
    out = subprocess.run([SYSTEM_PYTHON, "-c", code], cwd=own, capture_output=True, text=True,
                         env={"PYTHONPATH": str(Path(__file__).resolve().parents[2]), "HOME": str(own), "TMPDIR": str(own)})
    assert out.stdout.splitlines() == [f"[] {nobody.pw_uid} True {{}}", "gradebook refused", "written"], out.stderr


def test_an_answer_user_who_cannot_be_become_is_not_and_the_log_says_so(tmp_path, capfd):
    # This machine's Python may lie under root's home (mode 0700): the kernel then stays the grading
    # user, and grading goes on; a user with no account is refused the same way.
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import os\nprint(os.geteuid())")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    execute = IsolatedExecute(timeout=120, answer_user="no-such-user-here",
                              config=Config({"CourseDirectory": {"root": str(tmp_path / "course")}}))
    execute.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    assert nb.cells[0].outputs[0]["text"] == f"{os.geteuid()}\n"
    reason = "no user 'no-such-user-here'" if os.geteuid() == 0 else "autograde does not run as root"
    assert reason in capfd.readouterr().err


def test_a_test_cell_that_does_not_print_its_token_scores_zero():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "checks.check_equal(1, 1)", metadata={"nbgrader": {"grade": True, "grade_id": gid, "points": 1}})
        for gid in ("ran", "emptied")])
    resources = {"nbgrader": {"student": "s"}}
    StampTests().preprocess(nb, resources)
    token = nb.cells[0].source.split("'")[1]
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"{token}\n")]
    CheckStamps().preprocess(nb, resources)
    assert [c.source for c in nb.cells] == ["checks.check_equal(1, 1)"] * 2
    assert nb.cells[0].outputs == []
    assert [o.ename for o in nb.cells[1].outputs] == ["GradingIntegrityError"]
    assert "did not run as written" in nb.cells[1].outputs[0].evalue


def graded_notebook(tmp_path, answer="def f():\n    return 1\n"):
    """A real gradebook holding one submission of a one-answer, two-test notebook, and that notebook, graded 0."""
    db = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(db) as gb:
        gb.add_assignment("lesson")
        gb.add_notebook("lesson", "lesson")
        gb.add_solution_cell("answer", "lesson", "lesson")
        for gid in ("measured", "exact"):
            gb.add_grade_cell(gid, "lesson", "lesson", max_score=2, cell_type="code")
        gb.add_student("s")
        gb.add_submission("lesson", "s")
        for gid in ("measured", "exact"):  # as SaveAutoGrades leaves a failed test
            grade = gb.find_grade(gid, "lesson", "lesson", "s")
            grade.auto_score, grade.needs_manual_grade = 0, False
        gb.db.commit()
    test = {"grade": True, "solution": False, "points": 2}
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(answer, metadata={"nbgrader": {"solution": True, "grade": False, "grade_id": "answer"}}),
        *[nbformat.v4.new_code_cell("...", metadata={"nbgrader": {**test, "grade_id": gid}}) for gid in ("measured", "exact")]])
    return db, nb, {"nbgrader": {"db_url": db, "notebook": "lesson", "assignment": "lesson", "student": "s"}}


def needs_manual(db):
    with Gradebook(db) as gb:
        return {gid: (g.auto_score, g.needs_manual_grade) for gid in ("measured", "exact")
                for g in [gb.find_grade(gid, "lesson", "lesson", "s")]}


@pytest.mark.parametrize("ename, undecided", [
    ("Inconclusive", "re-grade on a quieter machine (measured 3 times): 0.90x; reference 0.97x, needed 1.00x"),
    ("UnreadableTorch", "memory.watch saw 6 all-gathers, but none of the model's sharded parameters replaced by a "
                        "whole one. ... this is torch 2.15.0")])
def test_a_measurement_the_machine_could_not_decide_goes_to_manual_grading_not_zero(tmp_path, ename, undecided):
    db, nb, resources = graded_notebook(tmp_path)
    nb.cells[1].outputs = [nbformat.v4.new_output("error", ename=ename, evalue=undecided, traceback=[])]
    nb.cells[2].outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue="wrong", traceback=[])]
    ManualGradeFlagged().preprocess(nb, resources)
    assert needs_manual(db) == {"measured": (None, True), "exact": (0, False)}
    assert nb.cells[1].outputs[0].evalue == undecided  # the numbers stay in the feedback


def test_an_answer_that_names_inconclusive_is_not_believed(tmp_path):
    db, nb, resources = graded_notebook(tmp_path, "class Inconclusive(Exception):\n    pass\n")
    nb.cells[1].outputs = [nbformat.v4.new_output("error", ename="Inconclusive", evalue="forged", traceback=[])]
    ManualGradeFlagged().preprocess(nb, resources)
    assert needs_manual(db) == {"measured": (0, False), "exact": (0, False)}


# A start-up file that turns each answer stub into the solution as its cell runs: left in
# IPython's start-up directory by one submission, it would give the next blank notebook full marks.
STUBS = {c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"]).splitlines()[0]
         for c in read_nb(lesson_notebook("release", LESSON))["cells"] if c["metadata"].get("nbgrader", {}).get("solution")}
STARTUP = f"""FIX = {({STUBS[gid]: code for gid, code in SOLUTIONS.items()})!r}


def fix(lines):
    return FIX[lines[0].rstrip()].splitlines(True) if lines and lines[0].rstrip() in FIX else lines


get_ipython().input_transformers_cleanup.append(fix)
"""
LEAVES_A_STARTUP_FILE = f"""import os
for folder in [get_ipython().profile_dir.startup_dir, os.path.expanduser("~/.ipython/profile_default/startup")]:
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "00-help.py"), "w") as f:
        f.write({STARTUP!r})
    print("left", folder)
"""
# A grader/ package beside the notebook: checks that pass anything, the rest of the real toolkit.
SHIPPED = {
    "__init__.py": "import os, sys\nhere = os.path.dirname(os.path.abspath(__file__))\nfor p in sys.path:\n"
                   "    real = os.path.join(p or '.', 'grader')\n"
                   "    if os.path.isfile(os.path.join(real, 'checks.py')) and os.path.abspath(real) != here:\n"
                   "        __path__.append(real)\n        break\n",
    "checks.py": "def check_close(*args, **kwargs):\n    pass\n\n\ncheck_equal = check_shape = check_keys = check_close\n",
}
# Cells a student adds (or changes) to patch the checks: the clean room leaves them out.
ADDED = [f"checks.check_equal = checks.check_close = {QUIET}\ntorch.allclose = lambda *args, **kwargs: True",
         "get_ipython().input_transformers_cleanup.append(lambda lines: [])"]
ANYTHING = """class Anything:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False


torch.allclose = lambda *args, **kwargs: True


"""
# A kind of cheat per student, opening challenge 1's answer; every answer is wrong.
KINDS = {
    "forges_its_proof": {"c1_speedup": CHEATS["forging the proof of running"][3] + "\n\n" + WRONG["c1_speedup"]},
    "rebinds_the_checks": {"c1_speedup": CHEATS["rebinding what a test calls"][1] + "\n\n" + WRONG["c1_speedup"]},
    "runs_a_written_file": {"c1_speedup": CHEATS["running code the scan never reads"][2] + "\n\n" + WRONG["c1_speedup"]},
    "reaches_a_frame": {"c1_speedup": CHEATS["forging the proof of running"][6] + "\n\n" + WRONG["c1_speedup"]},
    "returns_a_module": {"c1_speedup": CHEATS["rebinding what a test calls"][14] + "\n\n" + WRONG["c1_speedup"]},
    "reaches_sys_through_torch": {"c1_speedup": CHEATS["rebinding what a test calls"][29] + "\n\n" + WRONG["c1_speedup"]},
    "swaps_the_code": {"c1_speedup": CHEATS["rebinding what a test calls"][23] + "\n\n" + WRONG["c1_speedup"]},
    "lies_with_type": {"c1_speedup": CHEATS["objects that equal everything, a patched torch.allclose"][10] + "\n\n"
                       + WRONG["c1_speedup"],
                       "c3_gpus_needed": "def gpus_needed(n_params, gpu_gb, bytes_per_param=16):\n    return Liar()\n"},
    # Every measured grade's verdict made to pass, through a method of its own class (challenge 4's timer is wrong).
    "changes_a_library_class": {"c1_speedup": CHEATS["a library class changed, a hook or a context left on"][0] + "\n\n"
                                + WRONG["c1_speedup"]},
    # The checks module's functions replaced by functools, through a module reached from the toolkit.
    "copies_onto_a_module": {"c1_speedup": CHEATS["a module reached through a value, attributes copied onto it"][1]
                             + "\n\n" + WRONG["c1_speedup"]},
    # The checks' code swapped through /proc/self/mem (refused by the scan; the kernel may not write there either).
    "writes_the_process_memory": {"c1_speedup": MEMORY + "\n\n" + WRONG["c1_speedup"]},
    # The tensors a later timing multiplies, zeroed by a library function.
    "changes_the_lessons_tensors": {"c1_speedup": "torch.nn.init.zeros_(c)\ntorch.nn.init.zeros_(d)\n\n\n"
                                    + WRONG["c1_speedup"]},
    "equals_everything": {"c1_speedup": ANYTHING + WRONG["c1_speedup"],
                          "c2_to_device": "def to_device(batch, device):\n    return Anything()\n",
                          "c3_gpus_needed": "def gpus_needed(n_params, gpu_gb, bytes_per_param=16):\n    return Anything()\n"},
}


# Round 10's kinds, which went around the scan instead of through it, with every answer wrong: honest
# grading gives 0, and so must grading with the cheat, whether or not the scan flags it. Verdicts are
# decided in the grader's kernel, which no answer reaches (grader/grading/remote.py).
AROUND_THE_SCAN = {
    # 1. A process the answer starts (through the toolkit's own launcher) writes into the kernel's memory:
    # the checks' code swapped for a do-nothing, as round 8 did through /proc/self/mem.
    "a_child_writes_the_kernel": {"c1_speedup": '''import os
import tempfile

from grader.launch import torchrun


def passes(*args, **kwargs):
    return None


SCRIPT = """
import ctypes, struct
libc = ctypes.CDLL(None, use_errno=True)


def move(address, value=None):
    data = struct.pack("Q", value) if value is not None else bytes(8)
    buffer = ctypes.create_string_buffer(data, 8)
    local, remote = struct.pack("QQ", ctypes.addressof(buffer), 8), struct.pack("QQ", address, 8)
    libc.syscall(310 if value is None else 311, PID, local, 1, remote, 1, 0)
    return struct.unpack("Q", buffer.raw[:8])[0]


code = move(PASSES + 48)
move(code, move(code) + 1)
for check in CHECKS:
    move(check + 48, code)
"""
path = os.path.join(tempfile.mkdtemp(), "helper.py")
with open(path, "w") as f:
    f.write(f"PID, PASSES, CHECKS = {os.getpid()}, {id(passes)}, {[id(checks.check_close), id(checks.check_equal)]}\\n")
    f.write(SCRIPT)
torchrun(path, nprocs=1)

''' + WRONG["c1_speedup"]},
    # 2. The hidden tests' own expectations, read at grading time from the course's source notebook
    # (found through the grading process's working directory).
    "reads_the_hidden_tests": {"c3_gpus_needed": r'''import json
import os
import re


def gpus_needed(n_params, gpu_gb, bytes_per_param=16):
    for course in (f"/proc/{os.getppid()}/cwd", os.environ.get("PWD", ".")):
        try:
            with open(os.path.join(course, "source", "00_foundations", "00_foundations.ipynb")) as f:
                cells = json.load(f)["cells"]
        except OSError:
            continue
        text = "".join("".join(cell["source"]) for cell in cells)
        for args, want in re.findall(r"gpus_needed\(([^)]*)\), (\d+)", text):
            numbers = [float(a.split("=")[-1]) for a in args.split(",")]
            if numbers[:2] == [n_params, gpu_gb] and numbers[2:] in ([], [bytes_per_param]):
                return int(want)
    return 0
'''},
    # 3. The toolkit's own answer, tabulated when the answer cell runs (so no test sees it called).
    "tabulates_the_toolkit": {"c1_speedup": '''from grader import timing

TABLE = {(t1, tn): timing.speedup(t1, tn) for t1 in (60, 80, 90, 100) for tn in (10, 30, 50, 60)}


def my_speedup(t1, tn):
    return TABLE[t1, tn]


def my_efficiency(t1, tn, n):
    return TABLE[t1, tn] / n
'''},
}


def variant_students():
    """{student: {grade id: answer}}: lesson 00's right answers written otherwise, the i-th of each challenge's in student i."""
    students = {}
    for (lesson, gid, *_), code in VARIANTS.items():
        if lesson == LESSON:
            answers = next((a for a in students.values() if gid not in a), None)
            if answers is None:
                answers = students[f"variants_{len(students) + 1}"] = {}
            answers[gid] = code
    return students


def added_cells():
    """Wrong answers, with cells that patch the checks added, the lesson's first cell changed and a test deleted."""
    nb = submission(LESSON, answers=WRONG, drop={"c3_gpus_needed_test"})
    first = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code")
    nb["cells"][first]["source"] = f"class checks:\n    check_equal = check_close = staticmethod({QUIET})\n\n\n" + \
        "".join(nb["cells"][first]["source"]).replace("from grader.grading import checks, ", "from grader.grading import ")
    for code in reversed(ADDED):
        nb["cells"].insert(first + 1, nbformat.v4.new_code_cell(code))
    return nb


@pytest.mark.slow
def test_cheats_earn_nothing_and_right_answers_keep_full_marks(tmp_path):
    course = copy_course(tmp_path)
    nbgrader("generate_assignment", LESSON, "--force", cwd=course)
    release = json.loads((course / "release" / LESSON / f"{LESSON}.ipynb").read_text())
    submit(course, "honest", LESSON, submission(LESSON))
    for student, answers in variant_students().items():  # a notebook holds one answer per challenge
        submit(course, student, LESSON, submission(LESSON, answers=answers))
    for name, (code, _) in TAMPERING.items():
        submit(course, name, LESSON, submission(LESSON, answers={"c2_to_device": code + "\n\n" + SOLUTIONS["c2_to_device"]}))
    blank = json.loads(json.dumps(release))  # the first integrity check's case: a transformer, nothing answered
    first = next(c for c in blank["cells"] if c["metadata"].get("nbgrader", {}).get("solution"))
    first["source"] = TAMPERING["input_transformer"][0] + "\n" + "".join(first["source"])
    submit(course, "blank_with_transformer", LESSON, blank)
    for name, answers in {**KINDS, **AROUND_THE_SCAN}.items():
        submit(course, name, LESSON, submission(LESSON, answers={**WRONG, **answers}))
    # Graded in this order (nbgrader sorts by student): the first leaves a start-up file, the next is blank.
    submit(course, "startup_1_leaves_a_file", LESSON, submission(
        LESSON, answers={"c1_speedup": LEAVES_A_STARTUP_FILE + "\n\n" + SOLUTIONS["c1_speedup"]}))
    submit(course, "startup_2_blank", LESSON, release)
    submit(course, "ships_a_package", LESSON, submission(LESSON, answers=WRONG))
    for name, text in SHIPPED.items():
        path = course / "submitted" / "ships_a_package" / LESSON / "grader" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    submit(course, "adds_cells", LESSON, added_cells())
    # numpy's masked value is neither equal nor unequal to anything: the checks refuse it
    submit(course, "lies_with_numpy", LESSON, submission(LESSON, answers={**WRONG, "c3_gpus_needed": (
        "import numpy as np\n\n\ndef gpus_needed(n_params, gpu_gb, bytes_per_param=16):\n    return np.ma.masked\n")}))
    # The course's parallel autograde (nbgrader autograde per student, the course's preprocessors
    # included): the class on both cores, each student's log in autograde_logs/.
    proc = parallel_autograde(course, LESSON, "--force")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    log = "".join(path.read_text() for path in sorted((course / "autograde_logs" / LESSON).glob("*.log")))

    worth = points(LESSON)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        def graded(student):
            sub = gb.find_submission_notebook(LESSON, LESSON, student)
            grades = {g.name: (g.auto_score, g.needs_manual_grade) for g in sub.grades}
            return sub.score, grades, {c.name: c.auto_comment for c in sub.comments if c.auto_comment}

        def outputs(student):
            nb = nbformat.read(course / "autograded" / student / LESSON / f"{LESSON}.ipynb", 4)
            return {c.metadata.get("nbgrader", {}).get("grade_id"): c.get("outputs", []) for c in nb.cells}, nb

        for student in ("honest", *variant_students()):  # full marks, nothing flagged
            assert graded(student) == (10, {gid: (pts, False) for gid, pts in worth.items()}, {}), student
        # Flagged: challenge 1's test keeps its point, every later test waits for the instructor,
        # the reason in the answer's comment (the formgrader), the test cells' output (the feedback) and the log.
        for name, (_, reason) in TAMPERING.items():
            score, grades, comments = graded(name)
            assert score == 1 and grades == {gid: (1, False) if gid == "c1_speedup_test" else (None, True)
                                             for gid in worth}, name
            assert reason in comments["c2_to_device"] and "manual grading" in comments["c2_to_device"], name
            cells, _ = outputs(name)
            for gid in worth:
                errors = [o.evalue for o in cells[gid] if o.output_type == "error" and o.ename == "GradingIntegrityError"]
                assert (gid != "c1_speedup_test") == any(e.startswith("sent to manual grading: c2_to_device line")
                                                         for e in errors), (name, gid)
            assert any(line.startswith(f"Grading integrity: {name} c2_to_device line") and reason in line
                       for line in log.replace("[AutogradeApp | WARNING] ", "").splitlines()), name
        # Flagged in challenge 1 with wrong answers: every test waits for the instructor, no points meanwhile.
        for name in [*KINDS, "blank_with_transformer", "startup_1_leaves_a_file"]:
            score, grades, comments = graded(name)
            assert (score, grades) == (0, {gid: (None, True) for gid in worth}), name
            assert "c1_speedup" in comments, name
            assert f"Grading integrity: {name} sent to manual grading: c1_speedup_test" in log
        # Around the scan: no points, flagged or not.
        for name in AROUND_THE_SCAN:
            score, grades, _ = graded(name)
            assert score == 0 and all(auto in (0, None) for auto, _ in grades.values()), (name, grades)
        # The start-up file was left where the kernel's IPython looks, and the next kernel never saw it.
        cells, _ = outputs("startup_1_leaves_a_file")
        left = "".join(o.get("text", "") for o in cells["c1_speedup"])
        assert left.count("left ") == 2 and "course-grading-" in left, left
        assert graded("startup_2_blank")[:2] == (0, {gid: (0, False) for gid in worth})
        # The shipped package reached the autograded folder (nbgrader copies it) but was never imported.
        assert (course / "autograded" / "ships_a_package" / LESSON / "grader" / "checks.py").is_file()
        assert graded("ships_a_package") == (0, {gid: (0, False) for gid in worth}, {})
        assert graded("lies_with_numpy") == (0, {gid: (0, False) for gid in worth}, {})
        # Added and changed cells were left out, listed at the top of the graded notebook and in the log.
        assert graded("adds_cells") == (0, {gid: (0, False) for gid in worth}, {})
        _, nb = outputs("adds_cells")
        note = nb.cells[0].source
        assert note.startswith("**Only answer cells are graded.**") and note.count("\n- ") == 3, note
        assert "class checks:" in note and "get_ipython()" in note and "checks.check_equal" in note
        assert "Grading integrity: adds_cells left out 3 cells that are not answer cells" in log
        assert not any("Only answer cells" in c.source for c in outputs("honest")[1].cells)

    # The student's feedback shows the reason: in the test cells' output and the answer's comment.
    # (nbconvert's templates are found in the test environment's share/jupyter.)
    nbgrader("generate_feedback", LESSON, "--force", "--student=rebinds_the_checks", cwd=course,
             env={"JUPYTER_PATH": Path(sys.prefix, "share", "jupyter")})
    html = (course / "feedback" / "rebinds_the_checks" / LESSON / f"{LESSON}.html").read_text()
    assert "sent to manual grading: c1_speedup line 1: passes the module checks around as a value" in html
    assert "Sent to manual grading by the course" in html and "code by name at run time (vars)" in html


def test_an_answer_registers_hooks_only_where_its_challenge_asks_for_them():
    # Lesson 05's overlap challenge is to hook the model's parameters (its notebook's "course.hooks");
    # anywhere else a hook on an object the answer did not make could change what a test sees.
    overlap = ("def attach_overlap(model):\n    for p in model.parameters():\n"
               "        p.register_post_accumulate_grad_hook(print)\n    return print\n")
    assert findings("05_communication", {"c3_overlap": overlap}) == {"c3_overlap": []}
    assert findings("05_communication", {"c3_overlap": overlap.replace("_post_accumulate_grad", "")})["c3_overlap"]
    average = overlap.replace("attach_overlap", "average_gradients")
    assert findings("02_ddp", {"c3_average": average})["c3_average"]


def test_an_answer_that_makes_a_process_group_of_its_own_is_flagged():
    # Messages on a group the ranks were not given are out of record.messages' sight.
    side = ("def ring_all_reduce(t):\n    store = dist.FileStore('/tmp/ring', dist.get_world_size())\n"
            "    side = dist.ProcessGroupGloo(store, dist.get_rank(), dist.get_world_size())\n"
            "    dist.all_reduce(t, group=side)\n")
    found = findings("05_communication", {"c2_ring": side})["c2_ring"]
    assert any("FileStore" in f for f in found) and any("ProcessGroupGloo" in f for f in found), found
    imported = "from torch.distributed import new_group\n\n\ndef ring_all_reduce(t):\n    dist.all_reduce(t, group=new_group())\n"
    assert findings("05_communication", {"c2_ring": imported})["c2_ring"]
