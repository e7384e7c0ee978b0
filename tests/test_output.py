"""Structured answers (agent/output.py): the spec of a type or a JSON Schema, the three modes
as they go on the wire (a real HTTP server speaking each provider's format), and what the loop
does with an answer that does or does not validate (a scripted model's decisions)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
from cli_process import orchestrator
from provider_server import ProviderServer
from pydantic import BaseModel, Field
from trace_lines import into, trace_lines
from trace_signing import resign
from typing_extensions import TypedDict

from orchestrator import Agent, Message, Trace, tool
from orchestrator.agent import FINAL_TOOL, OutputSpec, strict_schema
from orchestrator.agent.run_results import STATUSES
from orchestrator.cli.rows import STYLES
from orchestrator.errors import ConfigError, NoOutput
from orchestrator.jobs import fast_forward
from orchestrator.models import (
    PRESETS,
    ChatModel,
    ForcedTool,
    ModelSettings,
    ScriptedModel,
    output_modes_for,
    output_modes_of,
    resolve_model,
)
from orchestrator.report.markup import STATUS_CLASSES
from orchestrator.trace import Event, load_checkpoint

KEY = "sk-test-output-0123456789"
Script = dict[str, list[dict[str, Any]]]


class Item(BaseModel):
    name: str
    price: float


class Invoice(BaseModel):
    """An invoice read from a document."""

    number: str
    items: list[Item]
    note: str | None = None


@dataclass
class Point:
    x: int
    y: int


class Move(TypedDict):
    piece: str
    to: str


class Fruit(BaseModel):
    kind: Literal["fruit"]
    name: str


class Vehicle(BaseModel):
    kind: Literal["vehicle"]
    wheels: int


INVOICE = {"number": "A-7", "items": [{"name": "tea", "price": 3.5}], "note": None}


@tool
def lookup(number: str) -> str:
    """Look up an invoice by its number."""
    return f"Invoice {number}: one tea at 3.50."


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] if "function" in t else t["name"] for t in body["tools"]]


def without_cache_marks(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_cache_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_cache_marks(v) for v in value]
    return value


# The spec: a type or a JSON Schema, and how an answer is read.


def test_a_pydantic_model_validates_an_answer_and_names_the_failing_fields() -> None:
    spec = OutputSpec.of(Invoice)
    assert spec.schema == Invoice.model_json_schema()
    assert (spec.name, spec.description, spec.wrapped) == (
        "Invoice",
        "An invoice read from a document.",
        False,
    )
    assert spec.parse(json.dumps(INVOICE)) == Invoice.model_validate(INVOICE)
    with pytest.raises(ValueError) as failed:
        spec.parse('{"number": 7, "items": [{"name": "tea", "price": "cheap"}]}')
    text = str(failed.value)
    assert "- number: Input should be a valid string (got 7)" in text
    assert "- items.0.price: Input should be a valid number" in text and '(got "cheap")' in text


def test_a_fenced_answer_is_read_and_text_that_is_not_json_says_so() -> None:
    spec = OutputSpec.of(Point)
    assert spec.parse('Here it is:\n```json\n{"x": 1, "y": 2}\n```\nDone.') == Point(1, 2)
    with pytest.raises(ValueError, match="not valid JSON"):
        spec.parse("The point is (1, 2).")


def test_a_raw_newline_inside_a_string_is_read_as_the_escape_it_stands_for() -> None:
    """A small model under a server's grammar answered `{"city": "},<newline>{", ...}`:
    JSON's strict reading refuses the raw control character; the answer is read."""
    spec = OutputSpec.of(dict[str, str])
    raw = '{"city": "Par' + chr(10) + "is" + chr(9) + 'FR"}'  # a real newline and tab
    assert spec.parse(raw) == {"city": "Par\nis\tFR"}
    with pytest.raises(ValueError, match="not valid JSON"):
        spec.parse('{"city": Paris}')


def test_dataclasses_and_typed_dicts_are_objects_scalars_and_unions_are_wrapped() -> None:
    assert not OutputSpec.of(Point).wrapped
    assert OutputSpec.of(Move).parse('{"piece": "knight", "to": "f3"}') == {
        "piece": "knight",
        "to": "f3",
    }
    number = OutputSpec.of(int)
    assert number.wrapped
    assert number.object_schema == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
    }
    assert number.validate({"result": 42}, wrapped=True) == 42
    assert number.parse("42") == 42  # the prompted mode reads the value itself
    with pytest.raises(ValueError, match='one field, "result"'):
        number.validate({"value": 42}, wrapped=True)
    union = OutputSpec.of(Fruit | Vehicle)
    assert union.wrapped and set(union.object_schema["$defs"]) == {"Fruit", "Vehicle"}
    value = union.validate({"result": {"kind": "vehicle", "wheels": 4}}, wrapped=True)
    assert value == Vehicle(kind="vehicle", wheels=4)
    with pytest.raises(ValueError, match=r"- result\.Vehicle\.wheels: .*\(got \"four\"\)"):
        union.validate({"result": {"kind": "vehicle", "wheels": "four"}}, wrapped=True)


def test_a_json_schema_is_checked_and_answers_validated_with_jsonschema() -> None:
    schema = {
        "title": "Score",
        "type": "object",
        "properties": {"score": {"type": "integer", "minimum": 0}},
        "required": ["score"],
    }
    spec = OutputSpec.from_schema(schema)
    assert spec.parse('{"score": 3}') == {"score": 3}
    with pytest.raises(ValueError, match=r"- score: -1 is less than the minimum of 0"):
        spec.parse('{"score": -1}')
    with pytest.raises(ValueError, match="'score' is a required property"):
        spec.parse("{}")
    with pytest.raises(ConfigError, match="not valid JSON Schema at properties/score/type"):
        OutputSpec.from_schema({"type": "object", "properties": {"score": {"type": "int"}}})


def test_a_json_schema_without_jsonschema_installed_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # import fails as when not installed
    with pytest.raises(ConfigError, match=r"needs the jsonschema package, a dependency"):
        OutputSpec.from_schema({"type": "object"})


def test_a_schema_is_made_strict_where_it_can_be() -> None:
    strict, reason = strict_schema(OutputSpec.of(Invoice).object_schema)
    assert reason is None
    assert strict["additionalProperties"] is False
    assert strict["required"] == ["number", "items", "note"]  # the optional one too
    assert "default" not in strict["properties"]["note"]  # a null default is dropped
    item = strict["$defs"]["Item"]
    assert (item["additionalProperties"], item["required"]) == (False, ["name", "price"])

    class Described(BaseModel):
        item: Item = Field(description="The one item.")

    inlined, _ = strict_schema(OutputSpec.of(Described).object_schema)
    assert inlined["properties"]["item"]["properties"] == item["properties"]

    class Tagged(BaseModel):
        thing: Fruit | Vehicle = Field(discriminator="kind")

    branches, _ = strict_schema(OutputSpec.of(Tagged).object_schema)
    thing = branches["properties"]["thing"]
    assert "anyOf" in thing and "oneOf" not in thing and "discriminator" not in thing

    class Tally(BaseModel):
        counts: dict[str, int]

    _, why = strict_schema(OutputSpec.of(Tally).object_schema)
    assert why == "counts is an object of any keys"


# The modes on the wire.


def openai_model(server: ProviderServer, provider: str = "openai", **options: Any) -> ChatModel:
    return resolve_model(
        f"{provider}:test-model",
        base_url=server.openai_url,
        api_key=KEY,
        backoff_base=0.01,
        **options,
    )


@pytest.mark.parametrize("stream", [True, False])
async def test_openai_native_sends_a_strict_json_schema_response_format(stream: bool) -> None:
    with ProviderServer({"*": [{"content": json.dumps(INVOICE)}]}) as server:
        model = server.adapter("openai", KEY, stream=stream)
        result = await Agent(model, [lookup], output_type=Invoice).run("Read A-7.")
    assert (result.status, result.output) == ("completed", Invoice.model_validate(INVOICE))
    assert json.loads(result.text) == result.data == INVOICE
    [body] = server.bodies()
    strict, _ = strict_schema(Invoice.model_json_schema())
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "Invoice",
            "schema": strict,
            "strict": True,
            "description": "An invoice read from a document.",
        },
    }
    assert tool_names(body) == ["lookup"]  # no final-answer tool in native mode


async def test_a_local_server_gets_native_output_by_default_and_a_scalar_is_wrapped() -> None:
    with ProviderServer({"*": [{"content": '{"result": 12}'}]}) as server:
        model = openai_model(server, "openai-compatible")
        result = await Agent(model, output_type=int).run("How many?")
    assert (result.status, result.output, result.text) == ("completed", 12, "12")
    [body] = server.bodies()
    assert body["response_format"]["json_schema"] == {
        "name": "result",
        "schema": {
            "type": "object",
            "properties": {"result": {"type": "integer"}},
            "required": ["result"],
            "additionalProperties": False,
        },
        "strict": True,
    }


async def test_output_format_json_object_sends_the_schema_beside_the_type() -> None:
    # llama-cpp-python's server takes only `{"type": "json_object", "schema": ...}`.
    with ProviderServer({"*": [{"content": '{"result": 12}'}]}) as server:
        model = openai_model(server, "openai-compatible", output_format="json_object")
        result = await Agent(model, output_type=int).run("How many?")
    assert (result.status, result.output) == ("completed", 12)
    [body] = server.bodies()
    assert body["response_format"] == {
        "type": "json_object",
        "schema": {
            "type": "object",
            "properties": {"result": {"type": "integer"}},
            "required": ["result"],
            "additionalProperties": False,
        },
    }


async def test_a_schema_that_cannot_be_strict_goes_with_strict_false_and_a_warning() -> None:
    class Tally(BaseModel):
        counts: dict[str, int]

    with ProviderServer({"*": [{"content": '{"counts": {"a": 1}}'}]}) as server:
        with pytest.warns(UserWarning, match="cannot be made strict .*counts is an object"):
            agent = Agent(openai_model(server), output_type=Tally)
        result = await agent.run("Count.")
    assert result.output == Tally(counts={"a": 1})
    [body] = server.bodies()
    assert body["response_format"]["json_schema"]["strict"] is False
    assert body["response_format"]["json_schema"]["schema"] == Tally.model_json_schema()


async def test_anthropic_native_sends_output_config_format() -> None:
    with ProviderServer({"*": [{"content": json.dumps(INVOICE)}]}) as server:
        model = server.adapter("anthropic", KEY)
        result = await Agent(model, output_type=Invoice, output_mode="native").run("Read.")
    assert result.output == Invoice.model_validate(INVOICE)
    [body] = server.bodies()
    strict, _ = strict_schema(Invoice.model_json_schema())
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": strict}}
    assert "tools" not in body


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_tool_mode_keeps_one_tools_array_from_the_first_request_to_the_last(
    provider: str,
) -> None:
    script: Script = {
        "*": [
            {"tool_calls": [call("lookup", number="A-7")]},
            {"tool_calls": [call(FINAL_TOOL, number="A-7", items=[{"name": "tea"}])]},
            {"content": "Done.", "tool_calls": [call(FINAL_TOOL, **INVOICE)]},
        ]
    }
    with ProviderServer(script) as server:
        model = server.adapter(provider, KEY)
        result = await Agent(model, [lookup], output_type=Invoice, output_mode="tool").run("Go.")
    assert (result.status, result.output) == ("completed", Invoice.model_validate(INVOICE))
    bodies = [without_cache_marks(body) for body in server.bodies()]
    assert len(bodies) == 3
    assert all(body["tools"] == bodies[0]["tools"] for body in bodies)
    assert tool_names(bodies[0]) == ["lookup", FINAL_TOOL]
    final = bodies[0]["tools"][1]
    schema = final["input_schema"] if provider == "anthropic" else final["function"]["parameters"]
    assert schema == Invoice.model_json_schema()
    assert all("response_format" not in b and "output_config" not in b for b in bodies)
    # The invalid answer went back as the final tool's error result, naming the field.
    if provider == "anthropic":
        [error] = [b for b in bodies[2]["messages"][-1]["content"] if b.get("is_error")]
        text = error["content"]
    else:
        text = bodies[2]["messages"][-1]["content"]
    assert "- items.0.price: Field required" in text


async def test_anthropic_defaults_to_the_tool_mode() -> None:
    with ProviderServer({"*": [{"tool_calls": [call(FINAL_TOOL, result=3)]}]}) as server:
        result = await Agent(server.adapter("anthropic", KEY), output_type=int).run("Three?")
    assert (result.status, result.output) == ("completed", 3)
    [body] = server.bodies()
    assert tool_names(body) == [FINAL_TOOL]
    assert body["tools"][0]["input_schema"]["properties"] == {"result": {"type": "integer"}}


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_prompted_mode_puts_the_schema_in_the_system_prompt(provider: str) -> None:
    answer = f"```json\n{json.dumps(INVOICE)}\n```"
    with ProviderServer({"*": [{"content": answer}]}) as server:
        model = server.adapter(provider, KEY)
        agent = Agent(model, system="Read invoices.", output_type=Invoice, output_mode="prompted")
        result = await agent.run("Read.")
    assert result.output == Invoice.model_validate(INVOICE)
    [body] = server.bodies()
    if provider == "anthropic":
        system = body["system"][0]["text"]
    else:
        system = body["messages"][0]["content"]
    assert system.startswith("Read invoices.\n\n## Final answer")
    assert json.dumps(Invoice.model_json_schema(), ensure_ascii=False) in system
    assert "tools" not in body and "response_format" not in body and "output_config" not in body


# The loop: retries, `output_invalid`, the last step.


def test_a_native_answer_that_fails_goes_back_naming_the_field_and_the_retry_validates() -> None:
    model = ScriptedModel(
        {"*": [{"content": '{"number": "A-7", "items": []}x'}, {"content": json.dumps(INVOICE)}]}
    )
    events: list[Event] = []
    agent = Agent(model, output_type=Invoice, trace=Trace(listeners=[into(events)], secrets=[]))
    result = agent.run_sync("Read.")
    assert (result.status, result.output) == ("completed", Invoice.model_validate(INVOICE))
    note = result.messages[-2]
    assert note.role == "user" and note.content is not None
    assert note.content.startswith("[orchestrator] The answer is not valid JSON (Extra data")
    assert "(2 tries left)" in note.content
    assert model.requests[0].output_schema is not None
    assert model.requests[0].output_schema.name == "Invoice"
    [start] = [e for e in events if e["type"] == "run_start"]
    assert start["output"] == {"mode": "native", "name": "Invoice"}


def test_after_the_retries_the_run_ends_output_invalid_with_the_error_and_the_raw_answer() -> None:
    bad = '{"number": "A-7", "items": [{"name": "tea", "price": "cheap"}]}'
    model = ScriptedModel({"*": [{"content": bad}] * 3})
    events: list[Event] = []
    trace = Trace(listeners=[into(events)], secrets=[])
    result = Agent(model, output_type=Invoice, output_retries=2, trace=trace).run_sync("Read.")
    assert result.status == "output_invalid"
    assert (result.text, result.data, result.steps) == (bad, None, 3)
    assert result.error is not None and "- items.0.price: Input should be a valid number" in (
        result.error
    )
    notes = [m.content or "" for m in result.messages if m.role == "user"][1:]
    assert [note.rsplit("(", 1)[1] for note in notes] == [
        "2 tries left).",
        "this is your last try).",
    ]
    [end] = [e for e in events if e["type"] == "run_end"]
    assert (end["status"], end["output"]) == ("output_invalid", bad)
    with pytest.raises(NoOutput, match="ended output_invalid without a valid answer"):
        _ = result.output


def test_no_retries_ends_at_the_first_invalid_answer() -> None:
    model = ScriptedModel({"*": [{"content": "twelve"}]})
    result = Agent(model, output_type=int, output_retries=0).run_sync("How many?")
    assert (result.status, result.text, result.steps) == ("output_invalid", "twelve", 1)


def test_the_last_step_allows_no_retry_and_forces_the_final_tool() -> None:
    script: Script = {
        "*": [
            {"tool_calls": [call("lookup", number="A-7")]},
            {"tool_calls": [call(FINAL_TOOL, number="A-7")]},
        ]
    }
    model = ScriptedModel(script)
    agent = Agent(model, [lookup], output_type=Invoice, output_mode="tool", max_steps=2)
    result = agent.run_sync("Read.")
    assert model.requests[-1].tool_choice == ForcedTool(FINAL_TOOL)
    assert result.status == "output_invalid"
    assert result.error is not None and "- items: Field required" in result.error
    final = result.messages[-1]
    assert (final.role, final.error_type) == ("tool", "invalid_arguments")
    assert final.content is not None and "Fix it" not in final.content


def test_a_valid_final_call_skips_the_turns_other_calls_and_an_invalid_one_lets_them_run() -> None:
    ran: list[str] = []

    @tool
    def note(text: str) -> str:
        """Write a note."""
        ran.append(text)
        return "noted"

    script: Script = {
        "*": [
            {"tool_calls": [call(FINAL_TOOL, result="seven"), call("note", text="first")]},
            {"tool_calls": [call("note", text="second"), call(FINAL_TOOL, result=7)]},
        ]
    }
    agent = Agent(ScriptedModel(script), [note], output_type=int, output_mode="tool")
    result = agent.run_sync("Count.")
    assert (result.status, result.output, ran) == ("completed", 7, ["first"])
    results = [(m.name, m.error_type, m.content) for m in result.messages if m.role == "tool"]
    assert results[0][:2] == (FINAL_TOOL, "invalid_arguments")
    assert results[1:] == [
        ("note", None, "noted"),
        ("note", "skipped", "Skipped: the final answer was given in the same turn."),
        (FINAL_TOOL, None, "Final answer accepted."),
    ]


def test_in_tool_mode_a_text_answer_is_sent_back_to_call_the_tool() -> None:
    script: Script = {"*": [{"content": "It is 7."}, {"tool_calls": [call(FINAL_TOOL, result=7)]}]}
    result = Agent(ScriptedModel(script), output_type=int, output_mode="tool").run_sync("Count.")
    assert (result.status, result.output) == ("completed", 7)
    assert result.messages[2].content == (
        "[orchestrator] Give your final answer by calling final_result, not as text.\n"
        "Fix it and call final_result again (2 tries left)."
    )


def test_a_union_and_a_json_schema_as_output_types() -> None:
    script = {"*": [{"content": '{"result": {"kind": "fruit", "name": "pear"}}'}]}
    result = Agent(ScriptedModel(script), output_type=Fruit | Vehicle).run_sync("What?")
    assert result.output == Fruit(kind="fruit", name="pear")
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    raw = Agent(ScriptedModel({"*": [{"content": '{"ok": true}'}]}), output_type=schema)
    assert raw.run_sync("Fine?").output == {"ok": True}


async def test_a_resumed_run_checks_the_answer_it_was_cut_off_after(tmp_path: Path) -> None:
    script = {"*": [{"content": "seven"}, {"content": '{"result": 7}'}]}
    path = tmp_path / "t.jsonl"
    with Trace(path) as trace:
        whole = await Agent(ScriptedModel(script), output_type=int, trace=trace).run("Count.")
    assert (whole.status, whole.output) == ("completed", 7)
    events = trace_lines(path)
    answered = next(
        i
        for i, e in enumerate(events)
        if e["type"] == "message" and e["message"].get("content") == "seven"
    )
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[: answered + 1]))  # killed right after the answer
    resign(path)
    checkpoint = load_checkpoint(path)
    model = ScriptedModel(script)
    fast_forward(model, checkpoint)
    with Trace(path, resume=checkpoint) as trace:
        agent = Agent(model, output_type=int, trace=trace)
        resumed = await agent.run("Count.", history=trace.history(agent.name))
    # The recorded answer is judged as a new one would be: sent back, then answered again.
    assert (resumed.status, resumed.output) == ("completed", 7)
    assert [m.content or "" for m in resumed.messages if m.role == "user"][1].startswith(
        "[orchestrator] The answer is not valid JSON"
    )
    model.assert_all_used()


def test_a_mode_the_model_cannot_give_and_a_mode_without_a_type_are_refused() -> None:
    with ProviderServer({}) as server:
        deepseek = resolve_model("deepseek:deepseek-chat", base_url=server.openai_url, api_key=KEY)
        with pytest.raises(ConfigError, match="cannot give native .*'tool' or 'prompted'"):
            Agent(deepseek, output_type=int, output_mode="native")
        assert Agent(deepseek, output_type=int).output is not None
    with pytest.raises(ConfigError, match="no output_type"):
        Agent(ScriptedModel({}), output_mode="tool")
    with pytest.raises(ConfigError, match="two tools are named 'final_result'"):

        @tool
        def final_result() -> str:
            """A tool of the user's own that takes the name."""
            return ""

        Agent(ScriptedModel({}), [final_result], output_type=int, output_mode="tool")


@pytest.mark.parametrize("name", [*PRESETS, "scripted"])
def test_a_models_output_modes_are_known_from_its_settings_without_building_it(name: str) -> None:
    settings = ModelSettings(name=f"{name}:m")
    built = (
        ScriptedModel({})
        if name == "scripted"
        else resolve_model(settings, base_url="http://127.0.0.1:9/v1", api_key=KEY)
    )
    assert output_modes_for(settings) == output_modes_of(built)


def test_every_status_has_a_colour_in_the_live_view_and_the_report() -> None:
    assert "output_invalid" in STATUSES
    assert STYLES.keys() >= STATUSES
    assert STATUS_CLASSES.keys() >= STATUSES


def test_messages_are_unchanged_by_an_agent_without_an_output_type() -> None:
    model = ScriptedModel({"*": [{"content": "plain"}]})
    result = Agent(model).run_sync("Hi.")
    assert (result.status, result.output, result.data) == ("completed", "plain", None)
    assert model.requests[0].output_schema is None
    assert [m.role for m in result.messages] == ["user", "assistant"]
    assert isinstance(result.messages[0], Message)


# The last step, the budget's wrap-up and a resumed run, with an output type.


def test_in_tool_mode_the_last_step_note_says_to_call_the_final_tool() -> None:
    script: Script = {
        "*": [
            {"tool_calls": [call("lookup", number="A-7")]},
            {"tool_calls": [call(FINAL_TOOL, **INVOICE)]},
        ]
    }
    model = ScriptedModel(script)
    agent = Agent(model, [lookup], output_type=Invoice, output_mode="tool", max_steps=2)
    result = agent.run_sync("Read.")
    assert (result.status, result.output) == ("max_steps", Invoice.model_validate(INVOICE))
    note = model.requests[-1].messages[-1]
    assert note.role == "user" and note.content is not None
    assert f"Call {FINAL_TOOL} now" in note.content
    assert "no more tool calls are possible" not in note.content


@tool
def fetch(page: int) -> str:
    """Fetch one page of a long report."""
    return f"page {page}: " + "figures " * 150


# A budget that two pages fit, but not a third request with its 200-token output reserve,
# while a short wrap-up answer still does (the tool mode's requests carry one more tool).
PAGES_BUDGET = {"tool": 1000, "native": 850}


def pages_then(last: dict[str, Any]) -> ScriptedModel:
    """Two pages read, then `last`."""
    turns: list[dict[str, Any]] = [{"tool_calls": [call("fetch", page=i)]} for i in (1, 2)]
    return ScriptedModel({"*": [*turns, last]})


async def test_in_tool_mode_the_budget_wrap_up_offers_the_final_tool_and_keeps_its_data() -> None:
    model = pages_then({"tool_calls": [call(FINAL_TOOL, result=2)]})
    agent = Agent(model, [fetch], output_type=int, output_mode="tool", max_output_tokens=200)
    result = await agent.run("How many pages?", max_tokens=PAGES_BUDGET["tool"])
    wrap_up = model.requests[-1]
    assert wrap_up.tool_choice == ForcedTool(FINAL_TOOL)
    assert [t.name for t in wrap_up.tools] == ["fetch", FINAL_TOOL]
    assert f"Call {FINAL_TOOL} now" in (wrap_up.messages[-1].content or "")
    assert (result.status, result.output, result.text, result.error) == (
        "budget_exhausted",
        2,
        "2",
        None,
    )
    assert result.messages[-1].content == "Final answer accepted."
    model.assert_all_used()


@pytest.mark.parametrize(
    ("mode", "last", "why"),
    [
        ("tool", {"content": "Two, I think."}, f"by calling {FINAL_TOOL}, not as text"),
        ("native", {"content": "Two, I think."}, "The answer is not valid JSON"),
    ],
)
async def test_a_wrap_up_answer_that_does_not_validate_says_why_data_is_missing(
    mode: Literal["tool", "native"], last: dict[str, Any], why: str
) -> None:
    model = pages_then(last)
    agent = Agent(model, [fetch], output_type=int, output_mode=mode, max_output_tokens=200)
    result = await agent.run("How many pages?", max_tokens=PAGES_BUDGET[mode])
    assert model.requests[-1].tool_choice == (
        "none" if mode == "native" else ForcedTool(FINAL_TOOL)
    )
    assert (result.status, result.data, result.text) == (
        "budget_exhausted",
        None,
        "Two, I think.",
    )
    assert result.error is not None
    assert result.error.startswith("the token budget ran out before a valid answer: ")
    assert why in result.error
    with pytest.raises(NoOutput, match="budget_exhausted without a valid answer: the token"):
        _ = result.output


async def test_a_budget_with_no_room_for_a_wrap_up_says_why_data_is_missing() -> None:
    model = ScriptedModel({"*": [{"tool_calls": [call("fetch", page=1)]}]})
    agent = Agent(model, [fetch], output_type=int, output_mode="tool", max_output_tokens=200)
    result = await agent.run("How many pages?", max_tokens=400)
    assert (result.status, result.data, result.steps) == ("budget_exhausted", None, 1)
    assert result.error == (
        "the token budget ran out before a valid answer: no room was left for a last answer"
    )


@pytest.mark.parametrize("mode", ["native", "tool"])
async def test_a_resumed_run_goes_on_counting_the_answers_that_did_not_validate(
    tmp_path: Path, mode: Literal["native", "tool"]
) -> None:
    bad: dict[str, Any] = (
        {"content": "seven"} if mode == "native" else {"tool_calls": [call(FINAL_TOOL, result="x")]}
    )
    script = {"*": [bad, bad, bad]}
    path = tmp_path / "t.jsonl"
    with Trace(path) as trace:
        agent = Agent(ScriptedModel(script), output_type=int, output_mode=mode, trace=trace)
        whole = await agent.run("Count.")
    assert (whole.status, whole.steps) == ("output_invalid", 3)
    events = trace_lines(path)
    second_answer = [
        i for i, e in enumerate(events) if e["type"] == "model_call" and e["step"] == 2
    ][0]
    told = next(
        i
        for i, e in enumerate(events)
        if i > second_answer and e["type"] == "message" and e["message"]["role"] in ("user", "tool")
    )
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[: told + 1]))  # killed once told of its second failure
    resign(path)
    checkpoint = load_checkpoint(path)
    model = ScriptedModel(script)
    fast_forward(model, checkpoint)
    with Trace(path, resume=checkpoint) as trace:
        agent = Agent(model, output_type=int, output_mode=mode, trace=trace)
        resumed = await agent.run("Count.", history=trace.history(agent.name))
    # Two failures before the cut, the third after it: no try is left, as in the whole run.
    assert (resumed.status, resumed.steps) == ("output_invalid", 3)
    model.assert_all_used()


def test_an_output_mode_without_an_output_type_is_refused_when_the_agent_is_built() -> None:
    """`output_mode` alone asks for nothing: the agent says so instead of answering in text."""
    model = ScriptedModel({"*": [{"content": "done"}]})
    with pytest.raises(ConfigError, match="output_mode is set, but there is no output_type"):
        Agent(model, output_mode="tool")
    assert Agent(model).output is None


# Answers that are not JSON's numbers and text: sent back once more, with the reason.


def strict_json(text: str) -> Any:
    """JSON read as the standard has it: `NaN` and `Infinity` are not numbers."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} in what should be strict JSON")

    return json.loads(text, parse_constant=refuse)


class Total(BaseModel):
    total: float


@pytest.mark.parametrize(
    "output_type",
    [Total, {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}],
    ids=["pydantic", "json-schema"],
)
def test_nan_and_infinite_numbers_go_back_and_never_reach_the_text_or_the_trace(
    output_type: Any, tmp_path: Path
) -> None:
    answers = ['{"total": NaN}', '{"total": 1e999}', '{"total": -Infinity}', '{"total": 3.5}']
    model = ScriptedModel({"*": [{"content": answer} for answer in answers]})
    agent = Agent(model, output_type=output_type, output_retries=3)

    result = agent.run_sync("Add up.", trace=tmp_path / "t.jsonl")

    assert (result.status, result.validated, result.data) == ("completed", True, {"total": 3.5})
    notes = [m.content or "" for m in result.messages if m.role == "user"][1:]
    assert [note.splitlines()[:2] for note in notes] == [
        [
            "[orchestrator] The answer is not JSON's numbers and text:",
            f"- total: {shown} is not a JSON number; write a finite number",
        ]
        for shown in ("NaN", "an infinite number", "an infinite number")
    ]
    assert strict_json(result.text) == {"total": 3.5}
    for line in (tmp_path / "t.jsonl").read_text().splitlines():
        strict_json(line)


def test_a_required_number_that_is_nan_is_never_validated_as_null() -> None:
    """pydantic reads NaN as a float and writes it as null: the answer must not pass."""
    model = ScriptedModel({"*": [{"content": '{"total": NaN}'}] * 2})

    result = Agent(model, output_type=Total, output_retries=1).run_sync("Add up.")

    assert (result.status, result.validated, result.data) == ("output_invalid", False, None)
    assert result.error == (
        "The answer is not JSON's numbers and text:\n"
        "- total: NaN is not a JSON number; write a finite number"
    )


def test_in_tool_mode_a_non_finite_argument_goes_back_as_the_final_calls_error() -> None:
    script: Script = {
        "*": [
            {"tool_calls": [{"name": FINAL_TOOL, "arguments": '{"total": Infinity}'}]},
            {"tool_calls": [call(FINAL_TOOL, total=2)]},
        ]
    }
    result = Agent(ScriptedModel(script), output_type=Total, output_mode="tool").run_sync("Add.")
    assert (result.status, result.data) == ("completed", {"total": 2.0})
    error = next(m for m in result.messages if m.role == "tool")
    assert error.error_type == "invalid_arguments"
    assert "- total: an infinite number is not a JSON number" in (error.content or "")


TREE_SCHEMA = {
    "$defs": {
        "Node": {
            "type": "object",
            "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
        }
    },
    "type": "object",
    "properties": {"tree": {"$ref": "#/$defs/Node"}},
    "required": ["tree"],
}


def test_an_answer_600_deep_goes_back_as_invalid_not_a_recursion_error() -> None:
    tree: dict[str, Any] = {"children": []}
    for _ in range(299):  # each level is an object and a list: 600 deep
        tree = {"children": [tree]}
    deep = json.dumps({"tree": tree})
    model = ScriptedModel({"*": [{"content": deep}, {"content": deep}]})

    result = Agent(model, output_type=TREE_SCHEMA, output_retries=1).run_sync("Draw.")

    assert result.status == "output_invalid"
    assert result.error == (
        "The answer is nested more than 100 deep (objects and arrays); deeper answers are not "
        "read. Flatten it."
    )
    assert len(model.requests) == 2
    assert "this is your last try" in (model.requests[1].messages[-1].content or "")


def test_an_escaped_lone_surrogate_goes_back_as_not_text() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    answers = ['{"name": "tea \\ud800"}', '{"\\udfff": 1, "name": "tea"}', '{"name": "tea"}']
    model = ScriptedModel({"*": [{"content": answer} for answer in answers]})

    result = Agent(model, output_type=schema).run_sync("Name it.")

    assert (result.status, result.data) == ("completed", {"name": "tea"})
    notes = [m.content or "" for m in result.messages if m.role == "user"][1:]
    assert (
        "- name: holds an escaped lone surrogate (\\ud800 to \\udfff), which is not text"
        in (notes[0])
    )
    assert "- (the answer): a field name holds an escaped lone surrogate" in notes[1]


def test_run_json_of_answers_that_are_not_json_numbers_or_text(tmp_path: Path) -> None:
    """Through the command line: a lone surrogate and NaN go back, the third answer holds,
    and what `run --json` prints is strict JSON."""
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "total": {"type": "number"}},
        "required": ["name", "total"],
    }
    answers = [
        '{"name": "tea \\ud800", "total": 1}',
        '{"name": "tea", "total": NaN}',
        '{"name": "tea", "total": 1.5}',
    ]
    (tmp_path / "script.yaml").write_text(json.dumps({"read": [{"content": a} for a in answers]}))
    spec = {
        "name": "t",
        "model": "scripted:script.yaml",
        "steps": [{"id": "read", "task": "Read.", "output_schema": schema}],
    }
    (tmp_path / "job.yaml").write_text(json.dumps(spec))

    run = orchestrator("run", "job.yaml", "--json", "--quiet", cwd=tmp_path)

    assert run.returncode == 0, run.stdout + run.stderr
    assert "UnicodeEncodeError" not in run.stderr
    printed = strict_json(run.stdout)
    assert printed["data"] == {"name": "tea", "total": 1.5}


def test_a_model_that_fails_while_its_answer_is_retried_says_why_it_was_sent_back() -> None:
    """The script runs out on the retry: the error names the model's failure and, beside it,
    what the answer sent back got wrong."""
    from orchestrator.models import ScriptedModel

    model = ScriptedModel({"*": [{"content": '{"number": "A-7"}'}]})
    result = Agent(model, output_type=Invoice, output_mode="prompted").run_sync("Invoice?")
    assert result.status == "error"
    error = result.error or ""
    assert "no turn left" in error and "while its answer was sent back because" in error
    assert "items" in error  # the field the first answer lacked
