"""The error tree. Control flow uses these few exceptions; each is caught in one place.

    OrchestratorError
    ├── ConfigError              bad user input: a model string, an option, a file
    │   ├── GraphError           tasks that do not form a DAG (tasks/scheduler.py)
    │   ├── SpecError            an invalid job spec, every problem by field path (`Problem`)
    │   └── TraceKeyRefused      the trace key is open to other users (security/signing.py)
    ├── ModelError               a model call failed (adapters map httpx errors to these)
    │   ├── RetryableModelError  429, 5xx, overloaded, dropped stream: worth another attempt
    │   ├── ContextWindowExceeded  the conversation does not fit the model's context window
    │   ├── ScriptExhausted      the scripted model has no turn left for an agent
    │   └── UntrustedUsage       a provider reported usage too far off to believe
    ├── NoOutput                 `RunResult.output` of a typed run that has no valid answer
    └── ToolError                raised by a tool: its message goes back to the model as is
        ├── PermissionDenied     the run's permissions forbid what the tool was asked to do
        └── ToolInfrastructureError  the tool's machinery (a server, a process) failed, not the tool

Warnings go through `warnings` (and the CLI prints them on stderr): `SafetyWarning` for a
skill whose code a run will not import and a definition field that is dropped.

Tool failures never escape the loop: they become error observations (see `execution.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


class OrchestratorError(Exception):
    """Base of every error this package raises on purpose."""


class ConfigError(OrchestratorError):
    """Invalid configuration or input given by the user."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a job spec: where (`steps[1].task`, or "" for the file) and
    what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class SpecError(ConfigError):
    """A job spec is invalid; `problems` lists every reason found, `source` is its file.
    (jobs/problems.py says pydantic's errors as problems.)"""

    def __init__(
        self,
        source: str | Path | None,
        problems: Sequence[Problem],
        *,
        warnings: Sequence[str] = (),
    ) -> None:
        self.source = source
        self.problems = list(problems)
        self.warnings = list(warnings)
        """What only might go wrong, found beside the problems (a job's check says both)."""
        super().__init__(self._render())

    def _render(self) -> str:
        where = f"{self.source}" if self.source is not None else "job spec"
        if len(self.problems) == 1:
            problem = self.problems[0]
            # A flag's problem is the command line's, not the file's.
            return str(problem) if problem.path.startswith("-") else f"{where}: {problem}"
        lines = [f"{where}: {len(self.problems)} problems"]
        lines.extend(f"  - {problem}" for problem in self.problems)
        return "\n".join(lines)


class NoOutput(OrchestratorError):
    """`RunResult.output` was read for a run given an output type that ended without a valid
    answer (`output_invalid`, `error`, `cancelled`...): the message names the status and why.
    The answer as written is `RunResult.text`."""


class RunHalted(OrchestratorError):
    """An extension ends the run before its next model call (`Extension.before_call`): the
    run ends as `error`, and the message says why."""


class ModelError(OrchestratorError):
    """A model call failed. `provider` and `status` are set when known."""

    def __init__(self, message: str, *, provider: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status


class RetryableModelError(ModelError):
    """A model call failed in a way that a later attempt may not."""

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, provider=provider, status=status)
        self.retry_after = retry_after


class ContextWindowExceeded(ModelError):
    """The request does not fit the model's context window: the provider refused it, or the
    loop saw that even a minimal answer would not fit. `window` and `prompt_tokens` are set
    when known (a provider's refusal often names both)."""

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status: int | None = None,
        window: int | None = None,
        prompt_tokens: int | None = None,
    ) -> None:
        super().__init__(message, provider=provider, status=status)
        self.window = window
        self.prompt_tokens = prompt_tokens


class ScriptExhausted(ModelError):
    """The scripted model was asked for a turn its script does not have."""


class FunctionReplyError(ModelError):
    """A function model's function returned a reply no model could give."""


class UntrustedUsage(ModelError):
    """A provider reported token usage that cannot be right (agent/model_call.py)."""


class ToolError(OrchestratorError):
    """Raised inside a tool to report a failure to the model in the tool's own words."""


class PermissionDenied(ToolError):
    """The run's permissions do not allow this action."""


class SafetyWarning(UserWarning):
    """Something given to a run that its safety rules will not use: a skill whose code will
    not be imported, a definition field that is dropped."""


class ToolInfrastructureError(ToolError):
    """The machinery behind a tool failed (a server would not start, a process died)."""
