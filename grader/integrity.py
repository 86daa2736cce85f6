"""Grading that generic tampering cannot fool: nbgrader preprocessors for autograde.

nbgrader runs a submission and then its test cells in one kernel, so code a student
wrote earlier can change what the tests do: an IPython input transformer can empty every
later cell, a rebound ``checks.check_equal`` can pass anything. Two preprocessors, set in
``nbgrader_config.py`` around nbgrader's ``Execute``, make that score 0 and say why:

- :class:`StampTests` (before execution) scans every cell a student could have written for
  ways to reach into the grading (:func:`scan`), and appends to each test cell, at grading
  time only, a line that prints a fresh random token;
- :class:`CheckStamps` (after execution) fails every test cell whose output lacks its token
  (it did not really run as written) and every test cell after a suspicious cell, with an
  error output that names the reason, then removes the tokens again.

This catches the generic ways in; it does not prove a submission honest. Code that
reaches the kernel by a route the scan does not know (a module of the student's own
written to disk and imported, say) can still interfere; the instructor reads the log.
"""

import ast
import re
import secrets

from nbformat.v4 import new_output
from nbgrader.preprocessors import NbGraderPreprocessor

# What a submission has no business touching: IPython's input and AST transformers, its
# event callbacks and exception hook, Python's tracing hooks.
HOOKS = {
    "input_transformers_cleanup": "registers an IPython input transformer",
    "input_transformers_post": "registers an IPython input transformer",
    "input_transformer_manager": "reaches IPython's input transformers",
    "ast_transformers": "registers an IPython AST transformer",
    "events": "reaches IPython's event callbacks",
    "set_custom_exc": "replaces IPython's exception handler",
    "settrace": "installs a trace function",
    "setprofile": "installs a profile function",
}
# The course's own modules (and Python's builtins): their attributes are not to be rebound.
PROTECTED = {"grader", "checks", "record", "launch", "hardware", "timing", "scaling", "memory", "pipeline",
             "models", "plots", "integrity", "builtins", "__builtins__"}
KEY = "course_integrity"


def _attributes(node):
    """The dotted name of an attribute chain, e.g. ``a.b.c`` for ``a.b.c``."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return list(reversed(parts))


def _course_names(tree):
    """Names a cell binds to the course's modules: ``import grader.checks as c`` binds ``c``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] in ("grader", "builtins")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "grader":
            names |= {a.asname or a.name for a in node.names}
    return names


def scan(source):
    """Reasons why a cell's ``source`` could interfere with the tests run after it, one per finding.

    >>> scan("ip = get_ipython()\\nip.input_transformers_cleanup.append(lambda lines: [])")
    ['line 2: registers an IPython input transformer']
    >>> scan("checks.check_equal = lambda *a, **k: None")
    ['line 1: rebinds checks.check_equal, part of the grading']
    >>> scan("from grader import checks as c\\nsetattr(c, 'check_close', print)")
    ['line 2: changes c with setattr, part of the grading']
    >>> scan("exec('x = ' + str(1))"), scan("x = sorted([3, 1])")
    (['line 1: runs code built at run time (exec)'], [])
    """
    # Magics and shell lines are not Python; blank them out, keeping line numbers.
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return [f"line {n}: {HOOKS[name]}" for n, line in enumerate(lines, 1)
                for name in HOOKS if re.search(rf"\b{name}\b", line)]
    protected = PROTECTED | _course_names(tree)
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute) and node.attr in HOOKS:
            found.append((line, HOOKS[node.attr]))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                dotted = _attributes(target) if isinstance(target, ast.Attribute) else []
                if dotted and dotted[0] in protected:
                    found.append((line, f"rebinds {'.'.join(dotted)}, part of the grading"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name, args = node.func.id, node.args
            owner = _attributes(args[0]) if args else []
            if name in ("setattr", "delattr") and owner and owner[0] in protected:
                found.append((line, f"changes {'.'.join(owner)} with {name}, part of the grading"))
            elif name in ("exec", "eval", "compile") and not (args and isinstance(args[0], ast.Constant)):
                found.append((line, f"runs code built at run time ({name})"))
    return [f"line {line}: {reason}" for line, reason in sorted(set(found))]


def _is_test(cell):
    meta = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "code" and meta.get("grade") and not meta.get("solution")


def _error(reason):
    return new_output("error", ename="GradingIntegrityError", evalue=reason, traceback=[f"GradingIntegrityError: {reason}"])


class StampTests(NbGraderPreprocessor):
    """Before execution: scan the student's cells, and give each test cell a token to print."""

    def preprocess(self, nb, resources):
        suspicious = None
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            if _is_test(cell):
                token = secrets.token_hex(16)
                cell.metadata[KEY] = {"token": token, "suspicious": suspicious}
                cell.source = cell.source.rstrip("\n") + f"\nprint({token!r})  # proof that this test ran"
                continue
            findings = scan(cell.source)
            if findings:
                name = cell.metadata.get("nbgrader", {}).get("grade_id") or f"cell {index + 1}"
                self.log.warning("Grading integrity: %s %s", name, "; ".join(findings))
                if suspicious is None:
                    suspicious = f"{name} {findings[0]}"
        return nb, resources


class CheckStamps(NbGraderPreprocessor):
    """After execution: a test cell scores only if it printed its token and nothing suspicious ran before it."""

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            stamp = cell.metadata.pop(KEY, None)
            if stamp is None:
                continue
            token = stamp["token"]
            cell.source = "\n".join(line for line in cell.source.split("\n") if token not in line)
            printed = False
            for output in cell.outputs:
                if output.output_type == "stream" and token in output.text:
                    printed = True
                    output.text = output.text.replace(f"{token}\n", "").replace(token, "")
            cell.outputs = [o for o in cell.outputs if not (o.output_type == "stream" and o.text == "")]
            if any(o.output_type == "error" for o in cell.outputs):
                continue  # already failed on its own
            reason = None
            if stamp["suspicious"]:
                reason = f"not graded: {stamp['suspicious']}, so the tests after it cannot be trusted"
            elif not printed:
                reason = "this test cell did not run as written (its proof of running is missing)"
            if reason:
                grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
                self.log.warning("Grading integrity: %s scores 0: %s", grade_id, reason)
                cell.outputs.append(_error(reason))
        return nb, resources
