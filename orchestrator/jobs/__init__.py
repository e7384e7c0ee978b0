"""Jobs from a YAML spec: the spec, its checks and errors, templating, loading and the runner.

Resuming (resume.py) is imported on first use (PEP 562): a new run never loads it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..errors import Problem, SpecError
from .loading import (
    job_folders,
    load_job,
    load_spec,
    parse_model_options,
    parse_set_options,
    read_dotenv,
    read_yaml,
)
from .runner import (
    JobCancelled,
    JobResult,
    JobRunner,
    JobStatus,
    job_record,
    job_status,
    spec_digest,
)
from .spec import GOAL_STEP, Budget, Executor, Job, Step, job_schema

if TYPE_CHECKING:
    from .resume import ResumeError, Resumption, fast_forward, prepare_resume, recorded_result

_RESUME = ("ResumeError", "Resumption", "fast_forward", "prepare_resume", "recorded_result")

__all__ = [
    "GOAL_STEP",
    "Budget",
    "Executor",
    "Job",
    "JobResult",
    "JobCancelled",
    "JobRunner",
    "JobStatus",
    "Problem",
    "ResumeError",
    "Resumption",
    "SpecError",
    "Step",
    "fast_forward",
    "job_folders",
    "job_record",
    "job_schema",
    "job_status",
    "load_job",
    "load_spec",
    "parse_model_options",
    "parse_set_options",
    "prepare_resume",
    "read_dotenv",
    "read_yaml",
    "recorded_result",
    "spec_digest",
]


def __getattr__(name: str) -> Any:
    if name not in _RESUME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(".resume", __name__), name)
    globals()[name] = value
    return value
