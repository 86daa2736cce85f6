"""The grading kernel writes only its own files: Linux's Landlock, applied as the kernel starts.

Code in an answer cell runs in the process that runs the tests. Through ``/proc/self/mem`` it
could rewrite any function of that process (a check's code, ``torch.allclose``), and through a
module written into the course's environment it could run code the scan never reads, in this
kernel or the next student's. :class:`grader.grading.integrity.IsolatedExecute` starts each
grading kernel with this module as an IPython extension, which restricts the kernel, and every
process it starts (the ranks of a measurement), to writing files in its own folders: its working
directory, ``HOME``, IPython directory and temporary folder (``TMPDIR``, which ``IsolatedExecute``
gives it in its own room), and of ``/dev`` the usual streams and shared memory. Nothing under
``/proc``, ``/sys``, the installed packages or the machine's ``/tmp``. Reading stays as it was.

Landlock needs Linux 5.13 or later with it enabled; where it is missing :func:`lock` returns a
reason instead (printed as the kernel starts), and the scan alone refuses the routes to memory
it knows.

>>> import subprocess, sys
>>> code = "from grader.grading import sandbox; print(sandbox.lock()); open('/proc/self/mem', 'r+b')"
>>> out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
>>> out.stdout.strip() == "None" and "PermissionError" in out.stderr or out.stdout.startswith("Landlock")
True
"""

import ctypes
import os
import struct
import tempfile

# Syscall numbers (x86_64, aarch64) and the file-write rights Landlock handles here.
SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
WRITE_FILE, TRUNCATE = 1 << 1, 1 << 14
PATH_BENEATH, NO_NEW_PRIVS = 1, 38
# Under /dev, what a kernel and its ranks write: streams, terminals and shared memory.
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/pts", "/dev/shm", "/dev/random", "/dev/urandom")


def lock():
    """Allow this process (and what it starts) to write files only in its own folders (see above).

    Returns None once applied, or why it could not be (an old kernel, Landlock disabled).
    """
    calls = SYSCALLS.get(os.uname().machine)
    if calls is None:
        return f"Landlock unavailable: no syscall numbers for {os.uname().machine}"
    create, add_rule, restrict = calls
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(create, None, ctypes.c_size_t(0), ctypes.c_uint32(1))  # LANDLOCK_CREATE_RULESET_VERSION
    if abi < 1:
        return f"Landlock unavailable: {os.strerror(ctypes.get_errno())}"
    handled = WRITE_FILE | (TRUNCATE if abi >= 3 else 0)
    attr = struct.pack("Q", handled)
    ruleset = libc.syscall(create, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        return f"Landlock unavailable: {os.strerror(ctypes.get_errno())}"
    try:
        own = [os.getcwd(), os.environ.get("HOME"), os.environ.get("IPYTHONDIR"), tempfile.gettempdir()]
        for place in [*filter(None, own), *DEVICES]:
            try:
                fd = os.open(place, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not on this machine
            try:
                rule = struct.pack("=Qi", handled, fd)
                libc.syscall(add_rule, ctypes.c_int(ruleset), ctypes.c_int(PATH_BENEATH), ctypes.c_char_p(rule),
                             ctypes.c_uint32(0))
            finally:
                os.close(fd)
        libc.prctl(NO_NEW_PRIVS, 1, 0, 0, 0)
        if libc.syscall(restrict, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return f"Landlock not applied: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(ruleset)
    return None


def load_ipython_extension(ipython):
    """IPython calls this as the grading kernel starts (``--InteractiveShellApp.extensions``)."""
    reason = lock()
    if reason:
        print(f"Grading integrity: {reason}; the scan alone keeps answers from the process's memory")
