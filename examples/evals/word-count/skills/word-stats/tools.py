"""Tools of the word-stats skill (examples/evals): counting words as a program does."""

from orchestrator import ToolContext, tool
from orchestrator.errors import ToolError
from orchestrator.security import is_inside


@tool
def tally(path: str, output: str, ctx: ToolContext) -> str:
    """Count the words of a workspace file and write the number alone to another file.

    Args:
        path: The file to count, relative to the workspace.
        output: The file to write the count to, relative to the workspace.
    """
    root = ctx.permissions.workspace.resolve()
    source, target = (root / path).resolve(), (root / output).resolve()
    if not (is_inside(root, source) and is_inside(root, target)):
        raise ToolError("both files must be inside the workspace")
    words = len(source.read_text(encoding="utf-8").split())
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"{words}\n", encoding="utf-8")
    return f"{path} has {words} words; wrote the count to {output}."
