"""Jobs from a YAML spec: the spec, its checks and errors, templating, loading and the runner."""

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
