"""Warming a shared prompt prefix once before the requests that would all write it.

Sibling sub-agents of one definition start with the same tools array and system prompt. Sent
together, their first requests all miss the provider's prompt cache (a prefix is readable only
once a request that wrote it has been answered), and each pays to write it. So when a request
goes out while another with the same model and the same prefix is in flight and no request
with that prefix has been answered yet, it waits for that one (at most `MAX_WAIT` seconds);
then it reads the prefix instead of writing it. A prefix counts as warm for `WARM_FOR`
seconds after a request with it was answered (providers keep it five minutes at least). A
prefix too short for any provider to cache (under about 1,024 tokens, `MIN_PREFIX_CHARS` of
JSON) is never waited for.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from ..messages import ToolSpec
from ..models.base import ChatModel, ModelRequest

MAX_WAIT = 10.0
WARM_FOR = 240.0
MAX_REMEMBERED = 1024
MIN_PREFIX_CHARS = 4 * 1024  # about 1,024 tokens: the least a provider caches


class _Prefixes:
    """One event loop's prefixes: those in flight for the first time, and when each was last
    answered."""

    def __init__(self) -> None:
        self.first: dict[str, asyncio.Event] = {}
        self.answered: dict[str, float] = {}

    def remember(self, key: str) -> None:
        """Note that a request with this prefix was answered now; forget prefixes long cold."""
        now = time.monotonic()
        self.answered[key] = now
        if len(self.answered) > MAX_REMEMBERED:
            self.answered = {k: t for k, t in self.answered.items() if now - t <= WARM_FOR}


_LOOPS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Prefixes] = (
    weakref.WeakKeyDictionary()
)


def prefix_key(model: ChatModel, request: ModelRequest) -> str | None:
    """The model, the tools array and the system prompt (what a provider caches first) as a
    key; None when they are too short to be cached at all."""
    system = next((m.content or "" for m in request.messages[:1] if m.role == "system"), "")
    size, tools = _tools_digest(request.tools)
    if size + len(system) < MIN_PREFIX_CHARS:
        return None
    return hashlib.sha256(f"{model.name}\n{tools}\n{system}".encode()).hexdigest()


_DIGESTS: dict[int, tuple[Sequence[ToolSpec], int, str]] = {}


def _tools_digest(tools: Sequence[ToolSpec]) -> tuple[int, str]:
    """The tools array's JSON size and digest. An agent sends the same array (the same
    tuple) in every request, so it is serialised once, not once a call: the entry keeps the
    tuple itself, so its id cannot be reused by another while the entry lives."""
    found = _DIGESTS.get(id(tools))
    if found is not None and found[0] is tools:
        return found[1], found[2]
    text = json.dumps([spec.model_dump() for spec in tools], sort_keys=True, default=str)
    digest = hashlib.sha256(text.encode()).hexdigest()
    if len(_DIGESTS) >= MAX_REMEMBERED:
        _DIGESTS.clear()
    _DIGESTS[id(tools)] = (tools, len(text), digest)
    return len(text), digest


@asynccontextmanager
async def warm_prefix(model: ChatModel, request: ModelRequest) -> AsyncIterator[None]:
    """Hold a request back while the first request with its prefix is still unanswered.

    Only that first request releases the ones waiting for it, when it ends however it ends;
    only an answered request makes the prefix warm (a failed one wrote nothing)."""
    key = prefix_key(model, request)
    if key is None:
        yield
        return
    prefixes = _LOOPS.setdefault(asyncio.get_running_loop(), _Prefixes())
    answered = prefixes.answered.get(key)
    first: asyncio.Event | None = None
    if answered is None or time.monotonic() - answered > WARM_FOR:
        pending = prefixes.first.get(key)
        if pending is not None:
            try:
                await asyncio.wait_for(pending.wait(), MAX_WAIT)
            except TimeoutError:
                pass
        else:
            first = prefixes.first[key] = asyncio.Event()
    ok = False
    try:
        yield
        ok = True
    finally:
        if ok:
            prefixes.remember(key)
        if first is not None:
            prefixes.first.pop(key, None)
            first.set()
