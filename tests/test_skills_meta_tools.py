"""The three levels through a real agent loop: only the model's decisions are scripted."""

from __future__ import annotations

from pathlib import Path

import pytest
from skill_factory import scripted_agent, synthetic_skills, write_skill

from orchestrator import Agent, RunResult, read_trace
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


def test_load_skill_returns_the_body_and_appends_the_tools(catalog: SkillCatalog) -> None:
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
    before = ["echo", "load_skill", "read_skill_file", "search_skills"]
    assert tool_names(model, 0) == before
    assert tool_names(model, 1) == [*before, "calc__add", "calc__shout"]
    assert tool_names(model, 2) == tool_names(model, 1)
    add_spec = model.requests[1].tools[4]
    assert add_spec.parameters["required"] == ["a", "b"]
    [(error, text)] = results(result)["load_skill"]
    assert error is None
    assert "# Calc\n\nUse calc__add to add." in text
    assert "- calc__add: Add two numbers." in text
    assert "- calc__shout: Upper-case a text." in text
    assert "references/guide.md" in text
    assert results(result)["calc__add"] == [(None, "5")]


def test_skills_loaded_in_one_turn_add_tools_in_the_models_order(tmp_path: Path) -> None:
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
        skills=[tmp_path],
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
    events = [e for e in read_trace(trace_path) if e["type"] == "skill_loaded"]
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
