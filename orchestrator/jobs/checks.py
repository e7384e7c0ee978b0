"""Checks across the fields of a structurally valid job spec.

Pydantic validates each field on its own; these checks see the job whole: goal or steps,
the output step, agents, the step DAG, template references and required inputs. Each
returns Problems with field paths, so one SpecError can list them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

import networkx as nx

from ..tasks import GENERAL, GraphError, build_graph, suggest
from .problems import Problem
from .templating import Template, TemplateError


class Step(Protocol):
    """The fields of a spec step these checks read (`spec.Step` has them)."""

    id: str
    task: str
    agent: str | None
    planner: bool
    depends_on: list[str]


class Job(Protocol):
    """The fields of a job spec these checks read (`spec.Job` has them)."""

    goal: str | None
    output: str | None
    inputs: Mapping[str, str | None]
    model_fields_set: set[str]

    @property
    def steps(self) -> Sequence[Step]: ...


def check_job(job: Job, known_agents: Iterable[str] | None) -> list[Problem]:
    """Every cross-field problem of `job`; empty when it is valid."""
    problems = _shape(job)
    if known_agents is not None:
        problems += _agents(job.steps, {*known_agents, GENERAL})
    graph, graph_problems = _graph(job.steps)
    problems += graph_problems
    problems += _templates(job, graph)
    problems += _required_inputs(job)
    return problems


def _shape(job: Job) -> list[Problem]:
    if job.goal is not None and job.steps:
        return [Problem("goal", "give either goal or steps, not both")]
    if job.goal is not None:
        if job.output is not None:
            return [Problem("output", "a goal job's output is the planner's answer; drop it")]
        return []
    if not job.steps:
        if "steps" in job.model_fields_set:
            return [Problem("steps", "needs at least one step")]
        return [Problem("", "expected a 'goal' for the planner or a list of 'steps'; got neither")]
    problems = []
    ids = [step.id for step in job.steps]
    if job.output is not None and job.output not in ids:
        message = f"unknown step {job.output!r}{suggest(job.output, ids)}; steps: {', '.join(ids)}"
        problems.append(Problem("output", message))
    for index, step in enumerate(job.steps):
        if step.agent is not None and step.planner:
            problems.append(Problem(f"steps[{index}]", "give agent or planner: true, not both"))
    return problems


def _agents(steps: Sequence[Step], known: set[str]) -> list[Problem]:
    problems = []
    names = ", ".join(sorted(known))
    for index, step in enumerate(steps):
        if step.agent is not None and step.agent not in known:
            hint = suggest(step.agent, known)
            message = f"unknown agent {step.agent!r}{hint}; known agents: {names}"
            problems.append(Problem(f"steps[{index}].agent", message))
    return problems


def _graph(steps: Sequence[Step]) -> tuple[nx.DiGraph | None, list[Problem]]:
    try:
        return build_graph(((s.id, s.depends_on) for s in steps), noun="step"), []
    except GraphError as error:
        return None, [Problem(p.path("steps"), p.message) for p in error.problems]


def _templates(job: Job, graph: nx.DiGraph | None) -> list[Problem]:
    problems = []
    if job.goal is not None:
        problems += _references(job, "goal", job.goal, None, None)
    for index, step in enumerate(job.steps):
        problems += _references(job, f"steps[{index}].task", step.task, step, graph)
    return problems


def _references(
    job: Job, path: str, text: str, step: Step | None, graph: nx.DiGraph | None
) -> list[Problem]:
    """Problems with the references in one template; `step` is None for the goal."""
    try:
        template = Template.parse(text)
    except TemplateError as error:
        return [Problem(path, str(error))]
    problems = []
    for ref in template.references:
        if ref.kind == "inputs":
            message = _input_reference(job, ref.name)
        elif step is None:
            message = "a goal cannot use step outputs; it runs alone"
        else:
            message = _step_reference(job, step, ref.name, graph)
        if message:
            problems.append(Problem(path, f"{ref}: {message}"))
    return problems


def _input_reference(job: Job, name: str) -> str | None:
    if name in job.inputs:
        return None
    declared = ", ".join(job.inputs) or "none"
    return f"unknown input {name!r}{suggest(name, job.inputs)}; declared inputs: {declared}"


def _step_reference(job: Job, step: Step, name: str, graph: nx.DiGraph | None) -> str | None:
    ids = [s.id for s in job.steps]
    if name not in ids:
        return f"unknown step {name!r}{suggest(name, ids)}"
    if name == step.id:
        return "a step cannot use its own output"
    if graph is not None and name not in nx.ancestors(graph, step.id):
        return f"step {step.id!r} does not depend on {name!r}; add {name!r} to its depends_on"
    return None


def _required_inputs(job: Job) -> list[Problem]:
    return [
        Problem(f"inputs.{name}", f"required input has no value; give it with --set {name}=VALUE")
        for name, value in job.inputs.items()
        if value is None
    ]
