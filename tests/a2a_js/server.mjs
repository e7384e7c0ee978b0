// An A2A agent built with the JavaScript SDK (@a2a-js/sdk), for tests/test_a2a_js.py: it
// echoes a task's text with a status update, an artifact and a final message. A task whose
// text starts with "ask" asks for input first (input-required), and completes with the answer
// the next message on the task gives. It listens on 127.0.0.1 at a port the system picks and
// prints its base URL as its first line.
import express from "express";
import { AGENT_CARD_PATH, Role, TaskState } from "@a2a-js/sdk";
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server";
import { UserBuilder, agentCardHandler, jsonRpcHandler } from "@a2a-js/sdk/server/express";

function text(value) {
  return { content: { $case: "text", value }, metadata: undefined, filename: "", mediaType: "" };
}

function agentMessage(taskId, contextId, value) {
  return {
    messageId: crypto.randomUUID(), contextId, taskId, role: Role.ROLE_AGENT,
    parts: [text(value)], metadata: undefined, extensions: [], referenceTaskIds: [],
  };
}

function status(taskId, contextId, state, value) {
  return AgentEvent.statusUpdate({
    taskId, contextId, metadata: undefined,
    status: { state, message: agentMessage(taskId, contextId, value), timestamp: undefined },
  });
}

class EchoExecutor {
  async execute(context, bus) {
    const { taskId, contextId } = context;
    const said = context.userMessage.parts
      .map((part) => (part.content?.$case === "text" ? part.content.value : ""))
      .join("");
    if (context.task?.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED) {
      // The answer: the task as it stands first (as the SDK requires), then its end.
      bus.publish(AgentEvent.task(context.task));
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_WORKING, "node got an answer"));
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_COMPLETED, `node was told: ${said}`));
      bus.finished();
      return;
    }
    if (said.startsWith("ask")) {
      bus.publish(AgentEvent.task({
        id: taskId, contextId, artifacts: [], history: [context.userMessage], metadata: undefined,
        status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: undefined },
      }));
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_INPUT_REQUIRED, "Which colour, node asks?"));
      bus.finished();
      return;
    }
    bus.publish(AgentEvent.task({
      id: taskId, contextId, artifacts: [], history: [context.userMessage], metadata: undefined,
      status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: undefined },
    }));
    bus.publish(AgentEvent.statusUpdate({
      taskId, contextId, metadata: undefined,
      status: { state: TaskState.TASK_STATE_WORKING,
                message: agentMessage(taskId, contextId, "node is on it"), timestamp: undefined },
    }));
    bus.publish(AgentEvent.artifactUpdate({
      taskId, contextId, append: false, lastChunk: true, metadata: undefined,
      artifact: { artifactId: "a1", name: "shout.txt", description: "", parts: [text(said.toUpperCase())],
                  metadata: undefined, extensions: [] },
    }));
    bus.publish(AgentEvent.statusUpdate({
      taskId, contextId, metadata: undefined,
      status: { state: TaskState.TASK_STATE_COMPLETED,
                message: agentMessage(taskId, contextId, `node echo: ${said}`), timestamp: undefined },
    }));
    bus.finished();
  }

  async cancelTask(taskId, bus) {
    bus.finished();
  }
}

const app = express();
const server = app.listen(0, "127.0.0.1", () => {
  const url = `http://127.0.0.1:${server.address().port}/`;
  const card = {
    name: "node-echo", description: "Echoes, from node.", version: "1",
    supportedInterfaces: [{ url, protocolBinding: "JSONRPC", protocolVersion: "1.0", tenant: "" }],
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    defaultInputModes: ["text/plain"], defaultOutputModes: ["text/plain"],
    skills: [{ id: "echo", name: "echo", description: "Echoes.", tags: ["echo"], examples: [],
               inputModes: [], outputModes: [], securityRequirements: [] }],
    securitySchemes: {}, securityRequirements: [], signatures: [], provider: undefined,
    documentationUrl: undefined, iconUrl: undefined,
  };
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new EchoExecutor());
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }));
  app.use("/", jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  console.log(url);
});
