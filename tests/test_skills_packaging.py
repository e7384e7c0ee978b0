"""The built-in skills ship inside the package: a regular (non-editable) build finds them.

The build runs the project's build backend (hatchling) offline on a copy of the project and
unpacks the wheel it makes, which is what `pip install .` installs. No network is needed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILTINS = ["data", "files", "http", "python", "shell"]


def copy_project(target: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    target.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, target / name)
    for name in ("orchestrator", "skills", "subagents"):
        shutil.copytree(ROOT / name, target / name, symlinks=True, ignore=ignore)
    # A stray compiled file in a skill folder must not be shipped.
    (target / "skills" / "files" / "__pycache__").mkdir()
    (target / "skills" / "files" / "__pycache__" / "tools.cpython-311.pyc").write_bytes(b"")
    return target


@pytest.mark.slow  # a wheel built from a copy of the project
def test_a_regular_build_ships_the_builtin_skills(tmp_path: Path) -> None:
    if importlib.util.find_spec("hatchling") is None:
        pytest.skip("hatchling (the build backend, in the [dev] extra) is not installed")
    source = copy_project(tmp_path / "source")
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp_path / "dist")],
        cwd=source,
        check=True,
        capture_output=True,
        timeout=120,
    )
    (wheel,) = (tmp_path / "dist").glob("orchestrator-*.whl")
    built = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(built)
    shipped = built / "orchestrator" / "_builtin" / "skills"
    assert shipped.is_dir() and not shipped.is_symlink()
    assert sorted(p.name for p in shipped.iterdir()) == BUILTINS
    for name in BUILTINS:
        assert (shipped / name / "SKILL.md").read_text() == (
            ROOT / "skills" / name / "SKILL.md"
        ).read_text()
        assert (shipped / name / "tools.py").is_file()
    assert not list(shipped.rglob("__pycache__")) and not list(built.rglob("*.pyc"))
    assert sorted(p.name for p in (built / "orchestrator" / "_builtin" / "subagents").iterdir())
    # So do the HTML report's stylesheet and script.
    report = built / "orchestrator" / "report"
    assert (report / "report.css").is_file() and (report / "report.js").is_file()
    assert (built / "orchestrator" / "py.typed").is_file()  # its types reach a user's mypy

    probe = (
        "import json, orchestrator\n"
        "from orchestrator.skills import SkillCatalog\n"
        "catalog = SkillCatalog()\n"
        "print(json.dumps({'package': orchestrator.__file__, 'paths': [str(p) for p in "
        "catalog.paths], 'names': catalog.names, 'tools': [t.name for t in "
        "catalog.load('files').tools]}))\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(built)}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    found = json.loads(done.stdout)
    assert found["package"].startswith(str(built))
    assert found["paths"] == [str(shipped)]
    assert found["names"] == BUILTINS
    assert "files__edit_file" in found["tools"]
