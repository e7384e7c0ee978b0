"""Jobs from a YAML spec: the spec, its checks and errors, templating, loading and the runner."""

from .dotenv import read_dotenv
from .folders import job_folders
from .loading import load_job, load_spec, parse_model_options, parse_set_options, read_yaml
from .problems import Problem, SpecError
from .record import job_record, spec_digest
from .remote import Remake, WorkerRecipe, job_executor, recipe_for, remote_forks, run_remote
from .resume import ResumeError, Resumption, fast_forward, prepare_resume, recorded_result
from .runner import JobResult, JobRunner, JobStatus, StepAgents, job_status
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
    "Remake",
    "ResumeError",
    "Resumption",
    "SpecError",
    "Step",
    "StepAgents",
    "WorkerRecipe",
    "fast_forward",
    "job_folders",
    "job_executor",
    "job_record",
    "job_status",
    "load_job",
    "load_spec",
    "parse_model_options",
    "parse_set_options",
    "prepare_resume",
    "read_dotenv",
    "read_yaml",
    "recipe_for",
    "recorded_result",
    "remote_forks",
    "run_remote",
    "spec_digest",
]
