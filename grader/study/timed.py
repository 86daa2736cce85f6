"""Timed challenge sets: five problems against the clock, limited attempts, a badge for all five.

A set is data: ``grader/content/timed/<topic>.json`` with a ``badge`` name, ``seconds`` per
problem (default 120), ``attempts`` per problem (default 2) and five ``problems``, one of
each kind: predict, concept, hyperparameter, debug, metrics. Each problem has ``id``,
``kind``, ``level``, ``title``, ``question``, ``choices``, ``answer``, ``hint`` and
``explanation``, and may show ``code`` (a predict problem's program is run by the test
suite, which checks its key).

The clock starts when a problem is opened, and its deadline is saved with it: a restart, or
the set shown again with another ``seconds``, never reopens a problem whose time ran out or
whose answer was shown. A set played with a changed clock is practice and earns no badge.
The countdown in the widget is driven by the browser (a hidden :class:`Ticker` ticks once a
second while a problem is open, from whenever its view is on the page), so the kernel is
never blocked; the time itself is read from :func:`time.time`, which a test can replace.
"""

import datetime
import html
import time

import anywidget
import ipywidgets as w
import traitlets

from ..content import load
from .progress import Progress
from .quiz import Choices

KIND_NAMES = {"predict": "Predict the output", "concept": "Concept", "debug": "Debug",
              "hyperparameter": "Hyperparameter", "metrics": "Metrics"}
# Drawn inline, so it shows where no emoji font is installed (most hub images).
MEDAL = ('<svg width="14" height="16" viewBox="0 0 14 16" aria-hidden="true" style="vertical-align:-2px">'
         '<path d="M3 0h3l1 4 1-4h3l-2.5 6h-3z" fill="#1565c0"/>'
         '<circle cx="7" cy="10.5" r="5" fill="#f9a825" stroke="#8d6e00"/></svg>')
class Ticker(anywidget.AnyWidget):
    """Ticks once a second (``tick`` counts up) while ``running``, driven by the page.

    Started whenever its view appears, a kernel restart included: ipywidgets' ``Play`` starts
    only when ``playing`` changes under a view already shown, so a set rebuilt after a restart
    with a problem open stood still.
    """

    _esm = """
    function render({ model, el }) {
      el.style.display = "none";
      const timer = setInterval(() => {
        if (!model.get("running")) return;
        model.set("tick", model.get("tick") + 1);
        model.save_changes();
      }, 1000);
      return () => clearInterval(timer);
    }
    export default { render };
    """
    running = traitlets.Bool(False).tag(sync=True)
    tick = traitlets.Int(0).tag(sync=True)


class Attempt:
    """One problem under the clock: ``answer`` it before time and attempts run out.

    >>> t = [0.0]
    >>> a = Attempt({"answer": 1}, seconds=120, attempts=2, clock=lambda: t[0])
    >>> a.start(); a.answer(0), a.left
    ('wrong', 1)
    >>> t[0] = 121; a.answer(1), a.remaining()
    ('time', 0)
    """

    def __init__(self, problem, seconds=120, attempts=2, clock=time.time, practice=False):
        self.problem, self.seconds, self.left, self.clock = problem, seconds, attempts, clock
        self.started = self.deadline = self.ended = None  # ended: when it was solved or ran out of attempts
        self.solved = False
        self.practice = practice  # opened with a clock of the learner's choosing: no badge

    def start(self):
        if self.started is None:
            self.started = self.clock()
            self.deadline = self.started + self.seconds

    def remaining(self):
        """Whole seconds left (the full time before the problem is opened)."""
        if self.started is None:
            return self.seconds
        return max(0, int(self.deadline - self.clock() + 0.999))

    @property
    def over(self):
        return self.solved or self.left == 0 or self.remaining() == 0

    def status(self):
        """In words: 'not started', 'N attempts left', 'solved', "time's up" or 'no attempts left'."""
        if self.solved:
            return "solved"
        if self.started is None:
            return "not started"
        if self.left == 0:
            return "no attempts left"
        if self.remaining() == 0:
            return "time's up"
        return f"{self.left} attempt{'s' * (self.left != 1)} left"

    def used(self):
        """Seconds spent on it so far (at most its time)."""
        return 0 if self.started is None else (self.ended or min(self.deadline, self.clock())) - self.started

    def saved(self):
        return {"started": self.started, "deadline": self.deadline, "ended": self.ended, "left": self.left,
                "solved": self.solved, "practice": self.practice}

    def restore(self, saved):
        """Take up a saved attempt: its deadline, whatever clock the set is shown with now."""
        self.started, self.left, self.solved = saved["started"], saved["left"], saved["solved"]
        if self.started is not None:
            self.deadline = saved.get("deadline") or self.started + self.seconds
            self.practice, self.ended = saved.get("practice", False), saved.get("ended")

    def answer(self, choice):
        """'right', 'wrong' (one attempt used), 'time' (too late) or 'over' (already done)."""
        self.start()
        if self.solved or self.left == 0:
            return "over"
        if self.remaining() == 0:
            return "time"
        if choice == self.problem["answer"]:
            self.solved, self.ended = True, self.clock()
            return "right"
        self.left -= 1
        if not self.left:
            self.ended = self.clock()
        return "wrong"


class ChallengeSet:
    """A timed set shown one problem at a time, with a live countdown and a badge.

    A wrong answer gets a nudge (the hint) and the attempts left; the explanation comes once
    the problem is closed (solved, out of attempts or out of time). Attempts and clocks are
    saved with the progress, so a restarted kernel picks the set up where it was. When every
    problem is closed, a summary gives the score, the time used, the badge (earned or not)
    and what to review.

    >>> t = [0.0]
    >>> s = ChallengeSet(load("timed", "foundations"), clock=lambda: t[0], progress=None)
    >>> [s.submit(i, p["answer"]) for i, p in enumerate(s.set["problems"])]
    ['right', 'right', 'right', 'right', 'right']
    >>> s.earned
    True
    """

    def __init__(self, challenge_set, clock=time.time, progress=None, practice=False):
        self.set = challenge_set
        self.progress = progress
        self.practice = practice
        self.attempts = [Attempt(p, challenge_set["seconds"], challenge_set["attempts"], clock, practice)
                         for p in challenge_set["problems"]]
        notice = ""
        if progress is not None:  # a restarted kernel picks up the attempts and clocks
            record, notice = progress.read(), progress.notice  # a file set aside is said at once
            for attempt, saved in zip(self.attempts, record.get("timed", {}).get(challenge_set["id"], [])):
                attempt.restore(saved)
        self.index = 0
        self.reported = set()  # problems whose time-out has been shown

        self.header, self.clock_label, self.body = w.HTML(), w.HTML(), w.HTML()
        self.choices = Choices()
        self.start_button = w.Button(description="Start", button_style="success")
        self.submit_button = w.Button(description="Submit", button_style="primary")
        self.hint_button = w.Button(description="Hint")
        self.prev_button, self.next_button = w.Button(description="◀"), w.Button(description="▶")
        self.feedback = w.HTML()
        self.badge = w.HTML(html.escape(notice))
        self.opening = self.badge.value  # what the file said on opening; the first save makes it past
        self.summary = w.HTML()
        # Ticks in the browser once a second; each tick only redraws, the kernel never waits.
        self.ticker = Ticker()
        for widget, css in [(self.clock_label, "timed-clock"), (self.feedback, "timed-feedback"),
                            (self.start_button, "timed-start"), (self.submit_button, "timed-submit"),
                            (self.hint_button, "timed-hint"), (self.next_button, "timed-next"),
                            (self.badge, "timed-badge"), (self.header, "timed-header"),
                            (self.summary, "timed-summary")]:
            widget.add_class(css)
        self.start_button.on_click(lambda _: self.open(self.index))
        self.submit_button.on_click(lambda _: self.submit(self.index, self.choices.index))
        self.hint_button.on_click(lambda _: self._hint())
        self.prev_button.on_click(lambda _: self.show(self.index - 1))
        self.next_button.on_click(lambda _: self.show(self.index + 1))
        self.ticker.observe(lambda _: self._tick(), names="tick")
        seconds = f"{challenge_set['seconds'] // 60}:{challenge_set['seconds'] % 60:02d}"
        intro = ("<b>Practice</b> on a clock of your choosing: no badge. " if practice else
                 f"<b>{MEDAL} {html.escape(challenge_set['badge'])}</b>: answer all five to earn the badge. ")
        self.widget = w.VBox([
            w.HTML(f"{intro}{seconds} and {challenge_set['attempts']} attempts per problem; the explanation comes "
                   f"once a problem is closed, and a closed problem stays closed."),
            w.HBox([self.header, self.clock_label]), self.body, self.choices,
            w.HBox([self.start_button, self.submit_button, self.hint_button,
                    self.prev_button, self.next_button]),
            self.feedback, self.badge, self.summary, self.ticker])
        self.show(0)
        self._award()
        if any(a.started is not None and not a.over for a in self.attempts):
            self.ticker.running = True  # a problem opened before a restart: its clock runs on

    @property
    def earned(self):
        """Every problem solved, none of them on a clock of the learner's choosing."""
        return all(a.solved and not a.practice for a in self.attempts)

    def open(self, i):
        """Show problem ``i`` and start its clock."""
        self.show(i)
        self.attempts[i].start()
        self._save()
        self.ticker.running = True
        self._render()

    def show(self, i):
        """Show problem ``i`` without starting its clock."""
        self.index = i % len(self.attempts)
        problem = self.set["problems"][self.index]
        self.choices.options = problem["choices"]
        self.choices.index = None
        self.feedback.value = ""
        code = f"<pre>{html.escape(problem['code'])}</pre>" if problem.get("code") else ""
        self.body.value = f"<p>{problem['question']}</p>{code}"
        self._render()

    def submit(self, i, choice):
        """Answer problem ``i`` with choice index ``choice``; returns the outcome."""
        attempt, problem = self.attempts[i], self.set["problems"][i]
        if choice is None:
            self.feedback.value = "<i>Pick an answer first.</i>"
            return None
        outcome = attempt.answer(choice)
        if outcome == "right":
            text = f"<span style='color:green'>✔ Right.</span> {problem['explanation']}"
        elif outcome == "wrong" and attempt.left:
            text = (f"<span style='color:#c62828'>✘ Not this one.</span> {self._left(attempt)} "
                    f"<i>A nudge: {problem['hint']}</i>")
        elif outcome == "wrong":
            text = f"<span style='color:#c62828'>✘ Not this one.</span> No attempts left. {self._reveal(problem)}"
        elif outcome == "time":
            text = f"<b>Time's up.</b> {self._reveal(problem)}"
        else:
            text = f"This problem is closed. {self._reveal(problem)}"
        self.feedback.value = text
        self._save()
        self._award()
        self._render()
        return outcome

    def _reveal(self, problem):
        right = problem["choices"][problem["answer"]]
        return f"The answer: “{html.escape(right)}”. {problem['explanation']}"

    @staticmethod
    def _left(attempt):
        return f"{attempt.left} attempt{'s' * (attempt.left != 1)} left." if attempt.left else "No attempts left."

    def _hint(self):
        self.feedback.value = f"<b>Hint:</b> {self.set['problems'][self.index]['hint']}"

    def _save(self):
        if self.progress is not None:
            self.progress.update(lambda r: r.setdefault("timed", {}).__setitem__(
                self.set["id"], [a.saved() for a in self.attempts]))
            if self.badge.value == self.opening:
                self.badge.value = ""

    def _award(self):
        """Once every problem is closed: the summary, and the badge if every one was solved."""
        if not all(a.over for a in self.attempts):
            return
        if self.earned:
            self.badge.value = f"<b>{MEDAL} Badge earned: {html.escape(self.set['badge'])}</b>"
            if self.progress is not None:
                today = datetime.date.today().isoformat()
                self.progress.update(lambda r: r["badges"].setdefault(self.set["id"], today))
                if self.progress.notice:
                    self.badge.value += f"<br>{html.escape(self.progress.notice)}"
        solved = sum(a.solved for a in self.attempts)
        used = round(sum(a.used() for a in self.attempts))
        review = [html.escape(p["title"]) for p, a in zip(self.set["problems"], self.attempts) if not a.solved]
        self.summary.value = (
            f"<b>Set finished: {solved} of {len(self.attempts)} solved</b> in {used // 60}:{used % 60:02d}. "
            + (f"Badge earned: {html.escape(self.set['badge'])}." if self.earned else
               "No badge: practice, on a clock of your choosing." if not review else
               f"Badge not earned (it needs all {len(self.attempts)}). To review: {'; '.join(review)}."))

    def _tick(self):
        attempt = self.attempts[self.index]
        if attempt.started is not None and attempt.remaining() == 0 and not attempt.solved \
                and attempt.left and self.index not in self.reported:
            self.reported.add(self.index)
            problem = self.set["problems"][self.index]
            self.feedback.value = f"<b>Time's up.</b> {self._reveal(problem)}"
            self._award()
        if not any(a.started is not None and not a.over for a in self.attempts):
            self.ticker.running = False  # nothing is running: stop ticking
        self._render()

    def _render(self):
        problem, attempt = self.set["problems"][self.index], self.attempts[self.index]
        self.header.value = (f"<b>{self.index + 1}/{len(self.attempts)} · {KIND_NAMES[problem['kind']]}"
                             f"</b> · {problem['level']} · {html.escape(problem['title'])}")
        left = attempt.remaining()
        self.clock_label.value = ("&nbsp;" + (f"Time left <b>{left // 60}:{left % 60:02d}</b> · " if not attempt.over
                                              else "Closed · ") + attempt.status().capitalize())
        self.start_button.disabled = attempt.started is not None
        self.submit_button.disabled = attempt.started is None or attempt.over

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)


def show_timed(topic, seconds=None, progress="default"):
    """A topic's timed challenge set; ``seconds`` overrides the time per problem, for practice (no badge).

    Earned badges are saved in the progress file (``progress=None`` keeps nothing).

    >>> show_timed("ddp", seconds=30, progress=None).attempts[0].seconds
    30
    """
    challenge_set = load("timed", topic)
    practice = bool(seconds) and seconds != challenge_set["seconds"]
    if practice:
        challenge_set["seconds"] = seconds
    return ChallengeSet(challenge_set, progress=Progress() if progress == "default" else progress, practice=practice)
