"""`orchestrator init [FOLDER] [--template goal|steps]`: a job folder that runs at once,
offline, to start from.

Each template writes a job spec, a scripted model's script (so the first run needs no key and
no network), a skill with instructions and a Python tool, a workspace with one file, and an
eval file the job passes (`orchestrator eval FOLDER/job.eval.yaml`):

- `goal` (the default): the planner forks a sub-agent (its definition is written too), which
  loads the skills, reads the file and counts its words; the planner writes a summary.
- `steps`: three steps; the first answers with typed data (its `output_schema`), whose fields
  the next step's task uses (`{steps.measure.output.words}`), and the last writes a report.

Beside the spec and the eval file go their JSON Schemas (`job.schema.json`, `eval.schema.json`,
as `orchestrator schema` prints them), which each file names on its first line for an editor
with the YAML language server. Swap the model (`--model openai:gpt-4o-mini`) and the same job
runs against a real one.

The skill's `tools.py` sits outside the workspace (`work/`), since code is never imported
from a skill folder the model could write to. Nothing is overwritten: if any of the files
exists already, nothing is written and the command says which.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from ..security.inventory import reads_no_configuration
from .schema import SCHEMA_FILES, schema_text

EXIT_OK = 0
EXIT_REFUSED = 2

JOB = """\
# yaml-language-server: $schema=job.schema.json
# A job to start from (`orchestrator init`). Run it:  orchestrator run {spec}
# Offline, the model is scripted (job.script.yaml); every tool, skill, fork and budget path
# runs for real. Against a real model, change only the model:
#   orchestrator run {spec} --model openai:gpt-4o-mini
name: {name}
model: scripted:job.script.yaml
budget: {max_tokens: 40000, max_steps: 8, max_parallel: 2}
permissions: {workspace: ./work}
goal: >-
  Summarize notes.md in the workspace in three bullets, with its word count,
  and write the summary to out/summary.md. Then reply with one line.
"""

SCRIPT = """\
# The model's decisions for job.yaml, per agent: "goal" is the planner, "goal/<task id>"
# each task it forks. A real model makes these decisions itself.
goal:
  - content: The notes are one file; a summarizer reads them.
    tool_calls:
      - name: fork
        arguments:
          tasks:
            - id: read
              agent: summarizer
              task: Summarize notes.md in three bullets and count its words.
  - tool_calls:
      - {name: load_skill, arguments: {name: files}}
  - tool_calls:
      - name: files__write_file
        arguments:
          path: out/summary.md
          content: |
            # Summary of notes.md

            {bullets}

            ({words} words)
  - content: Wrote out/summary.md (in the workspace, work/).
goal/read:
  - tool_calls:
      - {name: load_skill, arguments: {name: files}}
      - {name: load_skill, arguments: {name: word-count}}
  - tool_calls:
      - {name: files__read_file, arguments: {path: notes.md}}
  - tool_calls:
      - name: word-count__count_words
        arguments:
          text: |
            {notes}
  - content: |
      {bullets}
      notes.md has {words} words ({lines} lines).
"""

SKILL = """\
---
name: word-count
description: >-
  Count the words, lines and characters of a text. Use when a task asks how long a text is.
---

# Word count

Call `word-count__count_words(text)` with the text itself; it answers with the number of
words, lines and characters. To count a file, read it first (the `files` skill).
"""

TOOLS = '''\
"""Tools of the word-count skill: plain functions marked @tool (docs/skills.md)."""

from orchestrator import tool


@tool
def count_words(text: str) -> str:
    """Count the words, lines and characters of a text.

    Args:
        text: The text to count.
    """
    return f"{len(text.split())} words, {len(text.splitlines())} lines, {len(text)} characters"
'''

SUBAGENT = """\
---
name: summarizer
description: Reads a file and summarizes it in a few bullets, with its length.
skills: [files, word-count]   # what it may load (default: all); it still loads them
max_steps: 6
---
You summarize files. Read the file named in your task, count its words with the word-count
skill, and answer with three short bullets and the word count. Nothing else.
"""

NOTES = """\
# Team notes

The team ships version 1.0 on Friday, after the last tests pass. The docs and a short
changelog go out with it. Nobody owns the release notes yet; someone should take them.
"""


STEPS_JOB = """\
# yaml-language-server: $schema=job.schema.json
# A job of three steps to start from (`orchestrator init --template steps`). Run it:
#   orchestrator run {spec}
# `measure` answers with typed data (its output_schema); `summarize` uses its fields
# ({steps.measure.output.words}); `report` writes out/report.md from both. Offline, the model
# is scripted (job.script.yaml, a list of turns per step). Against a real model:
#   orchestrator run {spec} --model openai:gpt-4o-mini
name: {name}
model: scripted:job.script.yaml
budget: {max_tokens: 40000, max_steps: 6}
permissions: {workspace: ./work}
inputs:
  file: notes.md            # --set file=other.md reads another file of the workspace
steps:
  - id: measure
    task: Count the words and lines of {inputs.file} in the workspace.
    skills: [files, word-count]   # loaded from its first request
    output_schema:                # its answer is this JSON, validated
      type: object
      properties:
        words: {type: integer}
        lines: {type: integer}
      required: [words, lines]
  - id: summarize
    depends_on: [measure]
    task: >-
      Summarize {inputs.file} in the workspace in three bullets. It has
      {steps.measure.output.words} words on {steps.measure.output.lines} lines: say so.
    skills: [files]
  - id: report
    depends_on: [measure, summarize]
    task: >-
      Write out/report.md in the workspace: a title, then this summary as it is, then
      nothing else. Reply with one line. The summary: {steps.summarize.output}
    skills: [files]
"""

STEPS_SCRIPT = """\
# The model's decisions for job.yaml, per step (its id). A real model makes them itself.
measure:
  - tool_calls:
      - {name: files__read_file, arguments: {path: notes.md}}
  - tool_calls:
      - name: word-count__count_words
        arguments:
          text: |
            {notes}
  - content: '{"words": {words}, "lines": {lines}}'
summarize:
  - tool_calls:
      - {name: files__read_file, arguments: {path: notes.md}}
  - content: |
      {bullets}
      ({words} words, {lines} lines)
report:
  - tool_calls:
      - name: files__write_file
        arguments:
          path: out/report.md
          content: |
            # Team notes, in short

            {bullets}
            ({words} words, {lines} lines)
  - content: Wrote out/report.md (in the workspace, work/).
"""

EVAL = """\
# yaml-language-server: $schema=eval.schema.json
# The job's eval: its cases run and are checked.  orchestrator eval {eval}
# Add cases, or variants to compare (a model, a skill left out): docs/eval.md.
name: {name}
job: job.yaml
cases:
  - id: notes
    expected: {words: {words}}
scorers:
  - tools_called: [word-count__count_words]
  - file: {path: out/{written}, contains: "({expected.words} words"}
"""


def _filled(text: str, **values: object) -> str:
    """`text` with each `{key}` of `values` replaced; a value of several lines keeps the
    indentation of the line it goes in (the other braces are YAML's and templating's own)."""
    lines = []
    for line in text.splitlines(keepends=True):
        indent = " " * (len(line) - len(line.lstrip(" ")))
        for key, value in values.items():
            first, *rest = str(value).rstrip("\n").split("\n")
            shown = "".join([first, *(f"\n{indent}{more}" if more else "\n" for more in rest)])
            line = line.replace(f"{{{key}}}", shown)
        lines.append(line)
    return "".join(lines)


BULLETS = """\
- The team ships version 1.0 on Friday.
- Docs and a changelog go out with it.
- Nobody owns the release notes yet.
"""
"""What the model makes of the notes, in both templates' scripts."""
_COUNTS = {"words": len(NOTES.split()), "lines": len(NOTES.splitlines())}
SCRIPT = _filled(SCRIPT, notes=NOTES, bullets=BULLETS, **_COUNTS)
STEPS_SCRIPT = _filled(STEPS_SCRIPT, notes=NOTES, bullets=BULLETS, **_COUNTS)

TEMPLATES = {
    "goal": "a planner that forks a sub-agent (the default)",
    "steps": "three steps, the first answering typed data the next one uses",
}
"""The kinds of job folder `init` writes, and what each is."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    init = commands.add_parser(
        "init",
        help="create a job folder that runs at once, offline",
        description="Create a job folder (spec, scripted model, skill, workspace, an eval file "
        "and the JSON Schemas an editor checks them with) that `orchestrator run "
        "FOLDER/job.yaml` runs at once, offline. Existing files are never overwritten.",
    )
    init.add_argument(
        "folder", nargs="?", default=".", metavar="FOLDER", help="where (default: here)"
    )
    init.add_argument(
        "--template",
        choices=tuple(TEMPLATES),
        default="goal",
        help="; ".join(f"{name}: {what}" for name, what in TEMPLATES.items()),
    )
    init.set_defaults(handler=init_command)


def scaffold(folder: Path, template: str = "goal") -> dict[Path, str]:
    """The files of a new job folder at `folder` made from `template`, and what each holds;
    the job spec first."""
    spec = folder / "job.yaml"
    name = "".join(c if c.isalnum() or c in "-_" else "-" for c in folder.resolve().name)
    shown = {
        "spec": shlex.quote(str(spec)),
        "eval": shlex.quote(str(folder / "job.eval.yaml")),
        "name": name.strip("-_") or "my-job",
        **_COUNTS,
    }
    steps = template == "steps"
    files = {
        spec: _filled(STEPS_JOB if steps else JOB, **shown),
        folder / "job.script.yaml": STEPS_SCRIPT if steps else SCRIPT,
        folder / "job.eval.yaml": _filled(
            EVAL, written="report.md" if steps else "summary.md", **shown
        ),
        folder / "skills" / "word-count" / "SKILL.md": SKILL,
        folder / "skills" / "word-count" / "tools.py": TOOLS,
        folder / "work" / "notes.md": NOTES,
    }
    if not steps:
        files[folder / "subagents" / "summarizer.md"] = SUBAGENT
    files.update({folder / file: schema_text(kind) for kind, file in SCHEMA_FILES.items()})
    return files


@reads_no_configuration("writes a new job folder; reads nothing")
def init_command(args: argparse.Namespace) -> int:
    files = scaffold(Path(args.folder), args.template)
    existing = [path for path in files if path.exists() or path.is_symlink()]
    if existing:
        print(
            f"error: not overwriting {', '.join(map(str, existing))}; "
            "choose an empty or new folder",
            file=sys.stderr,
        )
        return EXIT_REFUSED
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("x", encoding="utf-8") as handle:  # "x": never replaces a file
            handle.write(text)
    for path in files:
        print(f"created {path}")
    spec = shlex.quote(str(next(iter(files))))
    evals = shlex.quote(str(Path(args.folder) / "job.eval.yaml"))
    print(f"\nrun it (offline, scripted model): orchestrator run {spec}")
    print(f"check it against its eval: orchestrator eval {evals}")
    print(f"against a real model: orchestrator run {spec} --model openai:gpt-4o-mini")
    return EXIT_OK
