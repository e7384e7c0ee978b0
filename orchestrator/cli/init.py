"""`orchestrator init [FOLDER]`: a job folder that runs at once, offline, to start from.

It writes a job spec, a scripted model's script (so the first run needs no key and no
network), a skill with instructions and a tool, a sub-agent definition and a workspace with
one file. `orchestrator run FOLDER/job.yaml` then runs it: the planner forks the sub-agent,
which loads the skills, reads the file and counts its words; the planner writes a summary.
Swap the model (`--model openai:gpt-4o-mini`) and the same job runs against a real one.

The skill's `tools.py` sits outside the workspace (`work/`), since code is never imported
from a skill folder the model could write to. Nothing is overwritten: if any of the files
exists already, nothing is written and the command says which.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import textwrap
from pathlib import Path

from ..security.inventory import reads_no_configuration

EXIT_OK = 0
EXIT_REFUSED = 2

JOB = """\
# A job to start from (`orchestrator init`). Run it:  orchestrator run {spec}
# Offline, the model is scripted (job.script.yaml); every tool, skill, fork and budget path
# runs for real. Against a real model, change only the model:
#   orchestrator run {spec} --model openai:gpt-4o-mini
name: {name}
model: scripted:job.script.yaml
budget: {{max_tokens: 40000, max_steps: 8, max_parallel: 2}}
permissions: {{workspace: ./work}}
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

            - The team ships version 1.0 on Friday.
            - Docs and a changelog go out with it.
            - Nobody owns the release notes yet.

            (35 words)
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
{notes}  - content: |
      - The team ships version 1.0 on Friday.
      - Docs and a changelog go out with it.
      - Nobody owns the release notes yet.
      notes.md has 35 words (4 lines).
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


SCRIPT = SCRIPT.replace("{notes}", textwrap.indent(NOTES, " " * 12))


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    init = commands.add_parser(
        "init",
        help="create a job folder that runs at once, offline",
        description="Create a job folder (spec, scripted model, skill, sub-agent, workspace) "
        "that `orchestrator run FOLDER/job.yaml` runs at once, offline. Existing files are "
        "never overwritten.",
    )
    init.add_argument(
        "folder", nargs="?", default=".", metavar="FOLDER", help="where (default: here)"
    )
    init.set_defaults(handler=init_command)


def scaffold(folder: Path) -> dict[Path, str]:
    """The files of a new job folder at `folder`, and what each holds."""
    spec = folder / "job.yaml"
    name = "".join(c if c.isalnum() or c in "-_" else "-" for c in folder.resolve().name)
    return {
        spec: JOB.format(spec=shlex.quote(str(spec)), name=name.strip("-_") or "my-job"),
        folder / "job.script.yaml": SCRIPT,
        folder / "skills" / "word-count" / "SKILL.md": SKILL,
        folder / "skills" / "word-count" / "tools.py": TOOLS,
        folder / "subagents" / "summarizer.md": SUBAGENT,
        folder / "work" / "notes.md": NOTES,
    }


@reads_no_configuration("writes a new job folder; reads nothing")
def init_command(args: argparse.Namespace) -> int:
    files = scaffold(Path(args.folder))
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
    print(f"\nrun it (offline, scripted model): orchestrator run {spec}")
    print(f"against a real model: orchestrator run {spec} --model openai:gpt-4o-mini")
    return EXIT_OK
