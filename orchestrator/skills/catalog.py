"""The skill catalog: discovery along a search path, shadowing, lookup and on-demand loading.

A scan reads each SKILL.md's frontmatter and nothing else; a skill's body and `tools.py` are
read on its first `load`. Folders on the search path are either a skill themselves (they hold
a SKILL.md) or have skill folders below them (`discovery.py`). Earlier folders win: a user's
skills come before the built-in ones and may shadow them, with a warning. Loading is lenient
(`skill_md.py`); broken folders never raise: each problem is a warning naming the folder and
the rule (`catalog.warnings`, and the `orchestrator.skills` logger), and a folder that cannot
be used at all is left out.

Level 0 is the index, the one section of the system prompt that lists skills: one line per
skill (name and description), never past its token cap. Past it, the index lists the skills
that fit, in search-path order, says how many more exist, and points to `search_skills`. So
the prompt stops growing once the catalog outgrows the cap.

`search_skills` ranks skills with a small weighted keyword search, no dependencies. Each
skill is indexed by the words of its name (weight 3), its `metadata.keywords` (2) and its
description with `when_to_use` (1). A query word scores the best weight it finds in a skill,
times its inverse document frequency, so rare words count more than words every description
has. Words are lowercased and lightly stemmed ("files" finds "file", "parsing" finds "parse");
a query word that starts a longer indexed word ("spread" and "spreadsheet") scores half.

Level 1 from disk (`load_folder`): a skill's SKILL.md body and its tools, from its tool
sources (`sources/`: its `tools.py`), read only on the skill's first load.
"""

from __future__ import annotations

import bisect
import difflib
import logging
import math
import os
import re
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..agent.tools import CallTimedOut, call_with_timeout
from ..tokens import TokenCounter, default_counter
from .discovery import (
    MAX_DEPTH,
    SkillFolder,
    builtin_skills_folder,
    skill_folders,
    walk_skill_folders,
)
from .skill import (
    LoadedSkill,
    ServerConfig,
    SkillError,
    SkillInfo,
    SkillWarning,
    config_file_in,
    file_digest,
)
from .skill_md import Problem, read_body, read_skill_folder
from .sources import TOOLS_FILE, import_tools

logger = logging.getLogger("orchestrator.skills")

PathLike = str | os.PathLike[str]
FolderLike = PathLike | SkillFolder
"""A folder on the search path: a path, or a `SkillFolder` that says whether its skills may
pre-approve."""
DEFAULT_IMPORT_TIMEOUT = 30.0
DEFAULT_INDEX_TOKENS = 2000
_PROCESS_ONLY = ("_loaded", "_broken", "_lock", "_loading", "_search", "warned_workspaces")


class SkillCatalog:
    """Every skill found on a search path, by name, in search-path order.

    `paths` come first, then (with `include_builtin=True`) the skills shipped with the package.
    A folder given as `SkillFolder(path, preapprove=False)` lends its skills' `allowed-tools`
    no pre-approval (`SkillInfo.preapprove`).
    """

    def __init__(
        self, paths: FolderLike | Iterable[FolderLike] = (), *, include_builtin: bool = True
    ) -> None:
        given = [paths] if isinstance(paths, str | os.PathLike | SkillFolder) else list(paths)
        self.paths = search_path(given, include_builtin=include_builtin)
        self._no_preapproval = {
            folder.path.expanduser().resolve()
            for folder in skill_folders(given)
            if not folder.preapprove
        }
        self._builtin_root = builtin_skills_folder() if include_builtin else None
        self.skills: dict[str, SkillInfo] = {}
        self.warnings: list[SkillWarning] = []
        self.import_timeout: float | None = DEFAULT_IMPORT_TIMEOUT
        self._start_in_this_process()
        for root in self.paths:
            self._scan_root(root)

    def _start_in_this_process(self) -> None:
        """What a catalog keeps only in the process that uses it: the code it imported, the
        skills whose code failed here, its locks, its search index, the warnings given."""
        self._loaded: dict[str, LoadedSkill] = {}
        self._broken: dict[str, str] = {}
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}
        self._search: SearchIndex | None = None
        self.warned_workspaces: set[Path] = set()
        """Workspaces already warned about this catalog's refused code (disclosure.py)."""

    def __getstate__(self) -> dict[str, object]:
        """A catalog sent to another process (a Ray worker) carries what its scan found (the
        skills, their pinned digests, the search path), never imported code: each skill's
        code is imported there when loaded, checked against its digest as here."""
        state = dict(self.__dict__)
        for name in _PROCESS_ONLY:
            del state[name]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._start_in_this_process()
        self._move_builtin_to(builtin_skills_folder())

    def _move_builtin_to(self, root: Path | None) -> None:
        """The package's own skills where this process installed it (another machine's
        may be elsewhere); their code is still checked against the digests taken."""
        sent = self._builtin_root
        if sent is None or root is None or sent == root:
            return
        self._builtin_root = root
        self.paths = [root if path == sent else path for path in self.paths]
        for name, info in self.skills.items():
            if info.builtin and info.folder.is_relative_to(sent):
                self.skills[name] = replace(
                    info,
                    folder=root / info.folder.relative_to(sent),
                    skill_file=root / info.skill_file.relative_to(sent),
                )

    def __len__(self) -> int:
        return len(self.skills)

    @property
    def has_servers(self) -> bool:
        """Whether some skill here declares MCP servers (a run then holds a pool of them)."""
        return any(info.has_servers for info in self.skills.values())

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
        view = type(self).__new__(type(self))  # not copy.copy: that drops what it loaded
        view.__dict__.update(self.__dict__)
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
        folder = next((info for info in self if info.folder.name == name), None)
        if folder is not None:  # the name of its folder, not of the skill
            return (
                f"Unknown skill {name!r}: the folder {name}/ holds the skill "
                f"{folder.name!r} (a skill is loaded by the name its SKILL.md gives)."
            )
        close = self.suggest(name)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        return f"Unknown skill {name!r}.{hint} search_skills(query) finds skills by topic."

    def suggest(self, name: str, limit: int = 3, *, by_search: bool = True) -> list[str]:
        """Names close to `name`: by spelling first, then (`by_search`) by search rank."""
        close = difflib.get_close_matches(name.strip().lower(), self.names, n=limit, cutoff=0.6)
        for info in self.search(name, limit=limit) if by_search else ():
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

    def index_listing(
        self, max_tokens: int = DEFAULT_INDEX_TOKENS, counter: TokenCounter | None = None
    ) -> IndexListing | None:
        """`index`, with the skills its cap lists and those it leaves out (found only by
        `search_skills`)."""
        return index_listing(self.invocable, max_tokens=max_tokens, counter=counter)

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
        preapprove = root.resolve() not in self._no_preapproval
        walk = walk_skill_folders(root)
        for folder in walk.folders:
            self._add(folder, builtin, preapprove)
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

    def _add(self, folder: Path, builtin: bool, preapprove: bool) -> None:
        info = self._inspect(folder, builtin, preapprove)
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

    def _inspect(self, folder: Path, builtin: bool, preapprove: bool) -> SkillInfo | None:
        reading = read_skill_folder(folder)
        for problem in reading.problems:
            self._warn(folder, problem)
        if reading.info is None:
            return None
        # The digest pins the code: only this tools.py may be imported later (sources/).
        digest = file_digest(folder / TOOLS_FILE)
        servers = config_file_in(folder)
        pinned = file_digest(servers) if servers is not None else None
        return replace(
            reading.info,
            tools_digest=digest,
            mcp_digest=pinned,
            builtin=builtin,
            preapprove=preapprove,
        )

    def _warn(self, folder: Path, problem: Problem) -> None:
        warning = SkillWarning(folder, problem.rule, problem.message, left_out=problem.fatal)
        self.warnings.append(warning)
        logger.warning("%s", warning)

    def __repr__(self) -> str:
        return f"SkillCatalog({len(self.skills)} skills from {len(self.paths)} folders)"


def search_path(
    paths: FolderLike | Iterable[FolderLike], *, include_builtin: bool = True
) -> list[Path]:
    """User folders in the order given, then the built-in folder; duplicates dropped."""
    given = [paths] if isinstance(paths, str | os.PathLike | SkillFolder) else list(paths)
    folders = [folder.path.expanduser() for folder in skill_folders(given)]
    shipped = builtin_skills_folder() if include_builtin else None
    if shipped is not None:
        folders.append(shipped)
    unique: dict[Path, Path] = {}
    for folder in folders:
        unique.setdefault(folder.resolve(), folder)
    return list(unique.values())


def load_folder(info: SkillInfo) -> LoadedSkill:
    """Read the body and import the tools of a scanned skill; SkillError if either fails."""
    return LoadedSkill(info=info, body=read_body(info), tools=import_tools(info))


# Level 0: the index.

MIN_LINE_TOKENS = 6

HEADER = (
    "# Skills\n"
    "Skills are packaged instructions, files and tools for particular kinds of work. Before "
    "you start work that a skill below covers, call load_skill(name): its instructions come "
    "back and its tools become available from your next step. read_skill_file(skill, path) "
    "reads a file in a skill's folder that its instructions mention.\n"
)
MORE = (
    "\n({count} more skills are not listed here. Call search_skills(query) to find skills "
    "by what they do.)"
)


@dataclass(frozen=True)
class IndexListing:
    """The index section and what its cap did: the skills it lists and those left out."""

    text: str
    listed: tuple[str, ...]
    left_out: tuple[str, ...]
    max_tokens: int

    def left_out_note(self, most: int = 20) -> str | None:
        """The skills left out, named (the first `most`), for a warning; None if none."""
        if not self.left_out:
            return None
        names = ", ".join(self.left_out[:most])
        if len(self.left_out) > most:
            names += f" and {len(self.left_out) - most} more"
        return (
            f"the skill index lists {len(self.listed)} of "
            f"{len(self.listed) + len(self.left_out)} skills under its cap of "
            f"{self.max_tokens:,} tokens; the model finds the others only through "
            f"search_skills: {names}"
        )


def render_index(
    skills: Sequence[SkillInfo],
    *,
    max_tokens: int = DEFAULT_INDEX_TOKENS,
    counter: TokenCounter | None = None,
) -> str | None:
    """The index section, or None when there are no skills."""
    listing = index_listing(skills, max_tokens=max_tokens, counter=counter)
    return listing.text if listing is not None else None


def index_listing(
    skills: Sequence[SkillInfo],
    *,
    max_tokens: int = DEFAULT_INDEX_TOKENS,
    counter: TokenCounter | None = None,
) -> IndexListing | None:
    """The index section with the names it lists and leaves out; None when there are no
    skills."""
    if not skills:
        return None
    counter = counter or default_counter()
    footer_cost = counter.count_text(MORE.format(count=len(skills)))
    room = max_tokens - counter.count_text(HEADER) - footer_cost
    lines: list[tuple[str, str]] = []
    for info in skills:
        if room < MIN_LINE_TOKENS:
            break
        cost = index_line_tokens(info, counter)
        if cost <= room:
            lines.append((info.name, info.summary()))
            room -= cost
    text = _compose([line for _, line in lines], len(skills))
    # Tokens of joined text can differ by a few from the sum of the parts: trim to be sure.
    while lines and counter.count_text(text) > max_tokens:
        lines.pop()
        text = _compose([line for _, line in lines], len(skills))
    listed = tuple(name for name, _ in lines)
    shown = set(listed)
    left_out = tuple(info.name for info in skills if info.name not in shown)
    return IndexListing(text, listed, left_out, max_tokens)


def index_line_tokens(info: SkillInfo, counter: TokenCounter) -> int:
    """What a skill's line costs in the index (its text and the line break)."""
    return counter.count_text(info.summary()) + 1


def _compose(lines: list[str], total: int) -> str:
    text = HEADER + "\n".join(lines)
    if len(lines) < total:
        text += MORE.format(count=total - len(lines))
    return text


# Search.

NAME_WEIGHT = 3.0
KEYWORD_WEIGHT = 2.0
DESCRIPTION_WEIGHT = 1.0
EXACT_NAME_BONUS = 10.0
MIN_PREFIX = 4
_WORD = re.compile(r"[a-z0-9]+")
_STOPWORD_TEXT = """a an and are as at be by can for from how i in is it its me my of on or
that the this to use used using when with you your any all do does what which who will"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def words(text: str) -> list[str]:
    """Lowercase, stemmed, stopword-free words of a text."""
    return [_stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


def _stem(word: str) -> str:
    """A light English stemmer: plurals and common verb endings, nothing clever."""
    if len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "zes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    for suffix, shortest in (("ing", 6), ("ed", 5)):
        if word.endswith(suffix) and len(word) >= shortest:
            return word[: -len(suffix)]
    return word


class SearchIndex:
    """An inverted index over a fixed list of skills."""

    def __init__(self, skills: Sequence[SkillInfo]) -> None:
        self.skills = list(skills)
        self.postings: dict[str, dict[int, float]] = defaultdict(dict)
        for position, info in enumerate(self.skills):
            fields = (
                (info.name.replace("-", " "), NAME_WEIGHT),
                (" ".join(info.keywords), KEYWORD_WEIGHT),
                (info.about, DESCRIPTION_WEIGHT),
            )
            for text, weight in fields:
                for word in words(text):
                    postings = self.postings[word]
                    postings[position] = max(postings.get(position, 0.0), weight)
        self.vocabulary = sorted(self.postings)

    def rank(self, query: str, limit: int = 5) -> list[tuple[SkillInfo, float]]:
        """The best `limit` skills for `query`, best first; skills matching nothing left out."""
        scores: dict[int, float] = defaultdict(float)
        for word in dict.fromkeys(words(query)):
            for position, weight in self._matches(word).items():
                scores[position] += weight * self._idf(word)
        wanted = query.strip().lower()
        for position, info in enumerate(self.skills):
            if info.name == wanted:
                scores[position] += EXACT_NAME_BONUS
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
        return [(self.skills[p], round(s, 3)) for p, s in ranked[: max(0, limit)] if s > 0]

    def _matches(self, word: str) -> dict[int, float]:
        found = dict(self.postings.get(word, {}))
        if len(word) >= MIN_PREFIX:
            for other in self._with_prefix(word):
                for position, weight in self.postings[other].items():
                    found[position] = max(found.get(position, 0.0), weight / 2)
        return found

    def _with_prefix(self, word: str) -> list[str]:
        start = bisect.bisect_left(self.vocabulary, word)
        found = []
        for other in self.vocabulary[start:]:
            if not other.startswith(word):
                break
            if other != word:
                found.append(other)
        return found

    def _idf(self, word: str) -> float:
        matched = len(self.postings.get(word, {})) or 1
        return math.log(1 + len(self.skills) / matched)
