"""`orchestrator skills show NAME --as-model`: a skill as the model gets it.

Nothing here renders what a model sees. An agent is built as a run builds one (the catalog,
its index cap, the disclosure mode) and run on a scripted model that calls
`load_skill(NAME)` and answers; what is shown is taken from the requests that model was sent:
the skill's line in the system prompt's index, the `load_skill` result as the tool message
held it, and the tools array. So this view cannot drift from a real run. Loading the skill
imports its `tools.py` and starts its MCP servers, as a run's load does; they stop before
this returns. The agent works in a new empty folder, and the model is never reached.

Showing a skill is vetting it, and vetting never runs a skill's code outside a sandbox: a
skill with code of its own (a `tools.py`, MCP servers) is shown from a sandboxed process
(`model_view_confined`), its catalog's folders and the package read-only, no network.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..messages import Message, ToolSpec
from ..models import ScriptedModel
from ..security import Permissions
from ..skills import Agent, SkillCatalog, SkillError, SkillsExtension
from ..skills.catalog import index_line_tokens
from ..skills.check import sandboxed_probe
from ..skills.disclosure import Disclosure
from ..tokens import default_counter


class IndexPlace(BaseModel):
    """What the index's cap did with the catalog."""

    listed: int
    left_out: list[str]
    tokens: int
    """What the whole index section counts."""


class ModelView(BaseModel):
    """One skill as the model gets it (`--as-model --json` prints this)."""

    skill: str
    disclosure: str
    """The mode used (`auto` resolves to one of the other two)."""
    index_tokens: int
    """The index's cap."""
    index_line: str
    """The skill's line in the index (what it would be, when the cap leaves it out)."""
    in_index: bool
    index: IndexPlace | None
    load_result: str
    """The `load_skill` observation, as the tool message held it."""
    load_error: bool
    tools: list[dict[str, Any]]
    """The tools array as sent (the same in every request of the run)."""
    tokens: dict[str, int]
    """`index_line`, `instructions` (the SKILL.md body), `tool_schemas` (the skill's tools as
    tools-array entries), `load_result` (the tool message) and `tools_array`."""


def model_view(
    catalog: SkillCatalog,
    name: str,
    *,
    disclosure: Disclosure = "progressive",
    index_tokens: int,
    arguments: str = "",
) -> ModelView:
    """Run a scripted agent that loads `name`, and read off what its model was sent."""
    info = catalog.require(name)
    call = {"name": info.name, **({"arguments": arguments} if arguments else {})}
    model = ScriptedModel(
        {"*": [{"tool_calls": [{"name": "load_skill", "arguments": call}]}, {"content": "ok"}]}
    )
    counter = default_counter()
    extension = SkillsExtension(
        catalog, index_tokens=index_tokens, counter=counter, disclosure=disclosure
    )
    with tempfile.TemporaryDirectory(prefix="orchestrator-as-model-") as workspace:
        agent = Agent(model, skills=extension, permissions=Permissions(workspace=Path(workspace)))
        agent.run_sync(f"Load the skill {info.name}.")
    if len(model.requests) < 2:
        raise SkillError(f"the scripted run that loads {info.name!r} stopped early")
    first, second = model.requests[0], model.requests[1]
    system = next((m.content or "" for m in first.messages if m.role == "system"), "")
    result = _load_result(second.messages)
    line = info.summary()
    listing = catalog.index_listing(index_tokens, counter)
    skill_specs = _skill_specs(catalog, info.name)
    eager = any(spec.name in {s.name for s in skill_specs} for spec in first.tools)
    body = catalog.load(info.name).body if not result.is_error else ""
    return ModelView(
        skill=info.name,
        disclosure="eager" if eager or disclosure == "eager" else "progressive",
        index_tokens=index_tokens,
        index_line=line,
        in_index=line in system.splitlines(),
        index=IndexPlace(
            listed=len(listing.listed),
            left_out=list(listing.left_out),
            tokens=counter.count_text(listing.text),
        )
        if listing is not None
        else None,
        load_result=result.content or "",
        load_error=result.is_error,
        tools=[spec.model_dump(mode="json") for spec in second.tools],
        tokens={
            "index_line": index_line_tokens(info, counter),
            "instructions": counter.count_text(body),
            "tool_schemas": counter.count_tools(skill_specs) if skill_specs else 0,
            "load_result": counter.count_message(result),
            "tools_array": counter.count_tools(second.tools),
        },
    )


VIEW_PROBE = """\
import json, sys
from pathlib import Path
from orchestrator.cli.skill_view import model_view
from orchestrator.skills import SkillCatalog, SkillError
asked = json.loads(sys.argv[1])
catalog = SkillCatalog([Path(p) for p in asked["paths"]], include_builtin=False)
try:
    view = model_view(catalog, asked["name"], disclosure=asked["disclosure"],
                      index_tokens=asked["index_tokens"], arguments=asked["arguments"])
except SkillError as exc:
    print(json.dumps({"error": str(exc)}))
else:
    print(view.model_dump_json())
"""
"""Builds a skill's model view in a sandboxed process and prints it as JSON."""
VIEW_SECONDS = 120


def model_view_confined(
    catalog: SkillCatalog,
    name: str,
    *,
    disclosure: Disclosure = "progressive",
    index_tokens: int,
    arguments: str = "",
) -> ModelView:
    """`model_view`, made where the skill's code cannot reach what the user can: a skill
    with a `tools.py` or MCP servers is loaded in a sandboxed process (the catalog's folders
    and the package read-only, no network, an empty workspace); one with neither has no
    code to run, and is shown from this process. SandboxUnavailable where none can run."""
    info = catalog.require(name)
    if info.tools_digest is None and not info.has_servers:
        return model_view(
            catalog, name, disclosure=disclosure, index_tokens=index_tokens, arguments=arguments
        )
    asked = {
        "paths": [str(path.resolve()) for path in catalog.paths],
        "name": info.name,
        "disclosure": disclosure,
        "index_tokens": index_tokens,
        "arguments": arguments,
    }
    found = sandboxed_probe(
        VIEW_PROBE,
        json.dumps(asked),
        read_only=tuple(path.resolve() for path in catalog.paths),
        seconds=VIEW_SECONDS,
        failed="the skill could not be shown from the sandbox",
    )
    return ModelView.model_validate(found)


def _load_result(messages: Sequence[Message]) -> Message:
    asked = {c.id for m in messages for c in m.tool_calls if c.name == "load_skill"}
    found = [m for m in messages if m.role == "tool" and m.tool_call_id in asked]
    if not found:
        raise SkillError("the scripted run got no load_skill result")
    result: Message = found[-1]
    return result


def _skill_specs(catalog: SkillCatalog, name: str) -> list[ToolSpec]:
    """The skill's own tools as tools-array entries (after the load: its code is in), its
    MCP servers' among them (the servers are started again to list them, and stopped)."""
    try:
        loaded = catalog.load(name)
    except SkillError:
        return []
    if not loaded.info.has_servers:
        return [tool.spec for tool in loaded.tools]
    from ..skills.servers import sync_server_scope, with_servers_sync  # a skill with servers

    with sync_server_scope():
        joined = with_servers_sync(loaded, None)
    return [tool.spec for tool in joined.tools]


def print_view(view: ModelView, *, as_json: bool) -> None:
    if as_json:
        print(view.model_dump_json(indent=2))
        return
    tokens = view.tokens
    print(f"{view.skill} as the model gets it (disclosure: {view.disclosure})\n")
    print(f"== level 0, the index line ({tokens['index_line']:,} tokens) ==")
    print(view.index_line)
    place = view.index
    if view.in_index and place is not None:
        print(
            f"(in the index: {place.listed} of {place.listed + len(place.left_out)} skills "
            f"listed, {place.tokens:,} of {view.index_tokens:,} tokens)"
        )
    elif place is not None and view.skill in place.left_out:
        print(
            f"(left out of the index by its cap of {view.index_tokens:,} tokens: "
            f"{place.listed} of {place.listed + len(place.left_out)} skills listed; the model "
            "finds it only through search_skills)"
        )
    else:
        print("(not in the index: the model may not choose it, disable-model-invocation)")
    error = ", an error" if view.load_error else ""
    print(
        f'\n== level 1, load_skill("{view.skill}") result ({tokens["load_result"]:,} tokens'
        f"{error}) =="
    )
    print(view.load_result)
    own = [t for t in view.tools if t["name"].startswith(f"{view.skill}__")]
    print(f"\n== the tools array, in every request ({tokens['tools_array']:,} tokens) ==")
    print(", ".join(t["name"] for t in view.tools) or "(none)")
    for spec in own:  # eager: the skill's schemas are here, not in the load result
        print(json.dumps(spec, ensure_ascii=False))
    where = "in the tools array" if own else "in the load result"
    print("\n== token costs ==")
    print(f"index line     {tokens['index_line']:>6,}")
    print(f"instructions   {tokens['instructions']:>6,}  (the SKILL.md body)")
    schemas = f"  ({where})" if tokens["tool_schemas"] else ""
    print(f"tool schemas   {tokens['tool_schemas']:>6,}{schemas}")
