"""A class through nbgrader's exchange, as on a hub: real commands, a real exchange directory.

The exchange and the course id come from COURSE_EXCHANGE and COURSE_ID (nbgrader_config.py).
Every command here runs as one OS user, and nbgrader's exchange names a student by the OS
user (or by JUPYTERHUB_USER where that user is `jovyan`, as in Jupyter's Docker images), so
each student gives nbgrader's own `--student=<id>` to `submit` and `fetch_feedback`: the
explicit student id the exchange honours in place of the user name. Each student has a
home of their own (their nbgrader cache, where fetch_feedback finds what they submitted)
holding the course's config in ~/.jupyter, as a hub installs it for everyone.
"""

import csv
import json
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest
from nbgrader.api import Gradebook
from traitlets.config import Config

from conftest import REPO, copy_course, nbgrader, points, scores, submission
from mutants import MUTANTS

LESSON = "00_foundations"  # the lightest lesson: about 8 s a notebook run
WRONG = "rounds_down"      # a mutant of challenge 3 (2 points), caught by a visible test
# What that failed check prints (grader.grading.checks), which the student must see in the feedback.
WRONG_MESSAGE = ("GPUs for 7 B parameters on 80 GB GPUs is not right", "expected: 2", "got:      1",
                 "hint: 7e9 x 16 bytes = 112 GB")


def course_config(monkeypatch, **environ):
    """The Config that nbgrader_config.py builds under the given environment variables."""
    for key in ("COURSE_EXCHANGE", "COURSE_ID"):
        monkeypatch.delenv(key, raising=False)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    config = Config()
    path = REPO / "nbgrader_config.py"
    exec(compile(path.read_text(), str(path), "exec"), {"get_config": lambda: config, "__file__": str(path)})
    return config


def test_exchange_and_course_id_come_from_the_environment(monkeypatch):
    default = course_config(monkeypatch)
    assert default.Exchange.root == "/usr/local/share/nbgrader/exchange"  # nbgrader's own default
    assert default.CourseDirectory.course_id == "multi-gpu-training"
    empty = course_config(monkeypatch, COURSE_EXCHANGE="", COURSE_ID="")
    assert (empty.Exchange.root, empty.CourseDirectory.course_id) == \
        ("/usr/local/share/nbgrader/exchange", "multi-gpu-training")
    hub = course_config(monkeypatch, COURSE_EXCHANGE="/srv/exchange", COURSE_ID="gpu-101")
    assert (hub.Exchange.root, hub.CourseDirectory.course_id) == ("/srv/exchange", "gpu-101")
    # Everything else the config sets is untouched.
    assert hub.Execute.timeout == 120 and hub.OverwriteCells.add_missing_cells is True
    assert hub.CourseDirectory.root == str(REPO)


@pytest.mark.slow
def test_a_class_round_trip_through_the_exchange(tmp_path):
    course = copy_course(tmp_path / "course")
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    exchange.chmod(0o777)  # nbgrader wants the exchange root writable by everyone
    course_id = "gpu-101"
    hub = {"COURSE_EXCHANGE": exchange, "COURSE_ID": course_id}

    def instructor(*args):
        return nbgrader(*args, cwd=course, env=hub)

    students = {"alice": submission(LESSON),  # the solution
                "bob": submission(LESSON, answers={MUTANTS[LESSON][WRONG][0]: MUTANTS[LESSON][WRONG][1].lstrip()})}
    homes = {name: tmp_path / "home" / name for name in students}

    def student(name, *args):
        home = homes[name]
        return nbgrader(*args, cwd=home, env={
            **hub, "HOME": home, "JUPYTER_CONFIG_DIR": home / ".jupyter",
            "JUPYTER_DATA_DIR": home / ".local" / "share" / "jupyter",
            "JUPYTER_CONFIG_PATH": None, "JUPYTERHUB_USER": None})

    def each_student(work):  # the students work at the same time, as a class does
        with ThreadPoolExecutor(len(students)) as pool:
            list(pool.map(work, students))

    instructor("generate_assignment", LESSON, "--force")
    instructor("release_assignment", LESSON)
    assert (exchange / course_id / "outbound" / LESSON / f"{LESSON}.ipynb").is_file()

    def fetch_and_submit(name):
        home = homes[name]
        (home / ".jupyter").mkdir(parents=True)
        shutil.copy(course / "nbgrader_config.py", home / ".jupyter")
        student(name, "fetch_assignment", LESSON)
        fetched = home / LESSON / f"{LESSON}.ipynb"
        assert fetched.read_bytes() == (course / "release" / LESSON / f"{LESSON}.ipynb").read_bytes()
        fetched.write_text(json.dumps(students[name]))
        student(name, "submit", LESSON, f"--student={name}")

    each_student(fetch_and_submit)
    inbound = sorted(p.name.split("+")[0] for p in (exchange / course_id / "inbound").iterdir())
    assert inbound == sorted(students)

    instructor("collect", LESSON)
    for name in students:
        assert (course / "submitted" / name / LESSON / f"{LESSON}.ipynb").is_file()
    instructor("autograde", LESSON)
    instructor("generate_feedback", LESSON)
    instructor("release_feedback", LESSON)
    each_student(lambda name: student(name, "fetch_feedback", LESSON, f"--student={name}"))
    instructor("export")

    full = sum(points(LESSON).values())
    failed = MUTANTS[LESSON][WRONG][0] + "_test"
    expected = {"alice": full, "bob": full - points(LESSON)[failed]}
    assert scores(course, LESSON, "bob")[2] == {**points(LESSON), failed: 0}  # that challenge, no other
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_assignment(LESSON).course_id == course_id
        graded = {name: gb.find_submission(LESSON, name) for name in students}
        assert {name: (sub.score, sub.max_score) for name, sub in graded.items()} == \
            {name: (score, full) for name, score in expected.items()}
    with open(course / "grades.csv", newline="") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f) if row["assignment"] == LESSON}
    assert {name: (float(row["score"]), float(row["max_score"])) for name, row in rows.items()} == \
        {name: (score, full) for name, score in expected.items()}

    feedback = {}
    for name in students:
        found = list((homes[name] / LESSON / "feedback").glob(f"*/{LESSON}.html"))
        assert len(found) == 1, f"{name}'s fetched feedback: {found}"
        feedback[name] = found[0].read_text()
    for line in WRONG_MESSAGE:
        assert line in feedback["bob"], f"bob's feedback does not show {line!r}"
        assert line not in feedback["alice"]
