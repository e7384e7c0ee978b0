"""What a run asked a person and what was answered, folded from its `input_request` and
`input_answer` events: one record for every reader of a trace (the checkpoint a resume goes
on from, `trace show`, `trace list`, the HTML report)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..events import Answer, InputAnswered, InputRequest, InputRequested


@dataclass
class Asked:
    """Requests by id, in the order asked (one asked again in a later attempt keeps its
    place), the answers recorded, and which answers came after their request expired."""

    requests: dict[str, InputRequest] = field(default_factory=dict)
    answers: dict[str, Answer] = field(default_factory=dict)
    late: set[str] = field(default_factory=set)
    """Requests whose answer came too late: the asker was told so, not given it."""

    def take(self, event: InputRequested | InputAnswered) -> None:
        if isinstance(event, InputRequested):
            self.requests[event.request.id] = event.request
            return
        self.answer(event.answer, late=bool(event.late))

    def answer(self, answer: Answer, *, late: bool = False) -> None:
        self.answers[answer.id] = answer
        if late:
            self.late.add(answer.id)

    def unanswered(self) -> list[InputRequest]:
        """The requests no answer was recorded for, in the order asked."""
        return [r for r in self.requests.values() if r.id not in self.answers]
