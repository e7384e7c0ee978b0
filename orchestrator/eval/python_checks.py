"""An eval's `python:` checks, run in a sandboxed process.

A check names a function (`checks.py:my_check`, a file beside the eval, or
`package.module:my_check`). An eval file or a skill's `evals.json` comes with the job it
measures, often from someone else, so its code is never imported by the orchestrator's own
process: each call starts a child process in the bubblewrap sandbox (the default backend,
whatever the job's own `sandbox` says, since the job comes from the same place as the
eval), which imports the module, calls the function with the run's `RunRecord` and writes
back what it returned as JSON. Inside: the eval's folder, the run's workspace and trace and
the package read-only, an empty folder of its own writable, no network, the default memory
and process limits and `CHECK_SECONDS` a call.

Where no sandbox can run, an eval with Python checks is refused before it starts, unless
asked to run them unconfined (`EvalOptions(unconfined_checks=True)`, `eval
--unconfined-checks`): each then runs in a plain child process as the user, said loudly.
"""

from __future__ import annotations

import json
import os
import pickle
import stat
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..security import SandboxSettings, SandboxUnavailable
from ..security.inventory import reads_no_configuration
from ..security.sandbox import INSTALL_BUBBLEWRAP, Sandbox, bubblewrap_runs
from ..skills.process import child_environment, run_process
from .scoring import CheckFailed, RunRecord, Score

PACKAGE = Path(__file__).resolve().parents[1]
CHECK_SECONDS = 120.0
"""How long one call of a check may take."""
ANSWER = "answer.json"
MAX_ANSWER = 1_000_000
"""How much of a check's answer is read."""

CALL_CHECK = """\
import importlib, importlib.util, json, pickle, sys
from pathlib import Path
from orchestrator.eval import Score
reference, folder, scratch = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
def answer(value):
    (scratch / "answer.json").write_text(json.dumps(value))  # ANSWER
try:
    where, _, name = reference.rpartition(":")
    if where.endswith(".py"):
        spec = importlib.util.spec_from_file_location("orchestrator_eval_check", folder / where)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    function = getattr(module, name, None)
    if not callable(function):
        raise LookupError(f"{where} has no function {name!r}")
    value = function(pickle.loads((scratch / "run.pickle").read_bytes()))
except Exception as exc:
    answer({"error": f"{type(exc).__name__}: {exc}"})
else:
    returned = type(value).__name__
    if isinstance(value, Score):
        value = {"score": value.model_dump(mode="json")}
    elif isinstance(value, tuple):
        value = {"pair": [value[0], str(value[1])]} if len(value) == 2 else {"unreadable": 0}
    else:
        value = {"value": value}
    try:
        answer(value if "unreadable" not in value else {"unreadable": returned})
    except (TypeError, ValueError):
        answer({"unreadable": returned})
"""
"""Imports a check's module and calls it in the child; writes what it returned as JSON."""


@dataclass(frozen=True)
class PythonCheck:
    """A `python:` check's function: `file.py:function` (from the eval's folder) or
    `package.module:function`."""

    reference: str
    folder: Path

    @property
    def file(self) -> Path | None:
        """The check's file when it names one."""
        where = self.reference.rpartition(":")[0]
        return (self.folder / where).resolve() if where.endswith(".py") else None


def python_check(reference: str, folder: Path) -> PythonCheck:
    """The check `reference` names, read without importing anything; ConfigError when it is
    not of the form `file.py:function` or `module:function`, or its file does not exist."""
    where, sep, name = reference.rpartition(":")
    if not sep or not where or not name:
        raise ConfigError(f"expected file.py:function or module:function, got {reference!r}")
    check = PythonCheck(reference, folder.resolve())
    if check.file is not None and not check.file.is_file():
        raise ConfigError(f"{check.file} does not exist")
    return check


def declared(checks: Iterable[PythonCheck]) -> str:
    """What an eval says before it runs its Python checks: which, and where they run."""
    named = ", ".join(str(c.file) if c.file is not None else c.reference for c in checks)
    return f"this eval runs Python code of its own (its python: checks: {named})"


class CheckSandbox:
    """Where an eval's Python checks run: a sandboxed child process per call, or (only when
    asked, where no sandbox can run) a plain one."""

    def __init__(self, checks: Iterable[PythonCheck], *, unconfined: bool = False) -> None:
        self.checks = list(checks)
        self.settings = SandboxSettings(backend="bubblewrap", seconds=CHECK_SECONDS)
        self.unconfined = False
        failure = bubblewrap_runs() if self.checks else None
        if failure is None:
            return
        if not unconfined:
            raise SandboxUnavailable(
                f"{declared(self.checks)}: they run only in a sandboxed process, and bubblewrap "
                f"cannot run here ({failure.strip()}). Install it ({INSTALL_BUBBLEWRAP}), or, if "
                "you trust them, run them unconfined as you (eval --unconfined-checks, "
                "EvalOptions(unconfined_checks=True))."
            )
        self.unconfined = True

    def describe(self) -> str:
        """Where the checks run, for the eval's start."""
        if self.unconfined:
            return (
                f"{declared(self.checks)}; no sandbox can run here, and they run UNCONFINED "
                "as asked: they can read, write and reach everything this user can"
            )
        return f"{declared(self.checks)}; they run in a sandboxed process (bubblewrap)"

    async def call_reference(self, reference: str, run: RunRecord) -> Any:
        """`call` for the check its `python:` text names (scoring's `CallCheck`)."""
        found = {check.reference: check for check in self.checks}
        if reference not in found:
            raise CheckFailed(f"{reference} is not among this eval's checks")
        return await self.call(found[reference], run)

    async def call(self, check: PythonCheck, run: RunRecord) -> Any:
        """What the check's function returned for `run` (a Score, a pair, or a JSON value),
        or CheckFailed saying why there is none."""
        with tempfile.TemporaryDirectory(prefix="orchestrator-check-") as folder:
            argv, sandbox = self._prepared(check, run, folder)
            env = child_environment({"PYTHONPATH": str(PACKAGE.parent)})
            result = await run_process(
                argv, cwd=Path(folder), env=env, sandbox=sandbox, timeout_seconds=CHECK_SECONDS
            )
            answer = _answer(folder)
        if answer is None:
            what = result.render(CHECK_SECONDS).replace("\n", " ")[-400:]
            raise CheckFailed(f"{check.reference} gave no verdict: {what}")
        return _value(check, answer)

    def _prepared(
        self, check: PythonCheck, run: RunRecord, folder: str
    ) -> tuple[list[str], Sandbox | None]:
        """The child's argv and sandbox, with the run written in its folder for it."""
        scratch = Path(folder).resolve()
        (scratch / "run.pickle").write_bytes(pickle.dumps(run))
        argv = [sys.executable, "-c", CALL_CHECK, check.reference, str(check.folder), folder]
        if self.unconfined:
            return argv, None
        reads = [check.folder, PACKAGE, run.workspace.resolve()]
        reads += [run.trace.resolve()] if run.trace is not None else []
        settings = self.settings.model_copy(update={"read_only": tuple(reads)})
        return argv, Sandbox("bubblewrap", settings, scratch)


@reads_no_configuration("a Python check's answer, written by its sandboxed process")
def _answer(folder: str) -> dict[str, Any] | None:
    """What the child wrote back: a regular file only (never a link it made to a file of
    the host, nor a pipe), read up to a cap."""
    try:
        handle = os.open(Path(folder) / ANSWER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(handle, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            return None
        text = file.read(MAX_ANSWER)
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _value(check: PythonCheck, answer: dict[str, Any]) -> Any:
    if "error" in answer:
        raise CheckFailed(str(answer["error"]))
    if "score" in answer:
        return Score.model_validate(answer["score"])
    if "pair" in answer and isinstance(answer["pair"], list):
        return tuple(answer["pair"])
    if "unreadable" in answer:
        raise CheckFailed(
            f"{check.reference} returned {answer['unreadable']}; expected a bool, a number "
            "from 0 to 1, a (score, reason) pair or a Score"
        )
    return answer.get("value")
