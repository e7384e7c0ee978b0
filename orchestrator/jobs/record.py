"""What a job's trace records of the job itself, so that `resume` can load it again.

`job_start` carries the spec file, its sha256, the inputs as resolved, the model (its name, and
the options it was given besides the name, `model_options`), whether the home folders were
searched (`user_skills`) and the output step; `resume` loads the same spec with the same
inputs and model, and refuses a spec that changed since (unless forced).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from .spec import Job


def spec_digest(path: str | Path) -> str:
    """The sha256 of a spec file's bytes, in hex."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def job_record(job: Job, *, user_skills: bool = False) -> dict[str, Any]:
    """The fields `job_start` adds for `resume`: spec, spec_sha256, inputs, model,
    model_options, user_skills (when set) and output_step. No key is among them: settings
    name the variable that holds one (`api_key_env`), never its value."""
    source = job.source
    spec = str(Path(source).resolve()) if source is not None else None
    digest = spec_digest(source) if source is not None and Path(source).is_file() else None
    return {
        "spec": spec,
        "spec_sha256": digest,
        "inputs": {name: value for name, value in job.inputs.items() if value is not None},
        "model": job.model.name,
        "model_options": job.model.options(),
        "permissions": permissions_record(job),
        **({"user_skills": True} if user_skills else {}),
        "output_step": job.output_step,
    }


def permissions_record(job: Job) -> dict[str, Any]:
    """The job's permissions as its spec (and the flags) gave them, as JSON values."""
    return job.permissions.model_dump(mode="json")
