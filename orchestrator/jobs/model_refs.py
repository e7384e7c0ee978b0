"""The models a job spec names: the job's `model`, each step's `model`, and its `models:` aliases.

Each is a `ModelSettings` (a string is a name alone). A `scripted:` script or a `replay:`
trace resolves against the spec's folder and must exist. Aliases are expanded once the spec is
read whole, over the built-in aliases and the user's alias file, so the job holds only
concrete models and an unknown name is a problem at its field path.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationInfo

from ..errors import ConfigError
from ..models import INHERIT, ModelAliases, ModelSettings
from .problems import Problem

FILE_MODELS = {"scripted": "scripted model's script", "replay": "replayed trace"}
"""Model providers whose target is a file; its path resolves against the spec's folder."""


def spec_model(settings: ModelSettings, info: ValidationInfo) -> ModelSettings:
    """A model of the spec, with a file model's file (a scripted model's script, a replayed
    trace) made absolute (and checked)."""
    provider = settings.provider
    if provider not in FILE_MODELS:
        return settings
    context = info.context or {}
    base = Path(context.get("base_dir") or Path.cwd())
    script = (base / Path(settings.name.partition(":")[2]).expanduser()).resolve()
    if not script.is_file():
        raise ValueError(f"the {FILE_MODELS[provider]} {script} does not exist")
    return settings.updated(name=f"{provider}:{script}")


def step_model(value: Any) -> Any:
    """A step's `model: inherit` is the job's model, as leaving it out is."""
    return None if value == INHERIT else value


class _Job(Protocol):
    model: ModelSettings
    models: dict[str, ModelSettings]
    steps: list[Any]


def expand_models(job: _Job, environ: Mapping[str, str] | None = None) -> list[Problem]:
    """Replace every alias in `job` by the model it stands for; the problems, by field path."""
    try:
        aliases = ModelAliases.standard(job.models, environ=environ)
    except ConfigError as error:
        return [Problem("models", str(error))]
    problems: list[Problem] = []
    job.model = _expanded(aliases, job.model, "model", problems) or job.model
    for index, step in enumerate(job.steps):
        if step.model is not None:
            path = f"steps[{index}].model"
            step.model = _expanded(aliases, step.model, path, problems) or step.model
    for name, settings in job.models.items():
        _expanded(aliases, settings, f"models.{name}", problems)
    return problems


def _expanded(
    aliases: ModelAliases, settings: ModelSettings, path: str, problems: list[Problem]
) -> ModelSettings | None:
    try:
        return aliases.expand(settings)
    except ConfigError as error:
        problems.append(Problem(path, str(error)))
        return None
