"""The parts of MCP support that need no server: config, expansion, schemas, results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from skill_factory import CORPUS, needs_mcp_transcripts

from orchestrator.mcp.results import convert
from orchestrator.mcp.schema import normalise, problems
from orchestrator.skills.servers import (
    ConfigProblem,
    check_config,
    expanded,
    parse_config,
)

TRANSCRIPTS = CORPUS / "mcp-transcripts"


def test_import_orchestrator_does_not_import_the_sdk() -> None:
    code = "import sys, orchestrator, orchestrator.mcp; print('mcp' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_config_reads_the_claude_code_format(tmp_path: Path) -> None:
    text = json.dumps(
        {
            "mcpServers": {
                "git": {"command": "mcp-server-git", "args": ["--repository", "."]},
                "docs": {"type": "http", "url": "http://127.0.0.1:8931/mcp", "headers": {}},
                "inferred": {"url": "http://127.0.0.1:1/mcp"},
            }
        }
    )
    declared = parse_config(text, tmp_path, "x/.mcp.json")
    assert [s.kind for s in declared.servers.values()] == ["stdio", "http", "http"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"mcpServers": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
        ("[]", "must be a JSON object"),
        ('{"mcpServers": []}', "`mcpServers` must be an object"),
        ('{"mcpServers": {"a": {"args": ["x"]}}}', "server 'a': (server): a stdio server needs"),
        ('{"mcpServers": {"a": {"type": "http"}}}', "an http server needs a `url`"),
        ('{"mcpServers": {"a": {"command": "x", "args": "y"}}}', "server 'a': args"),
        ('{"mcpServers": {"a": {"type": "carrier-pigeon", "command": "x"}}}', "server 'a': type"),
    ],
)
def test_bad_config_names_server_and_field(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigProblem, match="x/.mcp.json") as caught:
        parse_config(text, tmp_path, "x/.mcp.json")
    assert message in str(caught.value)


def test_expansion_fills_variables_defaults_and_the_folder(tmp_path: Path) -> None:
    text = json.dumps(
        {
            "mcpServers": {
                "s": {
                    "command": "${BIN:-run}",
                    "args": ["--root", "${CLAUDE_PLUGIN_ROOT}/data", "${NAME}"],
                    "env": {"TOKEN": "Bearer ${TOKEN_VALUE}"},
                    "headers": {"X": "${NAME}-${NAME}"},
                    "cwd": "sub",
                }
            }
        }
    )
    server = parse_config(text, tmp_path, "f").servers["s"]
    filled = expanded(server, {"NAME": "n", "TOKEN_VALUE": "abc"}, tmp_path)
    assert filled.command == "run"
    assert filled.args == ["--root", f"{tmp_path}/data", "n"]
    assert filled.env == {"TOKEN": "Bearer abc"}
    assert filled.headers == {"X": "n-n"}
    assert filled.cwd == str(tmp_path / "sub")
    with pytest.raises(ConfigProblem, match="TOKEN_VALUE is not set"):
        expanded(server, {"NAME": "n"}, tmp_path)


def test_check_flags_bad_files_and_unset_variables(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text('{"mcpServers": {"a": {"type": "http"}}}')
    assert [p.rule for p in check_config(tmp_path)] == ["mcp-config"]
    (tmp_path / ".mcp.json").write_text(
        '{"mcpServers": {"a": {"command": "x", "env": {"K": "${SURELY_UNSET_VAR_Q}"}}}}'
    )
    found = check_config(tmp_path)
    assert [p.rule for p in found] == ["mcp-variables"]
    assert "SURELY_UNSET_VAR_Q" in found[0].message


def test_refs_are_inlined_and_defs_dropped() -> None:
    schema = {
        "type": "object",
        "title": "Args",
        "$defs": {
            "Point": {"type": "object", "title": "Point", "properties": {"x": {"type": "number"}}},
            "Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}},
        },
        "properties": {
            "at": {"$ref": "#/$defs/Point", "description": "where"},
            "title": {"type": "string"},
            "chain": {"$ref": "#/$defs/Node"},
        },
        "required": ["at"],
    }
    out = normalise(schema)
    text = json.dumps(out)
    assert "$ref" not in text and "$defs" not in text
    assert out["properties"]["at"] == {
        "type": "object",
        "properties": {"x": {"type": "number"}},
        "description": "where",
    }
    assert out["properties"]["title"] == {"type": "string"}  # a field may be called title
    assert "title" not in out
    assert normalise(None) == {"type": "object", "properties": {}}


def test_arguments_are_checked_against_the_original_schema() -> None:
    schema = {
        "type": "object",
        "$defs": {"N": {"type": "integer"}},
        "properties": {"repo_path": {"type": "string"}, "n": {"$ref": "#/$defs/N"}},
        "required": ["repo_path"],
    }
    assert problems(schema, {"repo_path": "x", "n": 2}) == []
    found = problems(schema, {"n": "two"})
    assert "- repo_path: field required" in found
    assert any(line.startswith("- n:") for line in found)


def _recorded_results() -> list[dict[str, object]]:
    needs_mcp_transcripts()
    found = []
    for path in sorted(TRANSCRIPTS.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            message = json.loads(line)["msg"]
            result = message.get("result")
            if isinstance(result, dict) and "content" in result:
                found.append(result)
    return found


def test_recorded_results_of_real_servers_convert() -> None:
    results = _recorded_results()
    assert len(results) >= 8
    for result in results:
        observation = convert(result)
        texts = [block["text"] for block in result["content"]]
        assert all(text in observation.text for text in texts)
        assert observation.is_error is bool(result.get("isError"))
    errors = [convert(r).text for r in results if r.get("isError")]
    assert any("repo_path" in text and "Field required" in text for text in errors)


def test_structured_content_and_other_blocks_are_kept_or_described() -> None:
    result = {
        "content": [
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "file:///x.txt", "name": "x", "size": 12},
            {"type": "resource", "resource": {"uri": "mem://a", "text": "inline text"}},
            {"type": "resource", "resource": {"uri": "mem://b", "blob": "AAAAAA=="}},
        ],
        "structured_content": {"a": 1},
        "is_error": False,
    }
    text = convert(result).text
    assert "[image: image/png, 3 bytes]" in text
    assert "[resource link: file:///x.txt (x, 12 bytes)]" in text
    assert "inline text" in text and "[resource mem://b: unknown type, 4 bytes]" in text
    assert 'structuredContent: {"a": 1}' in text
    assert convert({"content": [], "isError": True}).is_error


def test_tool_names_are_kept_to_what_providers_accept() -> None:
    from orchestrator.agent.tools import TOOL_NAME
    from orchestrator.mcp.connection import Connection
    from orchestrator.mcp.tool import McpTool
    from orchestrator.skills.skill import ServerConfig

    for remote in ("get.weather/now", "x" * 80, "日本語"):
        from orchestrator.skills import qualified_tool_name

        name = qualified_tool_name("kit", remote)
        connection = Connection("kit", ServerConfig(command="true"))
        made = McpTool(name, {"name": remote, "inputSchema": {}}, connection, None)  # type: ignore[arg-type]
        assert TOOL_NAME.match(made.spec.name) and made.remote == remote


def test_a_tool_result_text_nested_too_deeply_is_kept_as_text() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    result = {"content": [{"type": "text", "text": deep}], "structuredContent": {"a": 1}}
    observation = convert(result)
    assert observation.text.startswith("[[[") and 'structuredContent: {"a": 1}' in observation.text


# --- A server's questions during a call (elicitation): what needs no server -----------------


def _questions(**context: Any) -> Any:
    from orchestrator.agent import ToolContext
    from orchestrator.mcp.elicitation import CallQuestions

    ctx = ToolContext(agent="planner", call_id="call_1", **context)
    return CallQuestions(ctx, "kit", 600.0, lambda text: text.replace("tok-123", "***"))


def test_a_url_question_is_a_yes_no_one_naming_the_url_and_waits() -> None:
    import asyncio

    from orchestrator.agent import WaitingForInput

    questions = _questions()
    params = {"mode": "url", "message": "Sign in (tok-123)", "url": "https://example.com/a"}
    assert asyncio.run(questions.reply(params)) == {"action": "cancel"}
    [request] = questions.waiting
    assert (request.kind, request.form, request.source) == (
        "elicitation",
        "yes_no",
        "MCP server 'kit'",
    )
    assert "https://example.com/a" in request.question and "tok-123" not in request.question
    with pytest.raises(WaitingForInput):
        questions.settle()
    # A handshake-era server's later question in the same call follows from that `cancel`:
    # it is not asked. One asked beside it by a 2026 server is: a person answers both.
    assert asyncio.run(questions.reply_in_call({"message": "More?"})) == {"action": "cancel"}
    assert len(questions.waiting) == 1
    assert asyncio.run(questions.reply(params)) == {"action": "cancel"}
    assert [r.id for r in questions.waiting] == [request.id, questions.waiting[1].id]
    assert questions.waiting[1].id != request.id  # its own round


def test_a_question_under_on_input_deny_is_declined_and_the_agent_is_told() -> None:
    import asyncio

    questions = _questions(on_input="deny")
    form = {"type": "object", "properties": {"name": {"type": "string"}}}
    params = {"message": "Name?", "requestedSchema": form}
    assert asyncio.run(questions.reply(params)) == {"action": "decline"}
    questions.settle()  # nothing waits
    assert "declined by the run's policy (on_input: deny)" in questions.told("hello")


def test_a_call_asks_a_bounded_number_of_questions() -> None:
    import asyncio

    from orchestrator.mcp.elicitation import QUESTIONS_PER_CALL

    questions = _questions(on_input="deny")
    form = {"type": "object", "properties": {"n": {"type": "integer"}}}
    for _ in range(QUESTIONS_PER_CALL):
        asyncio.run(questions.reply({"message": "Again?", "requestedSchema": form}))
    assert asyncio.run(questions.reply({"message": "Again?", "requestedSchema": form})) == {
        "action": "cancel"
    }
    assert f"more than {QUESTIONS_PER_CALL} questions" in questions.told("")


def test_a_handshake_era_question_with_several_calls_running_is_cancelled_for_each() -> None:
    """Such a request does not name the call that asks: with two running, neither is
    answered for, and both say why."""
    import asyncio

    pytest.importorskip("mcp")
    from mcp_types import ElicitRequestFormParams

    from orchestrator.mcp.connection import Connection
    from orchestrator.mcp.sdk import load_sdk
    from orchestrator.skills.skill import ServerConfig

    connection = Connection("kit", ServerConfig(command="true"))
    connection._sdk = load_sdk()
    first, second = _questions(), _questions()
    connection._asking += [first, second]
    params = ElicitRequestFormParams(message="Name?", requested_schema={"type": "object"})
    reply = asyncio.run(connection._elicited(None, params))
    assert reply.action == "cancel"
    for questions in (first, second):
        assert "while 2 calls to it ran at once" in questions.told("")
        assert not questions.waiting
