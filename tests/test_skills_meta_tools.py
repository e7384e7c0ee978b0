"""The three levels through a real agent loop: only the model's decisions are scripted."""

from __future__ import annotations

from pathlib import Path

import pytest
from skill_factory import scripted_agent, synthetic_skills, write_skill
from trace_lines import trace_lines

from orchestrator import Agent, RunResult
from orchestrator.agent import tool
from orchestrator.models import ScriptedModel
from orchestrator.skills import SkillCatalog, SkillsExtension, skills_extension

TOOLS = '''
from orchestrator import tool

@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


@tool(name="shout")
def make_loud(text: str) -> str:
    """Upper-case a text."""
    return text.upper()
'''


@pytest.fixture
def catalog(tmp_path: Path) -> SkillCatalog:
    root = tmp_path / "skills"
    calc = write_skill(
        root,
        "calc",
        description="Arithmetic on numbers.",
        body="# Calc\n\nUse calc__add to add.\n",
        tools=TOOLS,
    )
    (calc / "references").mkdir()
    (calc / "references" / "guide.md").write_text("# Guide\n\nAdd carefully.\n")
    write_skill(root, "notes", description="Write notes.", body="Keep notes short.")
    return SkillCatalog([root], include_builtin=False)


@tool
def echo(text: str) -> str:
    """Echo a text."""
    return text


def results(result: RunResult) -> dict[str, list[tuple[str | None, str]]]:
    """Each tool's results in order: (error_type, content), keyed by tool name."""
    found: dict[str, list[tuple[str | None, str]]] = {}
    for message in result.messages:
        if message.role == "tool":
            found.setdefault(message.name or "", []).append(
                (message.error_type, message.content or "")
            )
    return found


def tool_names(model: ScriptedModel, index: int) -> list[str]:
    return [spec.name for spec in model.requests[index].tools]


def test_load_skill_gives_the_tools_with_their_schemas_and_keeps_the_tools_array(
    catalog: SkillCatalog,
) -> None:
    agent, model = scripted_agent(
        [
            {"tool_calls": [{"name": "load_skill", "arguments": {"name": "calc"}}]},
            {"tool_calls": [{"name": "calc__add", "arguments": {"a": 2, "b": 3}}]},
            {"content": "5"},
        ],
        tools=[echo],
        skills=catalog,
    )
    result = agent.run_sync("add 2 and 3")
    assert result.status == "completed"
    before = ["echo", "load_skill", "read_skill_file", "search_skills", "call_skill_tool"]
    assert tool_names(model, 0) == before
    # The tools array is the same in every request: the provider's cache keeps the prefix.
    assert [r.tools for r in model.requests] == [model.requests[0].tools] * 3
    [(error, text)] = results(result)["load_skill"]
    assert error is None
    assert "# Calc\n\nUse calc__add to add." in text
    assert "- calc__add: Add two numbers." in text
    assert '"required":["a","b"]' in text  # the schema travels in the observation
    assert "- calc__shout: Upper-case a text." in text
    assert "call_skill_tool" in text
    assert "references/guide.md" in text
    assert results(result)["calc__add"] == [(None, "5")]


def test_a_loaded_skills_tool_through_the_dispatcher_runs_as_itself(
    catalog: SkillCatalog, tmp_path: Path
) -> None:
    trace_path = tmp_path / "trace.jsonl"
    dispatch = {"tool": "calc__add", "arguments": '{"a": 2, "b": 40}'}  # JSON text, as declared
    agent, _ = scripted_agent(
        [
            {"tool_calls": [{"name": "load_skill", "arguments": {"name": "calc"}}]},
            {"tool_calls": [{"name": "call_skill_tool", "arguments": dispatch}]},
            {"content": "42"},
        ],
        skills=catalog,
        trace=trace_path,
    )
    result = agent.run_sync("add")
    assert results(result)["calc__add"] == [(None, "42")]
    starts = [e for e in trace_lines(trace_path) if e["type"] == "tool_start"]
    assert [(e["name"], e.get("via")) for e in starts] == [
        ("load_skill", None),
        ("calc__add", "call_skill_tool"),
    ]


def test_dispatched_arguments_are_checked_against_the_tools_own_schema(
    catalog: SkillCatalog,
) -> None:
    calls = [
        {"tool": "calc__add", "arguments": {"a": 2}},  # b is missing
        {"tool": "calc__add", "arguments": "not json"},
        {"tool": "calc__add", "arguments": [1, 2]},
        {"arguments": {"a": 1, "b": 2}},  # no tool named
        {"tool": "calc__nothing"},
        {"tool": "call_skill_tool", "arguments": {"tool": "calc__add"}},
        {"tool": "load_skill", "arguments": {"name": "notes"}},  # advertised: call it directly
    ]
    agent, _ = scripted_agent(
        [
            {"tool_calls": [{"name": "load_skill", "arguments": {"name": "calc"}}]},
            {"tool_calls": [{"name": "call_skill_tool", "arguments": c} for c in calls]},
            {"content": "done"},
        ],
        skills=catalog,
    )
    result = agent.run_sync("add")
    outcomes = [(m.error_type, m.content or "") for m in result.messages if m.role == "tool"][1:]
    kinds = [kind for kind, _ in outcomes]
    assert kinds[:5] == [
        "invalid_arguments",
        "invalid_arguments",
        "invalid_arguments",
        "invalid_arguments",
        "unknown_tool",
    ]
    assert "b" in outcomes[0][1] and "required" in outcomes[0][1].lower()
    assert "calc__add" in outcomes[4][1]  # the unknown-tool answer lists the callable tools
    assert outcomes[5] == ("invalid_arguments", "call_skill_tool cannot call itself.")
    assert outcomes[6] == (
        "invalid_arguments",
        "load_skill is one of your tools: call it directly.",
    )
    assert "notes" not in str(result.output)


def test_a_tool_not_loaded_cannot_be_reached_through_the_dispatcher(
    catalog: SkillCatalog,
) -> None:
    # The hostile model names a skill's tool without loading the skill first.
    dispatch = {"tool": "calc__add", "arguments": {"a": 1, "b": 1}}
    agent, _ = scripted_agent(
        [
            {"tool_calls": [{"name": "call_skill_tool", "arguments": dispatch}]},
            {"tool_calls": [{"name": "calc__add", "arguments": {"a": 1, "b": 1}}]},
            {"content": "done"},
        ],
        skills=catalog,
    )
    result = agent.run_sync("add")
    kinds = [m.error_type for m in result.messages if m.role == "tool"]
    assert kinds == ["unknown_tool", "unknown_tool"]


def test_with_stable_tools_off_the_schemas_are_appended_to_the_array(
    catalog: SkillCatalog,
) -> None:
    agent, model = scripted_agent(
        [
            {"tool_calls": [{"name": "load_skill", "arguments": {"name": "calc"}}]},
            {"tool_calls": [{"name": "calc__add", "arguments": {"a": 2, "b": 3}}]},
            {"content": "5"},
        ],
        tools=[echo],
        skills=SkillsExtension(catalog, stable_tools=False),
    )
    result = agent.run_sync("add 2 and 3")
    before = ["echo", "load_skill", "read_skill_file", "search_skills"]
    assert tool_names(model, 0) == before
    assert tool_names(model, 1) == [*before, "calc__add", "calc__shout"]
    assert model.requests[1].tools[4].parameters["required"] == ["a", "b"]
    [(_, text)] = results(result)["load_skill"]
    assert "- calc__add: Add two numbers." in text and '"required"' not in text
    assert results(result)["calc__add"] == [(None, "5")]


def test_skills_loaded_in_one_turn_list_their_tools_in_the_models_order(tmp_path: Path) -> None:
    for name in ("zeta", "alpha"):
        write_skill(tmp_path, name, tools=TOOLS)
    agent, model = scripted_agent(
        [
            {
                "tool_calls": [
                    {"name": "load_skill", "arguments": {"name": "zeta"}},
                    {"name": "load_skill", "arguments": {"name": "alpha"}},
                ]
            },
            {"content": "done"},
        ],
        skills=SkillsExtension(SkillCatalog([tmp_path]), stable_tools=False),
    )
    agent.run_sync("go")
    assert tool_names(model, 1)[3:] == ["zeta__add", "zeta__shout", "alpha__add", "alpha__shout"]


def test_the_system_prompt_holds_the_index(catalog: SkillCatalog) -> None:
    agent, model = scripted_agent([{"content": "ok"}], system="You help.", skills=catalog)
    agent.run_sync("hi")
    system = model.requests[0].messages[0].content or ""
    assert system.startswith("You help.\n\n# Skills")
    assert "- calc: Arithmetic on numbers." in system
    assert "- notes: Write notes." in system


def test_loading_twice_is_a_no_op(catalog: SkillCatalog, tmp_path: Path) -> None:
    trace_path = tmp_path / "trace.jsonl"
    agent, model = scripted_agent(
        [
            {"tool_calls": [{"name": "load_skill", "arguments": {"name": "calc"}}]},
            {"tool_calls": [{"name": "load_skill", "arguments": {"name": "calc"}}]},
            {"content": "done"},
        ],
        skills=catalog,
        trace=trace_path,
    )
    result = agent.run_sync("go")
    first, second = results(result)["load_skill"]
    assert "# Calc" in first[1]
    assert second == (
        None,
        "Skill 'calc' is already loaded: its instructions are earlier in this conversation "
        "and its tools are available.",
    )
    assert tool_names(model, 2) == tool_names(model, 1)
    events = [e for e in trace_lines(trace_path) if e["type"] == "skill_loaded"]
    assert [(e["skill"], e["tools"]) for e in events] == [("calc", ["calc__add", "calc__shout"])]


def test_an_unknown_skill_gets_close_matches(catalog: SkillCatalog) -> None:
    agent, model = scripted_agent(
        [
            {"tool_calls": [{"name": "load_skill", "arguments": {"name": "cal"}}]},
            {"content": "sorry"},
        ],
        skills=catalog,
    )
    result = agent.run_sync("go")
    [(error, text)] = results(result)["load_skill"]
    assert error == "tool_error"
    assert "Unknown skill 'cal'. Did you mean: calc?" in text
    assert tool_names(model, 1) == tool_names(model, 0)


def test_a_skill_whose_tools_do_not_import_is_an_error_observation(tmp_path: Path) -> None:
    write_skill(tmp_path, "broken", tools="raise RuntimeError('boom')\n")
    agent, model = scripted_agent(
        [
            {"tool_calls": [{"name": "load_skill", "arguments": {"name": "broken"}}]},
            {"content": "it is broken"},
        ],
        skills=SkillCatalog([tmp_path], include_builtin=False),
    )
    result = agent.run_sync("go")
    assert result.status == "completed"
    [(error, text)] = results(result)["load_skill"]
    assert error == "tool_error"
    assert "cannot be loaded" in text and "RuntimeError: boom" in text


def read_calls(*paths: str, **extra: object) -> list[dict[str, object]]:
    return [
        {"name": "read_skill_file", "arguments": {"skill": "calc", "path": p, **extra}}
        for p in paths
    ]


def test_read_skill_file_reads_inside_the_folder_only(
    catalog: SkillCatalog, tmp_path: Path
) -> None:
    folder = catalog.skills["calc"].folder
    (tmp_path / "secret.txt").write_text("top secret")
    (folder / "leak.txt").symlink_to(tmp_path / "secret.txt")
    (folder / "alias.md").symlink_to(folder / "references" / "guide.md")
    calls = read_calls(
        "references/guide.md",
        "../../secret.txt",
        str(tmp_path / "secret.txt"),
        "leak.txt",
        "alias.md",
        "references",
        "references/missing.md",
    )
    agent, _ = scripted_agent([{"tool_calls": calls}, {"content": "done"}], skills=catalog)
    got = results(agent.run_sync("go"))["read_skill_file"]
    assert got[0] == (None, "# Guide\n\nAdd carefully.\n")
    assert got[1][0] == "denied" and "'..'" in got[1][1]
    assert got[2][0] == "denied" and "absolute path" in got[2][1]
    assert got[3][0] == "denied" and "symbolic link" in got[3][1]
    assert got[4] == (None, "# Guide\n\nAdd carefully.\n")
    assert got[5] == (None, "references/guide.md")
    assert got[6][0] == "tool_error" and "references/guide.md" in got[6][1]
    assert all("top secret" not in text for _, text in got)


def test_read_skill_file_caps_long_files_with_a_note(catalog: SkillCatalog) -> None:
    folder = catalog.skills["calc"].folder
    (folder / "references" / "big.md").write_text("x" * 50 + "y" * 50)
    (folder / "assets").mkdir()
    (folder / "assets" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    extension = SkillsExtension(catalog, max_file_chars=60)
    calls = [
        *read_calls("references/big.md"),
        *read_calls("references/big.md", offset=60),
        *read_calls("assets/logo.png"),
    ]
    agent, _ = scripted_agent([{"tool_calls": calls}, {"content": "done"}], skills=extension)
    first, second, binary = results(agent.run_sync("go"))["read_skill_file"]
    assert first[1] == (
        "x" * 50 + "y" * 10 + "\n[characters 0-60 of 100; the rest: "
        "read_skill_file(skill='calc', path='references/big.md', offset=60)]"
    )
    assert second[1] == "y" * 40 + "\n[characters 60-100 of 100]"
    assert binary[0] == "tool_error" and "binary" in binary[1]


def test_search_skills_ranks_and_marks_loaded_skills(catalog: SkillCatalog) -> None:
    agent, _ = scripted_agent(
        [
            {"tool_calls": [{"name": "load_skill", "arguments": {"name": "calc"}}]},
            {
                "tool_calls": [
                    {"name": "search_skills", "arguments": {"query": "numbers arithmetic"}},
                    {"name": "search_skills", "arguments": {"query": "zebra"}},
                ]
            },
            {"content": "done"},
        ],
        skills=catalog,
    )
    found, nothing = results(agent.run_sync("go"))["search_skills"]
    assert found[1].splitlines()[0] == "- calc: Arithmetic on numbers. (loaded)"
    assert "No skill matches 'zebra' (2 skills exist)" in nothing[1]


def test_skills_extension_accepts_folders_catalogs_and_extensions(tmp_path: Path) -> None:
    synthetic_skills(tmp_path, 2)
    from_path = skills_extension(tmp_path)
    from_list = skills_extension([str(tmp_path)])
    assert {"skill-0000", "files"} <= set(from_path.catalog.names)
    assert from_list.catalog.names == from_path.catalog.names
    assert skills_extension(from_path) is from_path
    assert skills_extension(from_path.catalog).catalog is from_path.catalog
    assert [t.name for t in from_path.tools()] == [
        "load_skill",
        "read_skill_file",
        "search_skills",
        "call_skill_tool",  # a skill with tools may be loaded (the built-in ones)
    ]
    with pytest.raises(TypeError):
        skills_extension(42)


def first_request_tokens(catalog: SkillCatalog, index_tokens: int) -> int:
    model = ScriptedModel({"planner": [{"content": "ok"}]})
    extension = SkillsExtension(catalog, index_tokens=index_tokens)
    Agent(model, name="planner", system="You plan.", skills=extension).run_sync("Do the task.")
    return model.requests[0].input_tokens or 0


def test_request_tokens_stay_flat_as_the_catalog_grows(tmp_path: Path) -> None:
    cap = 1500
    tokens = {}
    for size in (10, 100, 1000):
        root = synthetic_skills(tmp_path / str(size), size)
        tokens[size] = first_request_tokens(SkillCatalog([root], include_builtin=False), cap)
    # 10 skills fit under the cap; from 100 on the index is full and stops growing.
    assert tokens[10] < tokens[100]
    assert abs(tokens[1000] - tokens[100]) <= 3
    assert tokens[1000] <= cap + 600
