"""The grading kernel's sandbox: what it, and every process it starts, may read, write and reach.

Code in an answer cell runs in the grading kernel, and so does every process it starts (the
ranks of a measurement, a script run through ``torchrun``). :class:`grader.grading.integrity.IsolatedExecute`
starts that kernel as ``python -m grader.grading.sandbox -f CONNECTION_FILE``: this module locks the
process while it still has one thread, then runs IPython's kernel in it, so every thread and
child inherits the lock. Three mechanisms of Linux:

- **Landlock** (:func:`confine_files`), files: write, and create, delete, rename or link entries,
  only in the kernel's own folders (working directory, ``HOME``, IPython directory, temporary
  folder) and a few devices; read only those,
  the Python environment (its libraries and the ``grader`` package), the system's libraries and
  settings (``/usr/lib``, ``/etc``, ...), ``/proc``, ``/sys`` and the connection file. Never the
  course directory (gradebook, source notebooks, other students' submissions), the exchange or
  the instructor's home: paths named in ``COURSE_SANDBOX_SECRETS`` are checked to lie outside
  every rule. Landlock's scopes also keep signals and abstract sockets inside the sandbox, and
  a Landlocked process cannot trace, or read or write the memory of, any process outside it
  (nbgrader, the other students' kernels).
- **seccomp** (:func:`deny_syscalls`), for every thread: no ``ptrace``, ``process_vm_readv`` or
  ``process_vm_writev``, ``perf_event_open``, so not even a rank can read or write the kernel
  that started it; ``no_new_privs`` first, so no set-uid program regains anything.

- **A network of its own** (:func:`isolate_network`): a Linux network namespace whose only
  interface is its own loopback, where the kernel's ranks meet; nothing on the machine's loopback
  (other kernels, Jupyter's servers) or beyond it is reachable. The kernel's channels are then
  Unix sockets in its temporary folder (autograde starts it with Jupyter's ``ipc`` transport).
  No capability is left to it (:func:`drop_capabilities`), so a kernel run as root cannot move a
  network device out of that namespace, load a kernel module or do anything else root's rights allow.

Where autograde runs as root and is given a user (``c.IsolatedExecute.answer_user``, passed as
``COURSE_ANSWER_USER``), the kernel first becomes that user (:func:`become`): its own folders
are handed to it, and whatever else the operating system's permissions keep from that user
(a course directory of mode 0700) stays out of reach even where Landlock's file rules cannot
be applied (a machine with GPUs).

Each returns the reasons it could not be applied (an old kernel, another architecture); they are
printed as the kernel starts, so grading's log says what was left open.

Where a lesson's challenges ask for what the toolkit computes (its notebook's ``course.withheld``
list, passed as ``COURSE_WITHHELD``), the kernel and its ranks import the grading build of the
toolkit instead (:func:`grading_toolkit`), where those functions raise, and cannot read the full one.

>>> import subprocess, sys
>>> code = "from grader.grading import sandbox; print(sandbox.lock()); open('/proc/self/mem', 'r+b')"
>>> out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
>>> out.stdout.strip() == "[]" and "PermissionError" in out.stderr or "unavailable" in out.stdout
True
"""

import ast
import ctypes
import glob
import json
import os
import runpy
import shutil
import struct
import sys
import sysconfig
import tempfile
from pathlib import Path

SECRETS = "COURSE_SANDBOX_SECRETS"  # a JSON list of paths the kernel must not read
USER = "COURSE_ANSWER_USER"  # the user the kernel runs as, where autograde runs as root
WITHHELD = "COURSE_WITHHELD"  # a JSON list of the toolkit's functions the grading build leaves out
TOOLKIT = "COURSE_GRADING_TOOLKIT"  # where the grading build of the toolkit goes

# ---- Landlock ----
LANDLOCK = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}  # create_ruleset, add_rule, restrict_self
READ_FILE, WRITE_FILE, READ_DIR, TRUNCATE = 1 << 2, 1 << 1, 1 << 3, 1 << 14
# What changes a folder's entries: removing, making (folders, files, sockets, pipes, links) and, from
# ABI 2, renaming or linking across folders. Handled too, or a confined process could delete, move or
# create entries wherever its user may (a gradebook, a course's folders), though it can write no file there.
REMOVE_DIR, REMOVE_FILE, MAKE_DIR, MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_SYM, REFER = (
    1 << 4, 1 << 5, 1 << 7, 1 << 8, 1 << 9, 1 << 10, 1 << 12, 1 << 13)
MAKE_CHAR, MAKE_BLOCK = 1 << 6, 1 << 11  # device nodes: handled, allowed nowhere
ENTRIES = REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_SYM
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
PATH_BENEATH, NO_NEW_PRIVS = 1, 38
# Under /dev, what a kernel and its ranks use: streams, terminals, shared memory and the GPUs.
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/pts", "/dev/shm", "/dev/random", "/dev/urandom")
GPU_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/dri")
GPUS = "/dev/nvidia[0-9]*"  # one node per GPU this machine shows the kernel
# The system's libraries, settings and kernel interfaces: read only. Not /usr/local/share (nbgrader's
# exchange), /home, /root, /srv or /tmp.
SYSTEM = ("/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libexec", "/usr/bin", "/usr/sbin", "/usr/share", "/usr/local/lib",
          "/usr/local/bin", "/usr/local/cuda*", "/usr/local/nvidia", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc",
          "/proc", "/sys", "/run/nvidia-persistenced")

# ---- the network ----
CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
IFREQ = "16sH22x"  # struct ifreq: the interface's name, then its flags

# ---- capabilities ----
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, CAPABILITY_VERSION_3 = 24, 47, 4, 0x20080522

# ---- seccomp ----
# System calls that reach another process's memory or trace it: refused with EPERM.
# (pidfd_getfd and process_madvise are left to Landlock, which keeps them inside the sandbox: NCCL may
# pass CUDA memory between ranks with the first.)
DENIED = {"x86_64": {"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "perf_event_open": 298},
          "aarch64": {"ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "perf_event_open": 241}}
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
SECCOMP_SYSCALL = {"x86_64": 317, "aarch64": 277}
SET_MODE_FILTER, FILTER_FLAG_TSYNC = 1, 1
RET_ALLOW, RET_ERRNO, EPERM = 0x7FFF0000, 0x00050000, 1
LD_W_ABS, JEQ_K, JGE_K, RET_K = 0x20, 0x15, 0x35, 0x06
X32_BIT = 0x40000000  # x86_64's x32 calls: another numbering, refused whole


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def readable_paths(connection_file=None, toolkit=None):
    """What the kernel may read (besides what it may write): the system, the Python environment, the
    toolkit (``toolkit``, the folder holding the ``grader`` package, or the installed one).

    >>> import grader
    >>> paths = readable_paths()
    >>> os.path.dirname(grader.__file__) in paths and "/proc" in paths and "/" not in paths
    True
    """
    import grader

    places = [*SYSTEM, toolkit or os.path.dirname(grader.__file__)]
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        places += [os.path.join(prefix, part) for part in ("lib", "lib64", "bin", "pyvenv.cfg")]
    places += [p for p in sysconfig.get_paths().values()] + [p for p in sys.path if p.endswith(("-packages", ".zip"))]
    if connection_file:
        places.append(connection_file)
    return _expanded(places)


def _expanded(places):
    return sorted({match for place in places for match in (glob.glob(place) if "*" in place else [place])})


def writable_paths():
    """The kernel's own folders (working directory, HOME, IPython directory, temporary folder) and devices.

    >>> "/dev/null" in writable_paths() and not any("*" in path for path in writable_paths())
    True
    """
    own = [os.getcwd(), os.environ.get("HOME"), os.environ.get("IPYTHONDIR"), tempfile.gettempdir()]
    return _expanded([*filter(None, own), *DEVICES, *GPU_DEVICES])


def _beneath(path, place):
    try:
        return Path(path).resolve().is_relative_to(Path(place).resolve())
    except OSError:
        return False


def confine_files(connection_file=None, secrets=(), toolkit=None):
    """Landlock this process (and what it starts): read and write only the paths above. Returns what was left open.

    A rule that would open a path of ``secrets`` (a folder holding one) is left out and reported.
    """
    calls = LANDLOCK.get(os.uname().machine)
    if calls is None:
        return [f"Landlock unavailable: no syscall numbers for {os.uname().machine}; answers may read any file"]
    create, add_rule, restrict = calls
    libc = _libc()
    abi = libc.syscall(create, None, ctypes.c_size_t(0), ctypes.c_uint32(1))  # LANDLOCK_CREATE_RULESET_VERSION
    if abi < 1:
        return [f"Landlock unavailable ({os.strerror(ctypes.get_errno())}): answers may read any file and write "
                "their own process's memory through /proc"]
    left = []
    write = WRITE_FILE | ENTRIES | (REFER if abi >= 2 else 0) | (TRUNCATE if abi >= 3 else 0)
    read = READ_FILE | READ_DIR
    files = write | read | MAKE_CHAR | MAKE_BLOCK
    if glob.glob(GPUS):
        # Seen on an H200: cuInit returns 304 (an "OS call failed") under these rules, GPU devices allowed.
        files = 0
        left.append("GPUs here: CUDA names every thread it starts by writing /proc/<pid>/task/<tid>/comm, a path "
                    "Landlock cannot allow ahead for each process, so files are not confined: answers may read and "
                    "write whatever this kernel's user can: autograde as root with c.IsolatedExecute.answer_user "
                    "set, the course directory closed to that user")
    if abi >= 6:
        attr = struct.pack("QQQ", files, 0, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL)
    else:
        left.append(f"Landlock ABI {abi} (Linux < 6.12) has no scopes: answers may signal processes outside the sandbox")
        if not files:
            return left  # nothing left for Landlock to do
        attr = struct.pack("Q", files)
    ruleset = libc.syscall(create, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        return [f"Landlock unavailable: {os.strerror(ctypes.get_errno())}"]
    try:
        # /dev/shm, which every process on the machine shares: its entries (random names) are not listed.
        rules = [(place, write | read if place != "/dev/shm" else write | READ_FILE) for place in writable_paths()] + \
                [(place, read) for place in readable_paths(connection_file, toolkit)] if files else []
        for place, rights in rules:
            holds = [s for s in secrets if _beneath(s, place)]
            if holds:
                left.append(f"not readable: {place} (it holds {holds[0]})")
                continue
            try:
                fd = os.open(place, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not on this machine
            try:
                if not os.path.isdir(place):
                    rights &= READ_FILE | WRITE_FILE | TRUNCATE  # a file takes file rights only
                rule = struct.pack("=Qi", rights, fd)
                libc.syscall(add_rule, ctypes.c_int(ruleset), ctypes.c_int(PATH_BENEATH), ctypes.c_char_p(rule),
                             ctypes.c_uint32(0))
            finally:
                os.close(fd)
        libc.prctl(NO_NEW_PRIVS, 1, 0, 0, 0)
        if libc.syscall(restrict, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return [*left, f"Landlock not applied: {os.strerror(ctypes.get_errno())}"]
    finally:
        os.close(ruleset)
    return left


def _filter(arch, denied):
    """The seccomp program (classic BPF): another architecture or x32 call, or a denied call, gets EPERM."""
    deny = RET_ERRNO | EPERM
    program = [(LD_W_ABS, 0, 0, 4), (JEQ_K, 1, 0, AUDIT_ARCH[arch]), (RET_K, 0, 0, deny), (LD_W_ABS, 0, 0, 0)]
    if arch == "x86_64":
        program.append((JGE_K, len(denied) + 1, 0, X32_BIT))
    program += [(JEQ_K, len(denied) - i, 0, number) for i, number in enumerate(denied)]
    program += [(RET_K, 0, 0, RET_ALLOW), (RET_K, 0, 0, deny)]
    return b"".join(struct.pack("HBBI", *op) for op in program)


def deny_syscalls():
    """seccomp, for every thread of this process and all it starts: refuse the calls that reach another
    process's memory (``DENIED``). Returns what was left open."""
    arch = os.uname().machine
    if arch not in DENIED:
        return [f"seccomp: no system call numbers for {arch}; processes the answer starts may trace the kernel"]
    libc = _libc()
    code = _filter(arch, sorted(DENIED[arch].values()))
    buffer = ctypes.create_string_buffer(code)
    program = struct.pack("HxxxxxxQ", len(code) // 8, ctypes.addressof(buffer))
    libc.prctl(NO_NEW_PRIVS, 1, 0, 0, 0)
    if libc.syscall(SECCOMP_SYSCALL[arch], SET_MODE_FILTER, FILTER_FLAG_TSYNC, ctypes.c_char_p(program)) != 0:
        return [f"seccomp not applied ({os.strerror(ctypes.get_errno())}): processes the answer starts may trace "
                "the kernel"]
    return []


def isolate_network(connection_file=None):
    """Give this process (and all it starts) a network of its own: a new network namespace, its
    loopback up, nothing else in it. Returns what was left open.

    Only where the kernel's channels are Unix sockets (``"transport": "ipc"`` in its connection
    file), which need no network; over TCP the kernel must keep the machine's loopback. As root
    the namespace is the kernel's alone; any other user makes a user namespace for it first (its
    own user and group mapped to themselves), where the machine allows that. NCCL, which looks
    for an interface to meet on, is told the loopback (``NCCL_SOCKET_IFNAME=lo``) unless told
    another.

    >>> isolate_network()   # no connection file: TCP, the machine's network kept
    ["network: the kernel's channels are TCP, so it keeps the machine's network: answers may connect to any address it reaches"]
    """
    import fcntl
    import socket

    transport = "tcp"
    if connection_file:
        try:
            with open(connection_file) as f:
                transport = json.load(f).get("transport", "tcp")
        except (OSError, ValueError):
            pass
    if transport != "ipc":
        return ["network: the kernel's channels are TCP, so it keeps the machine's network: answers may connect to "
                "any address it reaches"]
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNET if os.geteuid() == 0 else CLONE_NEWUSER | CLONE_NEWNET
    libc = _libc()
    if libc.unshare(ctypes.c_int(flags)) != 0:
        return [f"network not isolated ({os.strerror(ctypes.get_errno())}): answers may connect to any address "
                "the machine reaches"]
    try:
        if flags & CLONE_NEWUSER:
            for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
                with open(f"/proc/self/{name}", "w") as f:
                    f.write(text)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            now = struct.unpack(IFREQ, fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack(IFREQ, b"lo", 0)))[1]
            fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack(IFREQ, b"lo", now | IFF_UP))
    except OSError as error:
        return [f"network isolated, but its loopback is not up ({error}): ranks cannot meet"]
    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    return []


def drop_capabilities():
    """Leave this process (and all it starts) no capability: none held, none to be had again (the
    bounding set emptied). Autograde as root without ``answer_user`` would otherwise hand the answer
    root's: loading kernel modules, or moving a network device into the machine's namespace.
    Returns what was left open.

    >>> import subprocess
    >>> code = "from grader.grading import sandbox; print(sandbox.drop_capabilities(), open('/proc/self/status').read())"
    >>> out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    >>> out.split()[0], out.split("CapEff:")[1].split()[0]
    ('[]', '0000000000000000')
    """
    libc = _libc()
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # refused without CAP_SETPCAP: then there was nothing to drop
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = struct.pack("Ii", CAPABILITY_VERSION_3, 0)
    if libc.capset(ctypes.c_char_p(header), ctypes.c_char_p(bytes(24))) != 0:  # effective, permitted, inheritable: none
        return [f"capabilities kept ({os.strerror(ctypes.get_errno())}): a kernel run as root keeps root's"]
    return []


def become(user, connection_file=None):
    """Run this process as ``user`` from now on (autograde runs as root): its own folders (see
    :func:`writable_paths`) are given to that user first, and the connection file copied into its
    home. Returns the connection file to use and what could not be done.

    >>> become("", "/run/kernel.json")
    ('/run/kernel.json', [])
    """
    import pwd

    if not user:
        return connection_file, []
    if os.geteuid() != 0:
        return connection_file, [f"answers run as this user, not {user!r}: autograde does not run as root"]
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return connection_file, [f"answers run as root: no user {user!r} on this machine"]
    closed = [p for p in {sys.base_prefix, sys.prefix} if not _passable(p, entry.pw_uid, entry.pw_gid)]
    if closed:
        return connection_file, [f"answers run as this user, not {user!r}, who cannot reach this Python ({closed[0]})"]
    own = [p for p in writable_paths() if not p.startswith("/dev")]
    for folder in own:
        for root, dirs, files in os.walk(folder):
            for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
                os.lchown(name, entry.pw_uid, entry.pw_gid)
    if connection_file:
        copied = os.path.join(os.environ.get("HOME") or tempfile.gettempdir(), os.path.basename(connection_file))
        shutil.copyfile(connection_file, copied)
        os.chown(copied, entry.pw_uid, entry.pw_gid)
        os.chmod(copied, 0o600)
        connection_file = copied
    os.setgroups([])
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)
    return connection_file, []


def _passable(path, uid, gid):
    """Whether the user ``uid`` (group ``gid``) may pass through every folder down to ``path``, and list it.

    >>> _passable("/", 65534, 65534)
    True
    """
    parts = Path(path).resolve().parts
    for i in range(1, len(parts) + 1):
        st = os.stat(os.path.join(*parts[:i]))
        bits = 0o5 if i == len(parts) else 0o1  # read and pass the last; pass the ones above
        mode = st.st_mode >> 6 if st.st_uid == uid else st.st_mode >> 3 if st.st_gid == gid else st.st_mode
        if mode & bits != bits:
            return False
    return True


def lock(connection_file=None, secrets=(), toolkit=None):
    """Apply both file and system-call rules (see above), every capability dropped first. Returns the
    list of what could not be applied: empty when all was.

    >>> lock.__doc__.startswith("Apply both")
    True
    """
    tasks = "/proc/self/task"
    threads = len(os.listdir(tasks)) if os.path.isdir(tasks) else 1
    extra = [f"{threads} threads at the lock: Landlock confines only the one that locks"] if threads > 1 else []
    return extra + drop_capabilities() + confine_files(connection_file, secrets, toolkit) + deny_syscalls()


def grading_toolkit(withheld, into):
    """A copy of the ``grader`` package in the folder ``into`` where each function of ``withheld``
    (``"grader.pipeline.split"``) raises instead of answering: the grading build, for a challenge
    that asks for what the toolkit computes. The toolkit's own functions that call it raise too.

    >>> import tempfile
    >>> folder = grading_toolkit(["grader.timing.speedup"], tempfile.mkdtemp())
    >>> import subprocess, sys
    >>> code = "from grader import timing; timing.speedup(2, 1)"
    >>> subprocess.run([sys.executable, "-c", code], cwd=folder, capture_output=True, text=True).stderr.splitlines()[-1]
    'NotImplementedError: grader.timing.speedup is withheld while grading: the challenge asks for what it computes'
    """
    import grader

    copy = Path(into) / "grader"
    shutil.copytree(os.path.dirname(grader.__file__), copy, ignore=shutil.ignore_patterns("__pycache__"))
    by_module = {}
    for name in withheld:
        module, _, function = name.rpartition(".")
        by_module.setdefault(module, set()).add(function)
    for module, functions in by_module.items():
        path = copy.joinpath(*module.split(".")[1:]).with_suffix(".py")
        lines = path.read_text().splitlines(True)
        found = [node for node in ast.parse("".join(lines)).body if isinstance(node, ast.FunctionDef) and node.name in functions]
        for node in sorted(found, key=lambda n: -n.lineno):  # from the bottom, so earlier line numbers hold
            body = node.body[0].lineno - 1
            indent = " " * node.body[0].col_offset
            message = f"{module}.{node.name} is withheld while grading: the challenge asks for what it computes"
            lines[body:node.end_lineno] = [f"{indent}raise NotImplementedError({message!r})\n"]
        missing = functions - {node.name for node in found}
        if missing:
            raise ValueError(f"cannot withhold {sorted(missing)}: not functions of {module}")
        path.write_text("".join(lines))
    return str(into)


def main(argv):
    """``python -m grader.grading.sandbox -f CONNECTION_FILE``: lock, then run IPython's kernel here.

    With ``COURSE_WITHHELD`` set, the kernel and its ranks import the grading build of the toolkit
    (:func:`grading_toolkit`, made in ``COURSE_GRADING_TOOLKIT``), and cannot read the full one.
    """
    connection = argv[argv.index("-f") + 1] if "-f" in argv else None
    secrets = json.loads(os.environ.pop(SECRETS, "[]"))
    withheld = json.loads(os.environ.pop(WITHHELD, "[]"))
    toolkit = None
    if withheld:
        toolkit = grading_toolkit(withheld, os.environ.pop(TOOLKIT))
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [toolkit, os.environ.get("PYTHONPATH")]))
    isolated = isolate_network(connection)  # before become(): as root, the namespace needs root's rights
    moved, left = become(os.environ.pop(USER, ""), connection)
    if moved != connection:
        argv[argv.index("-f") + 1] = connection = moved
    for reason in isolated + left + lock(connection, secrets, toolkit):
        print(f"Grading sandbox: {reason}", file=sys.stderr, flush=True)
    if "torch" in sys.modules:  # forked from the zygote: torch's threads, started now, are locked too
        from grader.grading.zygote import match_threads

        match_threads()
    if sys.path and sys.path[0] == os.getcwd():  # `python -m` puts the working directory first; the kernel has none
        del sys.path[0]
    if toolkit:  # the full toolkit, imported to start this module, gives way to the grading build
        for name in [n for n in sys.modules if n == "grader" or n.startswith("grader.")]:
            del sys.modules[name]
        sys.path.insert(0, toolkit)
    sys.argv = ["ipykernel_launcher", *argv]
    runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
