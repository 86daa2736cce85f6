"""The learner's progress: one JSON file in their home, written atomically, never lost.

The file holds each reviewed card's schedule (``cards``: card id → FSRS state) and the
badges earned (``badges``: set id → date). It lives at ``~/.multi-gpu-course/progress.json``,
or wherever ``COURSE_PROGRESS`` points, so it survives kernel and hub-pod restarts when the
home directory is persistent.

Every change is a read-modify-write under an exclusive lock, so two kernels that review at
the same time both keep their reviews; the new content goes to a temporary file that then
replaces the old one, so a crash mid-write leaves the previous file whole. A file that
cannot be read (empty, not JSON, not the expected shape) is renamed aside, never
overwritten, and the learner is told where it went.
"""

import contextlib
import fcntl
import json
import os
import tempfile
import time
from pathlib import Path

VERSION = 1


def default_path():
    """Where progress is kept: ``$COURSE_PROGRESS`` or ``~/.multi-gpu-course/progress.json``.

    >>> default_path().name
    'progress.json'
    """
    return Path(os.environ.get("COURSE_PROGRESS") or
                Path.home() / ".multi-gpu-course" / "progress.json").expanduser()


def fresh():
    """An empty record of progress."""
    return {"version": VERSION, "cards": {}, "badges": {}}


class Progress:
    """The progress file at ``path`` (default :func:`default_path`).

    :meth:`read` gives the current record; :meth:`update` changes it safely. ``notice`` is
    a sentence for the learner when the file was missing or had to be set aside.

    >>> import tempfile, pathlib
    >>> store = Progress(pathlib.Path(tempfile.mkdtemp()) / "progress.json")
    >>> store.update(lambda record: record["badges"].update(ddp="2026-11-22"))["badges"]
    {'ddp': '2026-11-22'}
    >>> store.read()["badges"]
    {'ddp': '2026-11-22'}
    """

    def __init__(self, path=None):
        self.path = Path(path) if path else default_path()
        self.notice = ""

    def read(self):
        """The current record (a fresh one when there is no usable file)."""
        with self._locked():
            return self._load()

    def update(self, change):
        """Apply ``change(record)`` (which edits the record in place) and save; returns the record."""
        with self._locked():
            record = self._load()
            change(record)
            self._save(record)
            return record

    def opening_notice(self):
        """Read the file now and return what the learner should be told about it, if anything.

        Widgets call it as they open, so a missing or unreadable file is reported at once.

        >>> import tempfile, pathlib
        >>> Progress(pathlib.Path(tempfile.mkdtemp()) / "p.json").opening_notice()
        'No saved progress yet: starting fresh. It will be kept in ...'
        """
        self.read()
        return self.notice

    @contextlib.contextmanager
    def _locked(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _load(self):
        self.notice = ""
        if not self.path.exists():
            self.notice = f"No saved progress yet: starting fresh. It will be kept in {self.path}."
            return fresh()
        try:
            text = self.path.read_text(encoding="utf-8")
            problem = "it is empty" if not text.strip() else _shape_problem(json.loads(text))
        except json.JSONDecodeError as e:
            problem = f"it is not valid JSON: {e.msg} at line {e.lineno}"
        except UnicodeDecodeError:
            problem = "it is not UTF-8 text"
        if problem is None:
            return json.loads(text)
        stamp, n = time.strftime("%Y%m%d-%H%M%S"), 0
        aside = self.path.with_name(f"{self.path.name}.unreadable-{stamp}")
        while aside.exists():
            n += 1
            aside = self.path.with_name(f"{self.path.name}.unreadable-{stamp}-{n}")
        self.path.rename(aside)
        self.notice = (f"Your progress file {self.path} could not be read ({problem}). It was kept "
                       f"as {aside}, untouched; starting fresh.")
        return fresh()

    def _save(self, record):
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(record, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise


def _shape_problem(record):
    if not isinstance(record, dict):
        return f"expected an object, found {type(record).__name__}"
    for key in ("cards", "badges"):
        if not isinstance(record.get(key), dict):
            return f"{key!r} is missing or not an object"
    return None
