/**
 * An OpenAI Agents SDK assistant whose memory is memoryd's: its session is a memoryd
 * conversation, and it can remember and recall durable facts about its user. Each line of stdin
 * is a user turn; the model is any chat-completions endpoint (OPENAI_BASE_URL, OPENAI_MODEL,
 * OPENAI_API_KEY).
 *
 *     npm run example:openai-agents -- --address 127.0.0.1:50051 --owner ada
 */

import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";

import { Agent, OpenAIChatCompletionsModel, run, setTracingDisabled } from "@openai/agents";
import OpenAI from "openai";

import { connect, type Memoryd } from "../src/index.js";
import { MemorydSession, memoryTools } from "../src/openai-agents.js";

/** An agent for one user, and its session: memoryd keeps both the turns and what lasts. */
export function assistantFor(
  memoryd: Memoryd,
  client: OpenAI,
  options: { ownerId: string; sessionId: string; model?: string },
): { agent: Agent; session: MemorydSession } {
  const session = new MemorydSession(memoryd, options.sessionId, { ownerId: options.ownerId });
  const agent = new Agent({
    name: "assistant",
    instructions:
      "You are a helpful assistant. When the user tells you something that stays true about " +
      "them, remember it; when you need to know something about them, recall it first.",
    model: new OpenAIChatCompletionsModel(client, options.model ?? "gpt-4.1-mini"),
    tools: memoryTools(session),
  });
  return { agent, session };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      address: { type: "string", default: process.env.MEMORYD_ADDRESS ?? "127.0.0.1:50051" },
      owner: { type: "string", default: "default" },
    },
  });
  setTracingDisabled(true);
  const memoryd = connect(`http://${values.address}`, { token: process.env.MEMORYD_TOKEN });
  const { agent, session } = assistantFor(memoryd, new OpenAI(), {
    ownerId: values.owner,
    sessionId: values.owner,
    model: process.env.OPENAI_MODEL,
  });
  for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    const result = await run(agent, line.trim(), { session });
    console.log(result.finalOutput);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  await main();
}
