"""Permissions and the workspace confinement every file tool relies on."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import ConfigError, PermissionDenied
from orchestrator.security import PathRefused, Permissions, relative_name, resolve_inside


def test_everything_risky_is_off_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    permissions = Permissions()
    assert permissions.workspace == tmp_path
    assert (permissions.shell, permissions.python, permissions.network) == (False, False, [])
    with pytest.raises(PermissionDenied, match="`shell` permission"):
        permissions.require_shell()
    with pytest.raises(PermissionDenied, match="`python` permission"):
        permissions.require_python()
    with pytest.raises(PermissionDenied, match=r"example\.com.*allowed hosts: none"):
        permissions.require_host("example.com", 443)


def test_coerce_accepts_none_a_dict_or_permissions(tmp_path: Path) -> None:
    given = Permissions(workspace=tmp_path, shell=True)
    assert Permissions.coerce(given) is given
    assert Permissions.coerce({"workspace": str(tmp_path), "python": True}).python
    assert Permissions.coerce(None).shell is False
    with pytest.raises(ConfigError, match="invalid permissions"):
        Permissions.coerce({"shel": True})
    with pytest.raises(ConfigError):
        Permissions.coerce("everything")


def test_fields_are_documented() -> None:
    for name, field in Permissions.model_fields.items():
        assert field.description, name


@pytest.mark.parametrize(
    ("entry", "host", "port", "allowed"),
    [
        ("example.com", "example.com", 443, True),
        ("example.com", "EXAMPLE.com.", 80, True),
        ("example.com", "api.example.com", 443, False),
        ("*.example.com", "api.example.com", 443, True),
        ("*.example.com", "example.com", 443, False),
        ("*.example.com", "evilexample.com", 443, False),
        ("127.0.0.1:8080", "127.0.0.1", 8080, True),
        ("127.0.0.1:8080", "127.0.0.1", 8081, False),
        ("::1", "::1", 80, True),
        ("[::1]:8080", "::1", 8080, True),
        ("*", "anything.org", 1, True),
    ],
)
def test_network_allow_list(entry: str, host: str, port: int, allowed: bool) -> None:
    assert Permissions(network=[entry]).allows_host(host, port) is allowed


def test_the_workspace_must_be_a_folder(tmp_path: Path) -> None:
    assert Permissions(workspace=tmp_path).workspace_root() == tmp_path.resolve()
    with pytest.raises(ConfigError, match="not a folder"):
        Permissions(workspace=tmp_path / "missing").workspace_root()


def test_relative_paths_resolve_inside_the_root(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    assert resolve_inside(tmp_path, "a/b.txt") == tmp_path.resolve() / "a" / "b.txt"
    assert resolve_inside(tmp_path, "") == tmp_path.resolve()
    assert resolve_inside(tmp_path, "./a/./c") == tmp_path.resolve() / "a" / "c"
    assert relative_name(tmp_path, tmp_path / "a" / "b.txt") == "a/b.txt"
    assert relative_name(tmp_path, tmp_path) == "."


@pytest.mark.parametrize("path", ["../x", "a/../../x", "a/..", "/etc/passwd", "~/x"])
def test_escapes_are_refused(tmp_path: Path, path: str) -> None:
    with pytest.raises(PathRefused) as caught:
        resolve_inside(tmp_path, path)
    assert isinstance(caught.value, PermissionDenied)
    assert repr(path) in str(caught.value)


def test_symlinks_may_not_lead_out(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "inner").mkdir()
    (root / "out").symlink_to(outside)
    (root / "in").symlink_to(root / "inner")
    with pytest.raises(PathRefused, match="symbolic link"):
        resolve_inside(root, "out/file.txt")
    assert resolve_inside(root, "in/file.txt") == root.resolve() / "inner" / "file.txt"
