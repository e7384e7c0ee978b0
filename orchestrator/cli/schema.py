"""`orchestrator schema job|eval`: the JSON Schema of a job spec or an eval file, for editors.

    orchestrator schema job > job.schema.json

The schema describes the files as users write them, shorthands included (`model:
scripted:job.script.yaml` where a mapping of settings may stand, a folder's path where
`{path: ...}` may), and refuses an unknown field wherever the spec does. It is generated from
the spec's own models, so it never lags behind them. An editor with the YAML language server
reads it from the spec's first line: `# yaml-language-server: $schema=job.schema.json`
(`orchestrator init` writes both). What a schema cannot see (a file that does not exist, a
step that depends on an unknown one) `orchestrator validate` says.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

SCHEMA_FILES = {"job": "job.schema.json", "eval": "eval.schema.json"}
"""The file each schema goes to beside the spec (`orchestrator init` writes both)."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    schema = commands.add_parser(
        "schema",
        help="print the JSON Schema of job specs or eval files, for editors",
        description="Print the JSON Schema of a job spec (`job`) or an eval file (`eval`) as "
        "they are written, shorthands included, for an editor to check and complete them: "
        "`orchestrator schema job > job.schema.json`, then "
        "`# yaml-language-server: $schema=job.schema.json` as the spec's first line.",
    )
    schema.add_argument("kind", choices=tuple(SCHEMA_FILES), help="which file's schema")
    schema.set_defaults(handler=schema_command)


def schema_command(args: argparse.Namespace) -> int:
    print(schema_text(args.kind), end="")
    return 0


def schema_text(kind: str) -> str:
    """The JSON Schema of `kind` (`job` or `eval`), as the text a schema file holds."""
    return json.dumps(schema_of(kind), indent=2, ensure_ascii=False) + "\n"


def schema_of(kind: str) -> dict[str, Any]:
    """The JSON Schema of `kind` (`job` or `eval`); the eval room is loaded only for its own."""
    if kind == "eval":
        from ..eval import eval_schema

        return eval_schema()
    from ..jobs import job_schema

    return job_schema()
