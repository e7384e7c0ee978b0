"""The models room's shape: the offline path stays light, one resolution path, one cache."""

from __future__ import annotations

import subprocess
import sys

import pytest

from orchestrator.errors import ConfigError
from orchestrator.models import (
    ModelSettings,
    ResolvedModels,
    ScriptedModel,
    check_model,
    resolve_model,
)

SCRIPT = {"*": [{"content": "done"}]}


def test_a_scripted_run_loads_neither_httpx_nor_the_adapters(tmp_path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("'*': [{content: done}]\n")
    code = (
        "import sys, orchestrator.models as m\n"
        f"m.resolve_model('scripted:{script}')\n"
        "loaded = [n for n in ('httpx', 'orchestrator.models.http', 'orchestrator.models.adapter',"
        " 'orchestrator.models.openai', 'orchestrator.models.anthropic') if n in sys.modules]\n"
        "print(loaded)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_http_names_load_on_first_use() -> None:
    from orchestrator import models

    assert models.AnthropicModel.__module__ == "orchestrator.models.anthropic"
    assert models.close_connections.__module__ == "orchestrator.models.http"
    with pytest.raises(AttributeError):
        _ = models.NoSuchName


@pytest.mark.parametrize(
    ("model", "message"),
    [("nowhere:x", "unknown model provider 'nowhere'"), ("openai:", "must look like")],
)
def test_checking_and_resolving_refuse_alike(model: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as checked:
        check_model(model)
    with pytest.raises(ConfigError, match=message) as resolved:
        resolve_model(model)
    assert str(checked.value) == str(resolved.value)


def test_one_model_per_reference(tmp_path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("'*': [{content: done}]\n")
    prepared: list[object] = []
    models = ResolvedModels(prepare=lambda m: prepared.append(m) or m)
    first = models.get(f"scripted:{script}")
    again = models.get(ModelSettings(name=f"scripted:{script}"))
    assert first is again and prepared == [first]
    assert models.key_of(first) is not None and models.settings()[0].name == f"scripted:{script}"
    own = ScriptedModel(SCRIPT)
    assert models.get(own) is own and models.key_of(own) is None
