"""A server's tool as an ordinary `Tool`: name, description, JSON schema, async call.

It joins a skill exactly as a `tools.py` tool does, named `{skill}__{tool}` (kept to
`^[a-zA-Z0-9_-]{1,64}$`). Arguments are checked against the server's own `inputSchema` before
the call; the schema sent to the model is the normalised one (`schema.py`). The call runs on
the run's server pool; `isError` results become error observations. What the server asks
during the call is put to a person (elicitation.py), and the call may wait for the answer.

What `tools/list` says about a tool (its description, the descriptions and examples in its
schema) is untrusted input, as its results are: the values the server's configuration names
as secret are masked in it before it reaches the tools array, the load observation or the
trace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..agent import ArgumentsError, Tool, ToolContext
from ..agent.tools import decode_arguments
from ..errors import ToolError
from ..messages import ToolSpec
from ..skills.servers import ServerPool
from .connection import Connection
from .elicitation import CallQuestions
from .results import convert
from .schema import masked, normalise, problems


async def _never_called() -> None:
    """The function a Tool needs; an MCP tool's `invoke` calls the server instead."""


class McpTool(Tool):
    """One tool of one MCP server, for one run's pool."""

    def __init__(
        self,
        name: str,
        listed: Mapping[str, Any],
        connection: Connection,
        pool: ServerPool,
    ) -> None:
        mask = connection.mask
        description = str(listed.get("description") or listed.get("title") or listed["name"])
        super().__init__(_never_called, name=name, description=mask(description))
        self.remote = str(listed["name"])
        self.input_schema = dict(listed.get("inputSchema") or listed.get("input_schema") or {})
        parameters = masked(normalise(self.input_schema), mask)
        self.spec = ToolSpec(name=name, description=self.description, parameters=parameters)
        self.connection = connection
        self.pool = pool

    def parse_arguments(self, raw: str) -> dict[str, Any]:
        data = decode_arguments(raw)
        found = problems(self.input_schema, data)
        if found:
            text = "Arguments do not match the tool's schema:\n" + "\n".join(found)
            raise ArgumentsError(self.connection.mask(text), kind="invalid_arguments")
        return data

    async def invoke(self, kwargs: dict[str, Any], context: ToolContext) -> Any:
        connection = self.connection
        questions = CallQuestions(
            context, connection.name, connection.config.answer_within, connection.mask
        )
        result = await self.pool.run(connection.call(self.remote, kwargs, questions))
        observation = convert(result)
        # A server may echo what it was given (a token in an error message): the values its
        # configuration names as secret never reach the observation, the trace or the model.
        text = questions.told(connection.mask(observation.text))
        if observation.is_error:
            raise ToolError(text)
        return text
