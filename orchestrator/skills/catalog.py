"""The skill catalog: discovery along a search path, shadowing, lookup and on-demand loading.

A scan reads each SKILL.md's frontmatter and nothing else; a skill's body and `tools.py` are
read on its first `load`. Folders on the search path are either a skill themselves (they hold
a SKILL.md) or have skill folders below them (`discovery.py`). Earlier folders win: a user's
skills come before the built-in ones and may shadow them, with a warning. Loading is lenient
(`lenient.py`); broken folders never raise: each problem is a warning naming the folder and
the rule (`catalog.warnings`, and the `orchestrator.skills` logger), and a folder that cannot
be used at all is left out.
"""

from __future__ import annotations

import copy
import difflib
import logging
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path

from ..agent.tools import CallTimedOut, call_with_timeout
from ..tokens import TokenCounter
from .builtin import builtin_skills_folder
from .discovery import MAX_DEPTH, walk_skill_folders
from .frontmatter import Problem
from .index import DEFAULT_INDEX_TOKENS, render_index
from .lenient import read_skill_folder
from .loader import load_folder
from .search import SearchIndex
from .servers import ServerConfig, config_file_in
from .skill import LoadedSkill, SkillError, SkillInfo, SkillWarning, file_digest
from .sources import TOOLS_FILE

logger = logging.getLogger("orchestrator.skills")

PathLike = str | os.PathLike[str]
DEFAULT_IMPORT_TIMEOUT = 30.0


class SkillCatalog:
    """Every skill found on a search path, by name, in search-path order.

    `paths` come first, then (with `include_builtin=True`) the skills shipped with the package.
    """

    def __init__(
        self, paths: PathLike | Iterable[PathLike] = (), *, include_builtin: bool = True
    ) -> None:
        self.paths = search_path(paths, include_builtin=include_builtin)
        self._builtin_root = builtin_skills_folder() if include_builtin else None
        self.skills: dict[str, SkillInfo] = {}
        self.warnings: list[SkillWarning] = []
        self._loaded: dict[str, LoadedSkill] = {}
        self._broken: dict[str, str] = {}
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}
        self.import_timeout: float | None = DEFAULT_IMPORT_TIMEOUT
        self._search: SearchIndex | None = None
        self.warned_workspaces: set[Path] = set()
        """Workspaces already warned about this catalog's refused code (preload.py)."""
        for root in self.paths:
            self._scan_root(root)

    def __len__(self) -> int:
        return len(self.skills)

    def __iter__(self) -> Iterator[SkillInfo]:
        return iter(self.skills.values())

    def __contains__(self, name: object) -> bool:
        return name in self.skills

    @property
    def names(self) -> list[str]:
        return list(self.skills)

    def subset(self, names: Iterable[str]) -> SkillCatalog:
        """A catalog of only the named skills (in this one's order), sharing what it loaded."""
        wanted = set(names)
        view = copy.copy(self)
        view.skills = {n: info for n, info in self.skills.items() if n in wanted}
        view.warnings = []
        view._search = None
        return view

    def get(self, name: str) -> SkillInfo | None:
        return self.skills.get(name.strip())

    def require(self, name: str) -> SkillInfo:
        """The skill called `name`, or a SkillError that suggests close names."""
        info = self.get(name)
        if info is None:
            raise SkillError(self.unknown_message(name))
        return info

    def unknown_message(self, name: str) -> str:
        close = self.suggest(name)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        return f"Unknown skill {name!r}.{hint} search_skills(query) finds skills by topic."

    def suggest(self, name: str, limit: int = 3) -> list[str]:
        """Names close to `name`: by spelling first, then by search rank."""
        close = difflib.get_close_matches(name.strip().lower(), self.names, n=limit, cutoff=0.6)
        for info in self.search(name, limit=limit):
            if info.name not in close:
                close.append(info.name)
        return close[:limit]

    @property
    def invocable(self) -> list[SkillInfo]:
        """The skills a model may choose itself (not `disable-model-invocation`)."""
        return [info for info in self.skills.values() if info.model_invocable]

    def search(self, query: str, limit: int = 5) -> list[SkillInfo]:
        """Skills a model may choose, ranked by how well their name, keywords and
        description match `query`."""
        if self._search is None:
            self._search = SearchIndex(self.invocable)
        return [info for info, _ in self._search.rank(query, limit)]

    def index(
        self, max_tokens: int = DEFAULT_INDEX_TOKENS, counter: TokenCounter | None = None
    ) -> str | None:
        """Level 0: the system-prompt section listing the skills a model may choose, at most
        `max_tokens` long."""
        return render_index(self.invocable, max_tokens=max_tokens, counter=counter)

    def load(self, name: str) -> LoadedSkill:
        """Level 1: the skill's body and tools, read once and then kept.

        Skills load independently of each other. A `tools.py` that does not finish importing
        within `import_timeout` seconds leaves its skill out (its thread is abandoned); a
        skill that failed once is not tried again.
        """
        info = self.require(name)
        with self._lock:
            lock = self._loading.setdefault(info.name, threading.Lock())
        timeout = self.import_timeout
        if not lock.acquire(timeout=-1 if timeout is None else timeout):
            raise SkillError(f"{info.folder}: another agent is still loading this skill")
        try:
            return self._load_once(info)
        finally:
            lock.release()

    def _load_once(self, info: SkillInfo) -> LoadedSkill:
        if info.name in self._loaded:
            return self._loaded[info.name]
        if info.name in self._broken:
            raise SkillError(self._broken[info.name])
        what = f"importing {info.folder / TOOLS_FILE}"
        try:
            loaded = call_with_timeout(lambda: load_folder(info), self.import_timeout, what=what)
        except (SkillError, CallTimedOut) as exc:
            message = str(exc) if isinstance(exc, SkillError) else f"{info.folder}: {exc}"
            self._broken[info.name] = message
            self._warn(info.folder, Problem("tools-import", message, True))
            raise SkillError(message) from None
        self._loaded[info.name] = loaded
        return loaded

    def add_servers(self, servers: Mapping[str, ServerConfig], folder: Path) -> None:
        """Make each MCP server (a job's `mcp_servers:`) a skill of its own, named as the
        server; `folder` is where its relative paths start. A name a skill folder already
        has stays that folder's (with a warning). Nothing starts until the skill is loaded."""
        for name, server in servers.items():
            first = self.skills.get(name)
            if first is not None:
                message = f"MCP server {name!r} of the job spec is shadowed by {first.folder}"
                self._warn(folder, Problem("shadowed", message))
                continue
            about = server.description or f"The tools of the MCP server {name} ({server.where()})."
            self.skills[name] = SkillInfo(
                name=name,
                description=about,
                folder=folder,
                skill_file=folder,
                servers={name: server},
            )
        self._search = None

    def _scan_root(self, root: Path) -> None:
        if not root.is_dir():
            self._warn(root, Problem("search-path", "skill folder not found"))
            return
        builtin = root == self._builtin_root
        walk = walk_skill_folders(root)
        for folder in walk.folders:
            self._add(folder, builtin)
        if walk.truncated:
            self._warn(root, Problem("search-limit", "too many folders below it; scan stopped"))
        if not walk.folders:
            self._warn(
                root,
                Problem(
                    "no-skills",
                    f"no SKILL.md in this folder or the folders below it ({MAX_DEPTH} levels)",
                ),
            )

    def _add(self, folder: Path, builtin: bool) -> None:
        info = self._inspect(folder, builtin)
        if info is None:
            return
        first = self.skills.get(info.name)
        if first is not None:
            self._warn(
                folder,
                Problem(
                    "shadowed",
                    f"skill {info.name!r} is shadowed by {first.folder} (earlier on the search "
                    "path)",
                ),
            )
            return
        self.skills[info.name] = info

    def _inspect(self, folder: Path, builtin: bool) -> SkillInfo | None:
        reading = read_skill_folder(folder)
        for problem in reading.problems:
            self._warn(folder, problem)
        if reading.info is None:
            return None
        # The digest pins the code: only this tools.py may be imported later (sources/).
        digest = file_digest(folder / TOOLS_FILE)
        servers = config_file_in(folder)
        pinned = file_digest(servers) if servers is not None else None
        return replace(reading.info, tools_digest=digest, mcp_digest=pinned, builtin=builtin)

    def _warn(self, folder: Path, problem: Problem) -> None:
        warning = SkillWarning(folder, problem.rule, problem.message, left_out=problem.fatal)
        self.warnings.append(warning)
        logger.warning("%s", warning)

    def __repr__(self) -> str:
        return f"SkillCatalog({len(self.skills)} skills from {len(self.paths)} folders)"


def search_path(
    paths: PathLike | Iterable[PathLike], *, include_builtin: bool = True
) -> list[Path]:
    """User folders in the order given, then the built-in folder; duplicates dropped."""
    given = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    folders = [Path(p).expanduser() for p in given]
    shipped = builtin_skills_folder() if include_builtin else None
    if shipped is not None:
        folders.append(shipped)
    unique: dict[Path, Path] = {}
    for folder in folders:
        unique.setdefault(folder.resolve(), folder)
    return list(unique.values())
