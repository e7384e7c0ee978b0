"""Scoring one run: what it produced (`RunRecord`) held to each check of its case (`Score`).

Checks read the run's output, the files in its workspace, and its trajectory as the trace
recorded it (skills loaded, tools called, forks, model calls), and its spend. A check's texts
may name the case's values: `{expected.NAME}`, `{inputs.NAME}`. A Python check is the
user's function, called in a sandboxed process (python_checks.py); a judge check asks a
model (judge.py).
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..agent.waiting import DENIED_BY_POLICY
from ..events import (
    Compact,
    Fork,
    InputAnswered,
    InputRequest,
    InputRequested,
    MessageEvent,
    ModelCall,
    SkillLoaded,
    ToolStart,
)
from ..messages import Usage
from ..security import is_inside
from ..security.inventory import reads_no_configuration
from ..trace import read_trace
from .spec import TEMPLATE, Case, DataCheck, FileCheck, JsonPathCheck, Scorer, ToolErrorsCheck


class Score(BaseModel):
    """How a run fared on one check: passed or not, a score from 0 to 1, and why."""

    name: str
    kind: str = "python"
    passed: bool
    score: float
    reason: str = ""
    implicit: bool = False
    """The status check a run is held to when its eval gives none (`completed`): counted in
    the run's pass, not among benchmark.json's expectations."""


@dataclass(frozen=True)
class ToolError:
    """A tool call of the run that failed: the tool, the kind of failure, its first line."""

    agent: str
    tool: str
    kind: str
    text: str

    def __str__(self) -> str:
        return f"{self.tool} [{self.kind}] {self.text}".rstrip()


NOT_THE_TOOLS_FAILURE = frozenset({"skipped", "aborted"})
"""Calls the run never let finish (cancelled, the budget spent, the answer already given):
the run's status says why; the tool did not fail."""


@dataclass
class RunRecord:
    """One run of one case in one variant, as its checks see it."""

    variant: str
    case: Case
    repeat: int
    status: str
    output: str
    workspace: Path
    seconds: float
    usage: Usage = field(default_factory=Usage)
    cost: float | None = None
    trace: Path | None = None
    task: str = ""
    """What the job was asked (its goal, or its output step's task)."""
    data: Any = None
    """The output step's validated structured answer (JSON values); None without one."""
    skills_loaded: list[str] = field(default_factory=list)
    tools_called: list[str] = field(default_factory=list)
    forks: int = 0
    steps: int = 0
    compactions: int = 0
    """How many times an agent of the run compacted its conversation (docs/context-window.md)."""
    tool_errors: list[ToolError] = field(default_factory=list)
    denied_input: list[str] = field(default_factory=list)
    """Calls that needed a person, denied by the run's `on_input: deny` (agent/waiting.py)."""
    """The tool calls that failed, every agent's, in the order their results came."""

    def read_trajectory(self) -> None:
        """Fill in the trajectory from the run's trace."""
        if self.trace is None or not self.trace.is_file():
            return
        asked: dict[str, InputRequest] = {}
        for event in read_trace(self.trace):
            if isinstance(event, SkillLoaded):
                self.skills_loaded.append(event.skill)
            elif isinstance(event, ToolStart) and event.name is not None:
                self.tools_called.append(event.name)
            elif isinstance(event, Fork) and event.agent != "job":  # the job's steps are no fork
                self.forks += 1
            elif isinstance(event, ModelCall):
                self.steps += 1
            elif isinstance(event, Compact):
                self.compactions += 1
            elif isinstance(event, InputRequested):
                asked[event.request.id] = event.request
            elif isinstance(event, InputAnswered) and event.answer.by == DENIED_BY_POLICY:
                request = asked.get(event.answer.id)
                what = request.tool or request.kind if request is not None else "a request"
                self.denied_input.append(f"{event.agent}: {what} ({event.answer.id})")
            elif isinstance(event, MessageEvent) and (failed := _tool_error(event)) is not None:
                self.tool_errors.append(failed)


def _tool_error(event: MessageEvent) -> ToolError | None:
    """The failed tool call a trace's `message` event answers, if it does."""
    message = event.message
    if message.role != "tool" or not message.is_error:
        return None
    kind = message.error_type or "error"
    if kind in NOT_THE_TOOLS_FAILURE:
        return None
    lines = (message.content or "").strip().splitlines()
    first = lines[0] if lines else ""
    shown = first if len(first) <= 100 else first[:97] + "..."
    return ToolError(event.agent, message.name or "?", kind, shown)


Grade = Callable[[Scorer, RunRecord], Awaitable[Score]]
"""How a judge check is graded (judge.py), handed in by the runner."""
CallCheck = Callable[[str, RunRecord], Awaitable[Any]]
"""How a `python:` check's function is called (python_checks.py), handed in by the runner:
what it returned for the run."""


class CheckFailed(Exception):
    """A check that gave no verdict: it raised, timed out, or returned nothing usable; the
    check then fails, with this as its reason."""


def render(text: str, case: Case) -> str:
    """`text` with the case's `{expected.NAME}` and `{inputs.NAME}` filled in."""

    def value(match: re.Match[str]) -> str:
        source: Mapping[str, Any] = case.expected if match[1] == "expected" else case.inputs
        found = source.get(match[2])
        return found if isinstance(found, str) else json.dumps(found)

    return TEMPLATE.sub(value, text)


async def score(
    scorer: Scorer,
    run: RunRecord,
    call_check: CallCheck | None,
    grade: Grade | None,
) -> Score:
    """Hold `run` to `scorer`. A check that raises scores 0, with the error as its reason."""
    try:
        if scorer.judge is not None:
            if grade is None:
                return _score(scorer, False, "no judge model for this eval")
            return await grade(scorer, run)
        if scorer.python is not None:
            if call_check is None:
                return _score(scorer, False, "no way to run Python checks here")
            return _python(scorer, await call_check(scorer.python, run))
        passed, reason = _check(scorer, run)
    except CheckFailed as exc:
        return _score(scorer, False, str(exc))
    except Exception as exc:  # a check that fails to run fails, and says why
        return _score(scorer, False, f"{type(exc).__name__}: {exc}")
    return _score(scorer, passed, reason)


def _score(scorer: Scorer, passed: bool, reason: str) -> Score:
    return Score(
        name=scorer.label, kind=scorer.kind, passed=passed, score=float(passed), reason=reason
    )


def _check(scorer: Scorer, run: RunRecord) -> tuple[bool, str]:  # noqa: C901 - one branch a kind
    case, output = run.case, run.output
    if scorer.status is not None:
        return run.status == scorer.status, f"ended {run.status}"
    if scorer.equals is not None:
        want = render(scorer.equals, case)
        return output.strip() == want.strip(), _shown(output)
    if scorer.contains is not None:
        return _contains(output, scorer.contains, case)
    if scorer.not_contains is not None:
        found, reason = _contains(output, scorer.not_contains, case, every=False)
        return not found, reason
    if scorer.regex is not None:
        pattern = render(scorer.regex, case)
        return re.search(pattern, output, re.MULTILINE) is not None, _shown(output)
    if scorer.json_path is not None:
        return _json_path(scorer.json_path, output, case)
    if scorer.json_schema is not None:
        return _json_schema(scorer.json_schema, output)
    if scorer.data is not None:
        return _data(scorer.data, run)
    if scorer.file is not None:
        return _file(scorer.file, run)
    if scorer.skills_loaded is not None:
        return _names(scorer.skills_loaded, run.skills_loaded, "loaded", want=True)
    if scorer.skills_not_loaded is not None:
        return _names(scorer.skills_not_loaded, run.skills_loaded, "loaded", want=False)
    if scorer.tools_called is not None:
        return _names(scorer.tools_called, run.tools_called, "called", want=True)
    if scorer.tools_not_called is not None:
        return _names(scorer.tools_not_called, run.tools_called, "called", want=False)
    if scorer.forks is not None:
        return scorer.forks.holds(run.forks), f"{run.forks} forks (want {scorer.forks})"
    if scorer.steps is not None:
        return scorer.steps.holds(run.steps), f"{run.steps} model calls (want {scorer.steps})"
    if scorer.max_tokens is not None:
        used = run.usage.total_tokens
        return used <= scorer.max_tokens, f"{used:,} tokens (at most {scorer.max_tokens:,})"
    if scorer.max_cost_usd is not None:
        if run.cost is None:
            return False, "the run's cost is unknown (its model has no price)"
        return run.cost <= scorer.max_cost_usd, f"${run.cost:.4f} (at most ${scorer.max_cost_usd})"
    if scorer.trigger is not None:
        skill, should = scorer.trigger.skill, scorer.trigger.should_trigger
        fired = triggered(run, skill)
        said = "loaded" if fired else "did not load"
        return fired == should, f"{said} {skill} (should {'' if should else 'not '}load it)"
    if scorer.no_tool_errors is not None:
        return _tool_errors(scorer.no_tool_errors, run)
    if scorer.max_seconds is not None:
        return (
            run.seconds <= scorer.max_seconds,
            f"{run.seconds:.2f} s (at most {scorer.max_seconds})",
        )
    raise ValueError(f"no check of kind {scorer.kind}")


def _tool_errors(check: ToolErrorsCheck | bool, run: RunRecord) -> tuple[bool, str]:
    allow, ignored = (
        (check.allow, set(check.ignore)) if isinstance(check, ToolErrorsCheck) else (0, set())
    )
    counted = [error for error in run.tool_errors if error.tool not in ignored]
    if not counted:
        return True, "no tool errors"
    count = f"{len(counted)} tool error{'s' if len(counted) != 1 else ''} (at most {allow})"
    return len(counted) <= allow, f"{count}: {'; '.join(map(str, counted))}"


def triggered(run: RunRecord, skill: str) -> bool:
    """Whether the run loaded `skill`, or called one of its tools (eager disclosure)."""
    prefix = f"{skill}__"
    return skill in run.skills_loaded or any(t.startswith(prefix) for t in run.tools_called)


def _shown(text: str) -> str:
    line = " ".join(text.split())
    return f"output: {line[:77]}..." if len(line) > 80 else f"output: {line}"


def _contains(
    text: str, wanted: str | list[str], case: Case, *, every: bool = True
) -> tuple[bool, str]:
    needles = [render(w, case) for w in ([wanted] if isinstance(wanted, str) else wanted)]
    found = [n for n in needles if n in text]
    missing = [n for n in needles if n not in text]
    if every:
        return not missing, f"missing: {', '.join(map(repr, missing))}" if missing else "all found"
    return bool(found), f"found: {', '.join(map(repr, found))}" if found else "none found"


def _names(wanted: list[str], seen: list[str], verb: str, *, want: bool) -> tuple[bool, str]:
    if want:
        missing = [name for name in wanted if name not in seen]
        return not missing, f"not {verb}: {', '.join(missing)}" if missing else f"all {verb}"
    present = [name for name in wanted if name in seen]
    return not present, f"{verb}: {', '.join(present)}" if present else f"none {verb}"


_STEP = re.compile(r"\.([A-Za-z_][\w-]*)|\[(\d+)\]|\[['\"]([^'\"]+)['\"]\]")


def json_path(value: Any, path: str) -> tuple[bool, Any]:
    """The value at `path` (`$.a.b[0]`, `$['odd key']`) in `value`: (found, value)."""
    rest = path.strip()
    rest = rest[1:] if rest.startswith("$") else rest
    rest = rest if rest.startswith((".", "[")) or not rest else f".{rest}"
    position = 0
    while position < len(rest):
        match = _STEP.match(rest, position)
        if match is None:
            raise ValueError(f"cannot read the JSON path {path!r} at {rest[position:]!r}")
        key, index, quoted = match.groups()
        position = match.end()
        if index is not None:
            if not isinstance(value, list) or int(index) >= len(value):
                return False, None
            value = value[int(index)]
        else:
            name = key if key is not None else quoted
            if not isinstance(value, dict) or name not in value:
                return False, None
            value = value[name]
    return True, value


def parse_output(text: str) -> Any:
    """The output as JSON; a fenced ```json block in it counts too."""
    stripped = text.strip()
    fenced = re.search(r"```(?:json)?\s*\n(.*?)```", stripped, re.DOTALL)
    return json.loads(fenced[1] if fenced and not stripped.startswith(("{", "[")) else stripped)


def _json_path(check: JsonPathCheck, output: str, case: Case) -> tuple[bool, str]:
    found, value = json_path(parse_output(output), check.path)
    if not found:
        return False, f"{check.path} is not in the output"
    if check.equals is None:
        return True, f"{check.path} = {json.dumps(value)}"
    want = render(check.equals, case) if isinstance(check.equals, str) else check.equals
    return _compared(value, want, f"{check.path} = {json.dumps(value)}")


def _compared(value: Any, want: Any, shown: str) -> tuple[bool, str]:
    """Whether `value` is `want`; the reason says what was found, and what was expected
    when it is not."""
    if _same(value, want):
        return True, shown
    return False, f"{shown}, expected {json.dumps(want)}"


def _same(value: Any, want: Any) -> bool:
    """`value` is `want`, or (`want` rendered from a template) its JSON text is."""
    return value == want or (
        isinstance(want, str) and not isinstance(value, str) and json.dumps(value) == want
    )


def _data(check: DataCheck, run: RunRecord) -> tuple[bool, str]:
    if run.data is None:
        return False, f"the run has no validated structured answer (it ended {run.status})"
    found, value = json_path(run.data, check.path)
    if not found:
        return False, f"{check.path} is not in the answer"
    shown = f"{check.path} = {json.dumps(value)}"
    if check.json_schema is not None:
        passed, reason = _schema_holds(check.json_schema, value)
        return passed, f"{check.path}: {reason}"
    if check.equals is None:
        return True, shown
    want = render(check.equals, run.case) if isinstance(check.equals, str) else check.equals
    return _compared(value, want, shown)


def _json_schema(schema: dict[str, Any], output: str) -> tuple[bool, str]:
    return _schema_holds(schema, parse_output(output))


def _schema_holds(schema: dict[str, Any], value: Any) -> tuple[bool, str]:
    jsonschema: Any = importlib.import_module("jsonschema")
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
    if not errors:
        return True, "matches the schema"
    first = errors[0]
    where = "/".join(map(str, first.path)) or "(the whole output)"
    return False, f"{where}: {first.message}"


@reads_no_configuration(
    "a file check reads a file of the run's own workspace, confined to it, after the run"
)
def _file(check: FileCheck, run: RunRecord) -> tuple[bool, str]:
    root = run.workspace.resolve()
    path = (root / render(check.path, run.case)).resolve()
    if not is_inside(root, path):
        return False, f"{check.path} is outside the run's workspace"
    if not path.is_file():
        return not check.exists, f"{check.path} {'does not exist' if check.exists else 'is absent'}"
    if not check.exists:
        return False, f"{check.path} exists"
    text = path.read_text(encoding="utf-8", errors="replace")
    if check.equals is not None and text.strip() != render(check.equals, run.case).strip():
        return False, f"{check.path}: {_shown(text)}"
    if check.contains is not None:
        found, reason = _contains(text, check.contains, run.case)
        if not found:
            return False, f"{check.path}: {reason}"
    if check.regex is not None and not re.search(render(check.regex, run.case), text, re.MULTILINE):
        return False, f"{check.path} does not match {check.regex!r}"
    return True, f"{check.path} as expected"


def _python(scorer: Scorer, value: Any) -> Score:
    if isinstance(value, Score):
        return value.model_copy(update={"name": scorer.label, "kind": "python"})
    if isinstance(value, bool):
        return Score(name=scorer.label, passed=value, score=float(value))
    if isinstance(value, int | float):
        points = max(0.0, min(1.0, float(value)))
        return Score(name=scorer.label, passed=points >= 0.5, score=points)
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], bool | int | float):
        points = max(0.0, min(1.0, float(value[0])))
        return Score(name=scorer.label, passed=points >= 0.5, score=points, reason=str(value[1]))
    raise TypeError(
        f"{scorer.python} returned {type(value).__name__}; expected a bool, a number from 0 "
        "to 1, a (score, reason) pair or a Score"
    )
