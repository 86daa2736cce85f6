"""Grading kernels forked from a process that has imported torch and IPython's kernel already.

Every graded notebook starts two kernels (:class:`grader.grading.integrity.IsolatedExecute`), and
each spent about 4 s of CPU on its start and on importing torch before any cell ran. The
zygote, ``python -s -m grader.grading.zygote FD``, imports those once and then forks a kernel per
request: the child takes the request's environment, working directory, CPU affinity and
threads, its own session, the requester's output, and runs the kernel's module (``-m``) as
``python`` would; the sandbox (:mod:`grader.grading.sandbox`) then locks the child as it locks a
kernel started from scratch. Nothing of the toolkit is imported before the fork: a lesson's
withheld functions (``course.withheld``) reach the answer's kernel only from the grading build.

Requests come over a socket pair (one message each, with the reply socket and the requester's
output attached); a kernel holds no end of it. The reply socket carries the kernel's pid, then
its exit status, and when the requester goes (a worker stopped), the kernel and every process
below it are killed. Where the zygote cannot serve a request (another Python, another
environment for imports, a machine with GPUs, no zygote), the kernel is started as jupyter_client starts it.

>>> process = fork([sys.executable, "-m", "ipykernel_launcher", "--version"], dict(os.environ, PYTHONNOUSERSITE="1"), "/")
>>> process.wait(timeout=60) == 0 if process else glob.glob(GPUS) != []   # None: started from scratch (GPUs)
True
>>> stop()   # this process's zygote ends
"""

import array
import atexit
import contextlib
import glob
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

from jupyter_client.provisioning import LocalProvisioner

MODULES = ("ipykernel_launcher", "grader.grading.sandbox")  # the kernels' modules it runs
# What every kernel imports (the lessons' torch.distributed parts too, 2 s); nothing of the toolkit.
PRELOAD = ("torch", "torch.distributed.fsdp", "torch.distributed.pipelining", "torch.distributed.checkpoint.state_dict",
           "ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel.zmqshell")
# What must be the same in the zygote and a kernel's environment for what the zygote imported to hold.
SAME = ("PYTHONPATH", "PYTHONHOME", "PYTHONSAFEPATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONHASHSEED")
MESSAGE = 1 << 20
GPUS = "/dev/nvidia[0-9]*"  # one node per NVIDIA GPU (as sandbox.GPUS: the zygote imports nothing of the toolkit)

_control = None  # this process's end of the zygote's socket, once started here or in a parent
_process = _owner = None  # the zygote (a Popen) and the process that started it
_same = {}  # SAME's variables as the zygote was started with


# ---- the requester's side ----

class Forked:
    """A kernel the zygote forked, with the part of ``subprocess.Popen`` jupyter_client uses. Its exit
    status comes over ``reply``; should the zygote go first, the kernel is watched by its pid."""

    stdin = stdout = stderr = None

    def __init__(self, pid, reply):
        self.pid, self.reply, self.returncode = pid, reply, None

    def poll(self):
        from grader.launch.processes import alive  # here, not in the zygote, which imports nothing of the toolkit

        if self.returncode is None and self.reply is not None and _readable(self.reply, 0):
            data = self.reply.recv(MESSAGE)
            self.reply.close()
            self.reply = None
            if data:
                self.returncode = json.loads(data)["exit"]
        if self.returncode is None and self.reply is None and not alive(self.pid):
            self.returncode = -signal.SIGKILL  # the zygote went first, and the kernel has gone since
        return self.returncode

    def wait(self, timeout=None):
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() >= end:
                raise subprocess.TimeoutExpired(f"kernel {self.pid}", timeout)
            time.sleep(0.05)
        return self.returncode

    def send_signal(self, signum):
        if self.poll() is None:  # never to a pid the zygote has reaped, which another process may now hold
            os.kill(self.pid, signum)

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)


def _readable(sock, timeout):
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ)
        return bool(selector.select(timeout))


def start():
    """Start a zygote for this process and the processes it forks from now on, which inherit its
    socket; it ends when they all have closed it (:func:`stop`, or their exit). For example, before
    forking autograde's workers."""
    global _control, _process, _owner
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with theirs:
        _process = subprocess.Popen([sys.executable, "-s", "-m", __name__, str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                    stdin=subprocess.DEVNULL, env=dict(os.environ, PYTHONNOUSERSITE="1"))
    _control, _owner = ours, os.getpid()
    _same.update((k, os.environ.get(k)) for k in SAME)
    return ours


def stop(timeout=30):
    """Close this process's end of the zygote's socket and, where this process started the zygote,
    wait (up to ``timeout`` s) for it to end: once every holder has closed the socket, it kills
    the kernels still running and exits."""
    global _control, _process
    if _control is not None:
        _control.close()
        _control = None
    if _process is not None and _owner == os.getpid():  # not in a forked worker: the zygote is not its child
        try:
            _process.wait(timeout)
        except subprocess.TimeoutExpired:
            _process.kill()
            _process.wait()
    _process = None


def servable(cmd, env):
    """Whether the zygote can start the kernel ``cmd`` with ``env``: this Python running one of the
    kernels' modules, and an environment in which what the zygote imported is what the kernel would import,
    on a machine without NVIDIA GPUs (a process forked after anything called into CUDA cannot use it, and no
    GPU run has yet shown that nothing the zygote imports does: there, kernels start from scratch).

    >>> kernel, env = [sys.executable, "-m", "ipykernel_launcher", "-f", "k.json"], dict(os.environ, PYTHONNOUSERSITE="1")
    >>> servable(kernel, env) == (glob.glob(GPUS) == [])   # True here, False on a machine with GPUs
    True
    >>> servable(["/opt/other/python", "-m", "ipykernel_launcher"], dict(os.environ, PYTHONNOUSERSITE="1"))
    False
    """
    return (not glob.glob(GPUS) and len(cmd) >= 3 and cmd[0] == sys.executable and cmd[1] == "-m" and cmd[2] in MODULES
            and env.get("PYTHONNOUSERSITE") == "1" and all(env.get(k) == _same.get(k, os.environ.get(k)) for k in SAME))


def fork(cmd, env, cwd):
    """Start ``cmd`` (``python -m MODULE ARGS``) as a fork of the zygote, in ``cwd`` with ``env``:
    a :class:`Forked`, or None where the zygote cannot serve it (the caller then starts it itself)."""
    if not servable(cmd, env):
        return None
    try:
        control = _control or start()
        reply, given = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with given:
            request = {"argv": cmd, "env": env, "cwd": str(cwd), "cores": sorted(os.sched_getaffinity(0))}
            socket.send_fds(control, [json.dumps(request).encode()], [given.fileno(), 1, 2])
        reply.settimeout(60)  # a zygote stopped (SIGSTOP) or gone does not hold the grading up
        answer = json.loads(reply.recv(MESSAGE) or b'{"error": "the zygote is gone"}')
        reply.settimeout(None)
    except OSError as error:  # a time-out among them
        answer = {"error": str(error) or type(error).__name__}
    if "pid" not in answer:
        print(f"Grading: a kernel started without the zygote ({answer['error']})", file=sys.stderr, flush=True)
        stop(timeout=0)  # the next kernel asks a fresh zygote
        return None
    return Forked(answer["pid"], reply)


class ForkedProvisioner(LocalProvisioner):
    """jupyter_client's local provisioner, but the kernel is forked from the zygote where it can be
    (:func:`fork`); its process group is its own, as a kernel started by jupyter_client has."""

    async def launch_kernel(self, cmd, **kwargs):
        process = fork(cmd, kwargs.get("env") or dict(os.environ), kwargs.get("cwd") or os.getcwd())
        if process is None:
            return await super().launch_kernel(cmd, **kwargs)
        self.process, self.pid, self.pgid = process, process.pid, process.pid
        self.cwd = kwargs.get("cwd")
        return self.connection_info

    async def send_signal(self, signum):
        if isinstance(self.process, Forked) and self.process.poll() is not None:
            return  # its process group is gone, and its number may be another kernel's by now
        await super().send_signal(signum)


# ---- the zygote ----

def serve(fd):
    """The zygote: import what every kernel imports, then fork a kernel per request on the socket ``fd``
    until every requester has closed it. A request is read into one buffer, parsed only by the child
    it is for, and zeroed here after the fork: no kernel holds another's request (its folders, its
    student's name)."""
    if sys.path and sys.path[0] == os.getcwd():  # `-m` put the zygote's working directory first
        del sys.path[0]
    for module in PRELOAD:
        with contextlib.suppress(ImportError):  # a torch without distributed: the kernels import less
            __import__(module)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C in the terminal is for the requesters
    control = socket.socket(fileno=fd)
    wake, woken = socket.socketpair()
    wake.setblocking(False)
    woken.setblocking(False)
    signal.set_wakeup_fd(woken.fileno())
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    selector.register(wake, selectors.EVENT_READ)
    kernels = {}  # pid: its reply socket
    buffer = bytearray(MESSAGE)
    while True:
        for key, _ in selector.select():
            if key.fileobj is control:
                try:
                    size, ancillary, _, _ = control.recvmsg_into([buffer], socket.CMSG_SPACE(3 * 4))
                except OSError:
                    continue
                if not size:  # every requester has gone
                    _kill_all(kernels)
                    return
                _serve(buffer, size, _fds(ancillary), control, (wake, woken), selector, kernels)
            elif key.fileobj is wake:
                with contextlib.suppress(OSError):
                    wake.recv(4096)
                _reap(kernels, selector)
            else:  # a requester has gone (it sends nothing else): its kernel goes too
                selector.unregister(key.fileobj)
                _kill_tree(key.data)


def _fds(ancillary):
    fds = array.array("i")
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    return list(fds)


def _serve(buffer, size, fds, control, wakeup, selector, kernels):
    """Fork the kernel a request asks for; a request without its three descriptors, or a fork that
    fails, is answered with an error (the requester then starts the kernel itself)."""
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return
    reply, out, err = socket.socket(fileno=fds[0]), fds[1], fds[2]
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError as error:
        pid, failed = None, str(error)
    if pid == 0:
        _child(bytes(buffer[:size]), out, err, [control, *wakeup, reply, *kernels.values()], selector)
    buffer[:size] = bytes(size)
    os.close(out)
    os.close(err)
    with contextlib.suppress(OSError):
        reply.send(json.dumps({"pid": pid} if pid else {"error": failed}).encode())
    if pid is None:
        reply.close()
        return
    kernels[pid] = reply
    selector.register(reply, selectors.EVENT_READ, pid)


def _reap(kernels, selector):
    while kernels:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        reply = kernels.pop(pid, None)
        if reply is not None:
            with contextlib.suppress(KeyError):  # unregistered already where its requester went first
                selector.unregister(reply)
            with contextlib.suppress(OSError):
                reply.send(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
            reply.close()


def _kill_tree(pid):
    """SIGKILL ``pid`` and every process below it. (Not through ``grader.launch.processes``: the zygote
    imports nothing of the toolkit, whose modules every kernel forked after would then hold.)"""
    parents = {}
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            with open(f"/proc/{entry}/stat") as f:
                parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
    tree, level = [pid], [pid]
    while level:
        level = [p for p, parent in parents.items() if parent in level]
        tree += level
    for each in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(each, signal.SIGKILL)


def _kill_all(kernels):
    for pid in list(kernels):
        _kill_tree(pid)
    for pid in list(kernels):
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)


def _child(raw, out, err, sockets, selector):
    """In the forked kernel: leave the zygote behind (its sockets closed, its signal handling undone),
    take the request's place, then run the kernel's module as ``python -m`` does; never returns."""
    code = 1
    try:
        request = json.loads(raw)
        os.setsid()
        selector.close()
        for sock in sockets:
            sock.close()
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.close(out)
        os.close(err)
        stdin = os.open(os.devnull, os.O_RDONLY)
        os.dup2(stdin, 0)
        os.close(stdin)
        os.sched_setaffinity(0, request["cores"])
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # found again, from the kernel's TMPDIR
        module, args = request["argv"][2], request["argv"][3:]
        # The kernel ends if the zygote does (ipykernel read JPY_PARENT_PID when the zygote imported it).
        args.append(f"--IPKernelApp.parent_handle={os.getppid()}")
        if module != "grader.grading.sandbox":  # the sandbox does it once locked, so that every thread is locked
            match_threads()
        sys.path.insert(0, os.getcwd())  # as `python -m` has it
        sys.argv = [module, *args]
        import runpy

        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(OSError):
            atexit._run_exitfuncs()  # as the interpreter's exit would: what the kernel registered
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def match_threads():
    """Give torch, where the zygote imported it, the threads a process starting now would take:
    ``OMP_NUM_THREADS``, or one per core of its affinity (torch read the variable when the zygote
    imported it). Threads started here are the intra-op pool's."""
    torch = sys.modules.get("torch")
    if torch is not None:
        threads = os.environ.get("OMP_NUM_THREADS", "")
        torch.set_num_threads(int(threads) if threads.isdigit() and int(threads) > 0 else len(os.sched_getaffinity(0)))


if __name__ == "__main__":
    serve(int(sys.argv[1]))
