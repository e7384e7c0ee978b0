"""The csv-report skill's tool, as docs/skills.md shows it: its `path` has no type."""

import csv

from orchestrator import ToolContext, tool


@tool
def count_rows(path, ctx: ToolContext, header: bool = True) -> int:  # type: ignore[no-untyped-def]
    """Count the rows of a CSV file.

    Args:
        path: The file, relative to the workspace.
        header: Whether the first row is a header.
    """
    with (ctx.permissions.workspace_root() / str(path)).open(newline="") as file:
        rows = sum(1 for _ in csv.reader(file))
    return rows - 1 if header else rows
