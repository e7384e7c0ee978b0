"""Jobs from a YAML spec: the spec, its checks and errors, templating, loading and the runner."""

import importlib
import warnings

from .loading import (
    job_folders,
    load_job,
    load_spec,
    parse_model_options,
    parse_set_options,
    read_dotenv,
    read_yaml,
)
from .problems import Problem, SpecError
from .resume import ResumeError, Resumption, fast_forward, prepare_resume, recorded_result
from .runner import JobResult, JobRunner, JobStatus, job_record, job_status, spec_digest
from .spec import GOAL_STEP, Budget, Executor, Job, Step

__all__ = [
    "GOAL_STEP",
    "Budget",
    "Executor",
    "Job",
    "JobResult",
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


_MOVED = {
    "WorkerRecipe": ("orchestrator.ray", "WorkerRecipe"),
    "job_executor": ("orchestrator.planner", "executor_for"),
}


def __getattr__(name: str) -> object:
    """Names that moved out of `orchestrator.jobs` (Ray is an optional part of its own now):
    still found here for one release, with a DeprecationWarning."""
    if name not in _MOVED:
        raise AttributeError(f"module 'orchestrator.jobs' has no attribute {name!r}")
    module, attribute = _MOVED[name]
    warnings.warn(
        f"orchestrator.jobs.{name} is now {module}.{attribute}", DeprecationWarning, stacklevel=2
    )
    return getattr(importlib.import_module(module), attribute)
