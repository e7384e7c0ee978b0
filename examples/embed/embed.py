"""Embed the orchestrator with a tool of your own and a skill folder beside this script.

Run it from this folder: `python embed.py`. The scripted model plays the model offline; for a
real one, pass a model string instead, such as "openai:gpt-4o-mini".
"""

from orchestrator import Orchestrator, tool
from orchestrator.models import ScriptedModel


@tool
def customer_plan(name: str) -> str:
    """The plan a customer is on.

    Args:
        name: the customer's first name
    """
    return {"Ada": "pro", "Lin": "free"}.get(name, "unknown")


welcome = {"id": "welcome", "task": "Write Ada's welcome note; her plan is pro."}
model = ScriptedModel(
    {
        "planner": [  # the planner's turns, in order
            {"tool_calls": [{"name": "customer_plan", "arguments": {"name": "Ada"}}]},
            {"tool_calls": [{"name": "fork", "arguments": {"tasks": [welcome]}}]},
            {"content": "Ada is on the pro plan; her welcome note is ready."},
        ],
        "planner/welcome": [  # a forked task's turns: "<parent>/<task id>"
            {"tool_calls": [{"name": "load_skill", "arguments": {"name": "greeting"}}]},
            {"content": "Welcome aboard, Ada! Your pro plan is ready for you!"},
        ],
    }
)
orchestrator = Orchestrator(model, skills=["skills"], tools=[customer_plan])
result = orchestrator.run_sync("Welcome our new customer Ada.")
print(result.output)
for task in result.children:
    print(f"{task.id}: {task.output}")
