"""The catalog: discovery, the corpus, bad folders, shadowing, loading, search, the index."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from skill_factory import ANTHROPIC_SKILLS, synthetic_skills, write_skill

from orchestrator.skills import SkillCatalog, SkillError, builtin_skills_folder
from orchestrator.skills.catalog import render_index
from orchestrator.tokens import default_counter

BUILTINS = {"data", "files", "http", "python", "shell"}

TOOLS = '''
from orchestrator import tool

@tool
def hello(who: str) -> str:
    """Greet someone.

    Args:
        who: The name to greet.
    """
    return "{greeting} " + who
'''


def needs_corpus() -> None:
    if not ANTHROPIC_SKILLS.is_dir():
        pytest.skip(f"the shared corpus is not beside the repository ({ANTHROPIC_SKILLS})")


def test_every_real_skill_of_the_corpus_loads_as_instructions_only() -> None:
    needs_corpus()
    folders = sorted(p.parent for p in ANTHROPIC_SKILLS.glob("*/SKILL.md"))
    catalog = SkillCatalog([ANTHROPIC_SKILLS], include_builtin=False)
    assert len(folders) >= 12
    assert sorted(catalog.names) == sorted(f.name for f in folders)
    for info in catalog:
        skill = catalog.load(info.name)
        assert skill.body.strip()
        assert skill.tools == ()
        assert info.license in (None, "Complete terms in LICENSE.txt")
    # Anthropic ships claude-api with a 1,068-character description: a warning, not a refusal.
    [warning] = catalog.warnings
    assert warning.rule == "description-length"
    assert warning.folder.name == "claude-api"
    assert not warning.left_out
    assert "\n" in catalog.skills["claude-api"].description


def test_the_builtin_skills_are_on_the_search_path_by_default(tmp_path: Path) -> None:
    folder = builtin_skills_folder()
    assert folder is not None
    assert set(SkillCatalog().names) >= BUILTINS
    assert SkillCatalog(tmp_path, include_builtin=False).names == []
    for name in BUILTINS:
        assert SkillCatalog().load(name).tools


def test_user_folders_come_first_and_shadow_builtins_with_a_warning(tmp_path: Path) -> None:
    write_skill(tmp_path, "files", description="My own files skill.")
    write_skill(tmp_path, "extra")
    catalog = SkillCatalog([tmp_path])
    assert catalog.names[:2] == ["extra", "files"]
    assert catalog.skills["files"].description == "My own files skill."
    [warning] = [w for w in catalog.warnings if w.rule == "shadowed"]
    assert warning.folder.name == "files"
    assert str(tmp_path / "files") in str(warning)


def test_the_first_folder_on_the_search_path_wins(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    write_skill(first, "same", description="First.")
    write_skill(second, "same", description="Second.")
    catalog = SkillCatalog([first, second], include_builtin=False)
    assert catalog.skills["same"].description == "First."
    assert [w.rule for w in catalog.warnings] == ["shadowed"]


def test_a_path_may_be_a_skill_folder_itself(tmp_path: Path) -> None:
    folder = write_skill(tmp_path, "solo")
    assert SkillCatalog([folder], include_builtin=False).names == ["solo"]


def test_broken_folders_load_when_they_can_with_warnings_naming_folder_and_rule(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_skill(tmp_path, "good")
    (tmp_path / "no-frontmatter").mkdir()
    (tmp_path / "no-frontmatter" / "SKILL.md").write_text("# Just markdown\n")
    write_skill(tmp_path, "bad-yaml", frontmatter="name: bad-yaml\ndescription: a: b: c\n")
    write_skill(tmp_path, "Bad_Name")
    write_skill(tmp_path, "no-description", frontmatter="name: no-description\n")
    write_skill(tmp_path, "nothing", frontmatter="name: nothing\n", body="")
    write_skill(tmp_path, "unclosed", frontmatter="")
    (tmp_path / "unclosed" / "SKILL.md").write_text("---\nname: unclosed\n")
    (tmp_path / "not-a-skill").mkdir()
    (tmp_path / "notes.txt").write_text("not a folder")
    with caplog.at_level(logging.WARNING, logger="orchestrator.skills"):
        catalog = SkillCatalog([tmp_path], include_builtin=False)
    assert catalog.names == ["bad-name", "bad-yaml", "good", "no-description", "no-frontmatter"]
    assert catalog.skills["no-frontmatter"].description == "Just markdown"
    assert catalog.skills["bad-yaml"].description == "a: b: c"
    assert catalog.skills["no-description"].description == "Do the thing."
    found = {w.folder.name: w for w in catalog.warnings}
    assert set(found) == {
        "no-frontmatter",
        "bad-yaml",
        "Bad_Name",
        "no-description",
        "nothing",
        "unclosed",
    }
    left_out = {name for name, w in found.items() if w.left_out}
    assert left_out == {"nothing", "unclosed"}
    assert found["no-frontmatter"].rule == "frontmatter"
    assert found["bad-yaml"].rule == "yaml"
    assert found["Bad_Name"].rule == "name-format"
    assert "loaded as 'bad-name'" in str(found["Bad_Name"])
    assert found["no-description"].rule == "description-missing"
    assert "skill left out" in str(found["unclosed"])
    assert str(tmp_path / "Bad_Name") in caplog.text


def test_understandable_problems_warn_and_the_skill_loads(tmp_path: Path) -> None:
    write_skill(tmp_path, "template", name="template-skill", extra="author: me\n")
    catalog = SkillCatalog([tmp_path], include_builtin=False)
    assert catalog.names == ["template-skill"]
    assert {w.rule for w in catalog.warnings} == {"name-folder", "unknown-field"}
    assert not any(w.left_out for w in catalog.warnings)


def test_a_missing_search_folder_is_a_warning(tmp_path: Path) -> None:
    catalog = SkillCatalog([tmp_path / "nowhere"], include_builtin=False)
    assert catalog.names == []
    assert catalog.warnings[0].rule == "search-path"


def test_tools_py_is_imported_on_first_load_only(tmp_path: Path) -> None:
    marker = tmp_path / "imported.txt"
    tools = f"from pathlib import Path\nPath({str(marker)!r}).write_text('yes')\n" + TOOLS
    write_skill(tmp_path / "skills", "greeter", tools=tools.replace("{greeting}", "hi"))
    catalog = SkillCatalog([tmp_path / "skills"], include_builtin=False)
    assert not marker.exists()
    skill = catalog.load("greeter")
    assert marker.exists()
    assert [t.name for t in skill.tools] == ["greeter__hello"]
    marker.unlink()
    assert catalog.load("greeter") is skill
    assert not marker.exists()
    assert not (tmp_path / "skills" / "greeter" / "__pycache__").exists()


async def test_each_tools_py_gets_a_module_of_its_own(tmp_path: Path) -> None:
    write_skill(tmp_path, "english", tools=TOOLS.replace("{greeting}", "hello"))
    write_skill(tmp_path, "french", tools=TOOLS.replace("{greeting}", "bonjour"))
    catalog = SkillCatalog([tmp_path], include_builtin=False)
    [english] = catalog.load("english").tools
    [french] = catalog.load("french").tools
    assert english.fn.__module__ != french.fn.__module__
    assert english.fn.__module__ in sys.modules
    assert english.fn("ann") == "hello ann"
    assert french.fn("ann") == "bonjour ann"
    assert english.spec.parameters["properties"]["who"]["description"] == "The name to greet."


def test_a_tools_py_that_fails_to_import_leaves_the_skill_out(tmp_path: Path) -> None:
    write_skill(tmp_path, "broken", tools="import no_such_module_anywhere\n")
    write_skill(tmp_path, "fine")
    catalog = SkillCatalog([tmp_path], include_builtin=False)
    assert catalog.warnings == []
    with pytest.raises(SkillError, match="tools.py failed to import: ModuleNotFoundError"):
        catalog.load("broken")
    with pytest.raises(SkillError, match="no_such_module_anywhere"):
        catalog.load("broken")
    [warning] = catalog.warnings
    assert warning.rule == "tools-import" and warning.left_out
    assert warning.folder == tmp_path / "broken"
    assert catalog.load("fine").body


def test_unknown_names_get_close_matches(tmp_path: Path) -> None:
    synthetic_skills(tmp_path, 3)
    catalog = SkillCatalog([tmp_path])
    with pytest.raises(SkillError, match="Did you mean: files"):
        catalog.require("file")
    assert catalog.suggest("skill-001")[0] == "skill-0001"


def test_search_ranks_by_name_keywords_and_description(tmp_path: Path) -> None:
    write_skill(tmp_path, "pdf-tools", description="Fill forms and merge documents.")
    write_skill(
        tmp_path,
        "reports",
        description="Write weekly status reports.",
        extra="metadata:\n  keywords: pdf, export\n",
    )
    write_skill(tmp_path, "notes", description="Take notes; can also save them as PDF files.")
    write_skill(tmp_path, "spreadsheets", description="Edit spreadsheet workbooks.")
    catalog = SkillCatalog([tmp_path], include_builtin=False)
    assert [i.name for i in catalog.search("pdf")] == ["pdf-tools", "reports", "notes"]
    assert [i.name for i in catalog.search("spreadsheet")] == ["spreadsheets"]
    assert [i.name for i in catalog.search("spread")] == ["spreadsheets"]
    assert [i.name for i in catalog.search("merging forms")][0] == "pdf-tools"
    assert catalog.search("notes", limit=1)[0].name == "notes"
    assert catalog.search("quantum chromodynamics") == []
    assert catalog.search("the and of") == []


def test_search_finds_builtins_by_topic() -> None:
    catalog = SkillCatalog()
    assert catalog.search("csv column statistics")[0].name == "data"
    assert catalog.search("run a bash command")[0].name == "shell"
    assert catalog.search("fetch a url")[0].name == "http"
    assert catalog.search("edit a file")[0].name == "files"


def test_the_index_lists_every_skill_when_they_fit(tmp_path: Path) -> None:
    synthetic_skills(tmp_path, 5)
    text = SkillCatalog([tmp_path], include_builtin=False).index(max_tokens=2000)
    assert text is not None
    assert text.count("\n- skill-") == 5
    assert "more skills" not in text
    assert "load_skill" in text


def test_the_index_stops_at_its_cap_and_says_how_many_more(tmp_path: Path) -> None:
    synthetic_skills(tmp_path, 200)
    catalog = SkillCatalog([tmp_path], include_builtin=False)
    counter = default_counter()
    for cap in (300, 1000, 2000):
        text = catalog.index(max_tokens=cap)
        assert text is not None
        listed = text.count("\n- skill-")
        assert 0 < listed < 200
        assert counter.count_text(text) <= cap
        assert f"({200 - listed} more skills are not listed here" in text
        assert "search_skills" in text
        assert "- skill-0000:" in text


def test_a_long_description_does_not_hide_the_skills_after_it(tmp_path: Path) -> None:
    write_skill(tmp_path, "aaa-long", description="word " * 400)
    write_skill(tmp_path, "bbb-short", description="Short.")
    text = render_index(list(SkillCatalog([tmp_path], include_builtin=False)), max_tokens=200)
    assert text is not None
    assert "- bbb-short: Short." in text
    assert "aaa-long" not in text
    assert "(1 more skills" in text


def test_an_empty_catalog_has_no_index(tmp_path: Path) -> None:
    assert SkillCatalog([tmp_path], include_builtin=False).index() is None


def test_a_subset_keeps_order_and_shares_loaded_skills(tmp_path: Path) -> None:
    synthetic_skills(tmp_path, 4)
    catalog = SkillCatalog([tmp_path], include_builtin=False)
    subset = catalog.subset(["skill-0003", "skill-0001", "unknown"])
    assert subset.names == ["skill-0001", "skill-0003"]
    assert "skill-0000" not in subset
    assert subset.load("skill-0001") is catalog.load("skill-0001")
    assert catalog.names == ["skill-0000", "skill-0001", "skill-0002", "skill-0003"]


SLOW_TYPED_TOOLS = '''
from __future__ import annotations

import time

time.sleep(0.4)  # a slow import: another catalog starts importing the same file meanwhile

from typing import Literal

from pydantic import BaseModel

from orchestrator import tool


class Query(BaseModel):
    op: Literal["sum", "mean"]


@tool
def run(query: Query) -> str:
    """Run a query."""
    return query.op
'''


def test_two_catalogs_load_one_skill_at_once(tmp_path: Path) -> None:
    """Two runs in one process (an eval's concurrent runs) each have a catalog, and load the
    same skill at the same moment: each gets its tools; neither sees the other's half-made
    module (its annotations resolved against it)."""
    import threading

    skill = tmp_path / "skills" / "typed"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: typed\ndescription: Typed queries.\n---\nx\n")
    (skill / "tools.py").write_text(SLOW_TYPED_TOOLS)
    catalogs = [SkillCatalog([tmp_path / "skills"], include_builtin=False) for _ in range(2)]
    outcomes: list[object] = []

    def load(catalog: SkillCatalog) -> None:
        try:
            outcomes.append([t.name for t in catalog.load("typed").tools])
        except SkillError as exc:
            outcomes.append(str(exc))

    first = threading.Thread(target=load, args=(catalogs[0],))
    second = threading.Thread(target=load, args=(catalogs[1],))
    first.start()
    threading.Event().wait(0.1)
    second.start()
    first.join(10)
    second.join(10)
    assert outcomes == [["typed__run"], ["typed__run"]]


def test_a_skill_asked_for_by_its_folders_name_says_the_name_it_loads_under(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "mismatch"
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        "---\nname: report-writer\ndescription: Writes reports.\n---\nWrite.\n"
    )
    catalog = SkillCatalog([tmp_path], include_builtin=False)
    with pytest.raises(SkillError) as raised:
        catalog.load("mismatch")
    assert "the folder mismatch/ holds the skill 'report-writer'" in str(raised.value)
