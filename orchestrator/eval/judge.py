"""A model as judge: it grades a run's output against a rubric, and its spend is its own.

The judge gets the job's task, the case's inputs, the rubric and the output, and answers with
JSON, `{"score": 0.8, "reason": "..."}`. Its calls go through the core's model call, so they
are counted, reserved on the eval's budget and priced like any other; what they used is kept
apart from the job's (`Judge.usage`, `Judge.cost`, and each result line's `judge` figures).
A scripted judge's turns are keyed `judge`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from ..agent import TokenBudget
from ..agent.model_call import call_model
from ..messages import Message, Usage
from ..models import ChatModel
from ..security.inputs import load_json
from ..tokens import TokenCounter, default_counter
from ..trace import NullTrace
from .scoring import RunRecord, Score

JUDGE_AGENT = "judge"
JUDGE_PROMPT = """\
You grade an answer against a rubric. Read the task, the rubric and the answer, then reply
with JSON only: {"score": <a number from 0 to 1>, "reason": "<one sentence>"}. 1 means the
answer meets the rubric fully, 0 not at all."""
MAX_ANSWER_CHARS = 20_000
JUDGE_OUTPUT_TOKENS = 512


@dataclass
class Verdict:
    """What the judge said of one output, and what asking cost."""

    score: float
    reason: str
    usage: Usage = field(default_factory=Usage)
    cost: float | None = None


class Judge:
    """Grades outputs with one model, on `budget` (the eval's, or its own)."""

    def __init__(
        self, model: ChatModel, budget: TokenBudget, counter: TokenCounter | None = None
    ) -> None:
        self.model = model
        self.budget = budget
        self.counter = counter or default_counter()
        self.usage = Usage()
        self.cost: float | None = None
        self.calls = 0

    async def verdict(self, rubric: str, run: RunRecord) -> Verdict:
        answer = run.output[:MAX_ANSWER_CHARS]
        inputs = json.dumps(run.case.inputs, ensure_ascii=False)
        prompt = (
            f"## Task\n{run.task}\n\n## Inputs\n{inputs}\n\n## Rubric\n{rubric}\n\n"
            f"## Answer\n{answer or '(empty)'}"
        )
        messages = [Message.system(JUDGE_PROMPT), Message.user(prompt)]
        call = await call_model(
            self.model,
            messages,
            (),
            counter=self.counter,
            budget=self.budget,
            tool_choice="none",
            max_output_tokens=JUDGE_OUTPUT_TOKENS,
            agent=JUDGE_AGENT,
            step=self.calls + 1,
            trace=NullTrace(),  # not a run's call: nothing of it is recorded
        )
        self.calls += 1
        if call is None:
            return Verdict(0.0, "the eval's budget could not cover the judge's call")
        self.usage = self.usage + call.usage
        if call.cost is not None:
            self.cost = (self.cost or 0.0) + call.cost
        score, reason = parse_verdict(call.response.message.content or "")
        return Verdict(score, reason, call.usage, call.cost)


def parse_verdict(text: str) -> tuple[float, str]:
    """The score and reason in a judge's reply; a reply that is not such JSON scores 0."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    try:
        value = load_json(match[0], "the judge's reply") if match else None
        score = float(value["score"]) if isinstance(value, dict) else None
    except (ValueError, KeyError, TypeError):
        score = None
    if score is None or not isinstance(value, dict):
        shown = " ".join(text.split())[:120]
        return 0.0, f"the judge's reply was not the JSON asked for: {shown!r}"
    return max(0.0, min(1.0, score)), str(value.get("reason", ""))


def judged(name: str, pass_score: float, verdict: Verdict) -> Score:
    """A judge check's score from the judge's verdict."""
    passed = verdict.score >= pass_score
    return Score(name=name, kind="judge", passed=passed, score=verdict.score, reason=verdict.reason)
