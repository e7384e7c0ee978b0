"""Jobs from a YAML spec: the spec, its checks and errors, templating, loading and the runner."""

from .dotenv import read_dotenv
from .folders import job_folders
from .loading import load_job, load_spec, parse_model_options, parse_set_options, read_yaml
from .problems import Problem, SpecError
from .runner import JobResult, JobRunner, JobStatus, StepAgents, job_status
from .spec import GOAL_STEP, Budget, Job, Step

__all__ = [
    "GOAL_STEP",
    "Budget",
    "Job",
    "JobResult",
    "JobRunner",
    "JobStatus",
    "Problem",
    "SpecError",
    "Step",
    "StepAgents",
    "job_folders",
    "job_status",
    "load_job",
    "load_spec",
    "parse_model_options",
    "parse_set_options",
    "read_dotenv",
    "read_yaml",
]
