"""Hostile YAML: every file the package reads goes through one loader that refuses alias bombs
("billion laughs"), self-referring aliases and duplicate keys, fast and with a clear error."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import yaml

from orchestrator.errors import ConfigError
from orchestrator.jobs import SpecError, load_spec, parse_model_options
from orchestrator.models.prices import load_prices
from orchestrator.models.resolve import read_alias_file
from orchestrator.models.scripted import load_script
from orchestrator.security import inputs
from orchestrator.security.inputs import YamlInputError, YamlTooLarge, load_yaml
from orchestrator.skills.skill_md import TOO_LARGE, FrontmatterError, parse_yaml


def laughs(levels: int = 9, key: str = "bomb") -> str:
    """A mapping entry `key:` whose aliases expand to 9**levels strings from a few lines."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        refs = ", ".join([f"*l{level - 1}"] * 9)
        lines.append(f"l{level}: &l{level} [{refs}]")
    lines.append(f"{key}: *l{levels - 1}")
    return "\n".join(lines) + "\n"


def refused_fast(action: object) -> Exception:
    start = time.perf_counter()
    with pytest.raises(Exception) as caught:
        action()  # type: ignore[operator]
    assert time.perf_counter() - start < 1.0
    return caught.value


def test_alias_bomb_is_refused_at_once_with_the_file_named() -> None:
    error = refused_fast(lambda: load_yaml(laughs(), "bomb.yaml"))
    assert isinstance(error, YamlTooLarge)
    assert str(error).startswith("bomb.yaml: line ")
    assert "aliases expand it by" in str(error)


def test_a_few_aliases_still_load() -> None:
    text = "base: &b {model: x, tries: 2}\none: *b\ntwo: {<<: *b, tries: 3}\n"
    assert load_yaml(text, "ok.yaml") == {
        "base": {"model": "x", "tries": 2},
        "one": {"model": "x", "tries": 2},
        "two": {"model": "x", "tries": 3},
    }


def test_self_referring_alias_and_duplicate_keys_are_refused() -> None:
    with pytest.raises(YamlTooLarge, match="contains it"):
        load_yaml("a: &a [1, *a]\n", "loop.yaml")
    with pytest.raises(YamlInputError, match="line 2, column 1: invalid YAML: the key 'a'"):
        load_yaml("a: 1\na: 2\n", "twice.yaml")
    assert load_yaml("a: 1\na: 2\n", "twice.yaml", unique_keys=False) == {"a": 2}


def test_too_many_aliases_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inputs, "MAX_ALIASES", 3)
    text = "a: &a 1\nlist: [*a, *a, *a, *a]\n"
    with pytest.raises(YamlTooLarge, match="more than 3 aliases"):
        load_yaml(text, "many.yaml")


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000 + "]" * 100_000, "a: " + "{a: " * 100_000 + "}" * 100_000, "- " * 100_000 + "x"],
    ids=["flow-sequences", "flow-mappings", "block-sequences"],
)
def test_deep_nesting_is_an_error_not_a_crash(text: str) -> None:
    """libyaml composes by recursing in C: a document this deep would overflow its stack and
    end the process. It is refused first, where it goes past the bound."""
    with pytest.raises(YamlTooLarge, match=r"refused: it is nested more than 1000 deep"):
        load_yaml(text, "deep.yaml")
    assert load_yaml("[" * 999 + "]" * 999, "deep.yaml") is not None


def test_the_c_loader_is_used_when_pyyaml_has_it() -> None:
    if getattr(yaml, "__with_libyaml__", False):
        assert issubclass(inputs._SafeLoader, yaml.CSafeLoader)


def test_spec_with_an_alias_bomb(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: j\nmodel: scripted:s.yaml\ngoal: hi\n" + laughs(key="x"), "utf-8")
    error = refused_fast(lambda: load_spec(spec))
    assert isinstance(error, SpecError)
    assert str(spec) in str(error) and "aliases expand it" in str(error)


def test_model_script_with_an_alias_bomb(tmp_path: Path) -> None:
    script = tmp_path / "bomb.script.yaml"
    script.write_text(laughs(key="goal"), "utf-8")
    error = refused_fast(lambda: load_script(script))
    assert isinstance(error, ConfigError)
    assert str(script) in str(error) and "aliases expand it" in str(error)


def test_alias_file_with_an_alias_bomb(tmp_path: Path) -> None:
    aliases = tmp_path / "models.yaml"
    aliases.write_text(laughs(key="fast"), "utf-8")
    error = refused_fast(lambda: read_alias_file(aliases))
    assert isinstance(error, ConfigError)
    assert str(aliases) in str(error) and "aliases expand it" in str(error)


def test_prices_file_with_an_alias_bomb(tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text(laughs(key="gpt"), "utf-8")
    error = refused_fast(lambda: load_prices(prices))
    assert isinstance(error, ConfigError)
    assert str(prices) in str(error) and "aliases expand it" in str(error)


def test_skill_frontmatter_with_an_alias_bomb() -> None:
    text = "name: bomb\ndescription: d\n" + laughs(key="metadata")
    error = refused_fast(lambda: parse_yaml(text))
    assert isinstance(error, FrontmatterError)
    assert error.problem.rule == TOO_LARGE and error.problem.fatal
    assert "aliases expand it" in error.problem.message


def test_model_option_with_an_alias_bomb_stays_text() -> None:
    bomb = "{" + laughs().strip().replace("\n", ", ") + "}"
    start = time.perf_counter()
    assert parse_model_options([f"extra={bomb}"]) == {"extra": bomb}
    assert time.perf_counter() - start < 1.0


# -- the usual slips, named in words, at the line really at fault ---------------------------


@pytest.mark.parametrize("loader", ["C", "pure"])
@pytest.mark.parametrize(
    ("text", "line", "hint"),
    [
        (
            "name: x\nmodel scripted:s.yaml\nsteps: []\n",
            2,
            "line 2 (model scripted:s.yaml) has no ':' after its key; a likely missing colon",
        ),
        (
            "name: x\nsteps:\n  - id: a\n    task: b\n   depends_on: [c]\n",
            5,
            "line 5 (depends_on: [c]) is indented differently from the lines above it; a "
            "likely indentation slip",
        ),
        (
            "name: x\ngoal: hi: there\n",
            2,
            "line 2 (goal: hi: there) holds a second ': ' inside a value; put the value in quotes",
        ),
        (
            "name: x\nmodel: m\n   goal: hi\n",
            3,
            "line 3 (goal: hi) is indented more than the line above it; a likely indentation slip",
        ),
        (
            "name: x\nsteps:\n  - id: a\n    task: b\n      depends_on: [a]\n",
            5,
            "line 5 (depends_on: [a]) is indented more than the line above it; a likely "
            "indentation slip",
        ),
        ('name: x\ngoal: "hi\nmodel: m\n', 2, "the quote opened on line 2 is never closed"),
        ("name: x\n\tgoal: hi\n", 2, "line 2 (goal: hi) is indented with a tab"),
    ],
)
def test_a_yaml_slip_gets_a_hint_in_words_and_the_right_line(
    text: str, line: int, hint: str, loader: str
) -> None:
    # libyaml and PyYAML's pure-Python parser word the same slip differently.
    if loader == "C" and not hasattr(yaml, "CSafeLoader"):
        pytest.skip("PyYAML was built without libyaml")
    with pytest.raises(yaml.MarkedYAMLError) as parsed:
        yaml.load(text, yaml.CSafeLoader if loader == "C" else yaml.SafeLoader)  # noqa: S506
    error = inputs._marked(parsed.value, "job.yaml", text)

    assert error.line == line, str(error)
    assert hint in str(error)
    if loader == "C":  # what the package's own loader raises
        with pytest.raises(YamlInputError, match=re.escape(hint)):
            load_yaml(text, "job.yaml")
