"""The frameworks users would pick instead, each driven by a scripted model like ours.

Every module here has the same functions as `bench/ours.py`: `loop_overhead(steps)`,
`fanout(width, latency)`, `tool_tokens(catalog, job)` and `load_catalog(catalog)`, each doing
one run, plus `NOTES` (where the workload differs from ours, and why). `bench/worker.py` imports
one in a fresh process with the network blocked, so a peer that is not installed, or fails, is
reported with its reason instead of being dropped.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Framework:
    """One column of the report: its harness module and the distributions whose versions count."""

    key: str
    name: str
    module: str
    distributions: tuple[str, ...]


OURS = Framework("ours", "orchestrator", "bench.ours", ("orchestrator",))
PEERS = (
    Framework(
        "langgraph", "LangGraph", "bench.peers.langgraph_peer", ("langgraph", "langchain-core")
    ),
    Framework("pydantic_ai", "Pydantic AI", "bench.peers.pydantic_ai_peer", ("pydantic-ai-slim",)),
    Framework(
        "openai_agents",
        "OpenAI Agents SDK",
        "bench.peers.openai_agents_peer",
        ("openai-agents", "openai"),
    ),
)
FRAMEWORKS = {f.key: f for f in (OURS, *PEERS)}
