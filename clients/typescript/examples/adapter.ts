/**
 * A console channel adapter: each line of stdin is a user message. memoryd composes the context
 * of the next model call; the reply is an echo, or the answer of an OpenAI-compatible model when
 * OPENAI_BASE_URL and OPENAI_MODEL are set (OPENAI_API_KEY if it needs one); the turn is
 * committed, then what memoryd knows about the user is printed. With --voice, each line is also
 * spoken into a realtime transcript (a partial, then the final), and the stream is cut once and
 * resumed to show that nothing is lost.
 *
 *     npm run example -- --address 127.0.0.1:50051 --owner ada [--voice]
 */

import { createInterface } from "node:readline";
import { parseArgs } from "node:util";

import {
  Code,
  ConnectError,
  RecallScope,
  Role,
  Speaker,
  assistant,
  connect,
  user,
  type ComposeContextResponse,
} from "../src/index.js";

const { values } = parseArgs({
  options: {
    address: { type: "string", default: process.env.MEMORYD_ADDRESS ?? "127.0.0.1:50051" },
    owner: { type: "string", default: "default" },
    chat: { type: "string", default: "console" },
    voice: { type: "boolean", default: false },
  },
});
const owner = values.owner;
const memoryd = connect(values.address, { token: process.env.MEMORYD_TOKEN });
const chat = memoryd.conversation({ ownerId: owner, channel: "console", chatId: values.chat });
const voice = values.voice
  ? await memoryd.openTranscript({ deviceId: values.chat, sessionId: `console-${process.pid}`, ownerId: owner })
  : undefined;

async function compose(): Promise<ComposeContextResponse | undefined> {
  try {
    return await chat.compose(8000);
  } catch (error) {
    if (ConnectError.from(error).code === Code.NotFound) {
      return undefined; // a new conversation has no record yet
    }
    throw error;
  }
}

async function answer(composed: ComposeContextResponse | undefined, text: string): Promise<string> {
  const base = process.env.OPENAI_BASE_URL;
  const model = process.env.OPENAI_MODEL;
  if (!base || !model) {
    return `echo: ${text}`;
  }
  const messages = (composed?.parts ?? []).map((part) => ({
    role: Role[part.role].toLowerCase(),
    content: part.content,
  }));
  messages.push({ role: "user", content: text });
  const response = await fetch(`${base.replace(/\/$/, "")}/chat/completions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(process.env.OPENAI_API_KEY ? { authorization: `Bearer ${process.env.OPENAI_API_KEY}` } : {}),
    },
    body: JSON.stringify({ model, messages }),
  });
  const decoded = (await response.json()) as { choices?: { message?: { content?: string } }[] };
  return decoded.choices?.[0]?.message?.content ?? `(the model answered ${response.status})`;
}

let seq = 0;
for await (const line of createInterface({ input: process.stdin })) {
  const text = line.trim();
  if (!text) {
    continue;
  }
  const reply = await answer(await compose(), text);
  console.log(`assistant: ${reply}`);
  await chat.commitTurn(user(owner, text), assistant("adapter", reply));
  if (voice) {
    seq += 1;
    voice.partial(seq, Speaker.USER, text.slice(0, Math.ceil(text.length / 2)));
    await voice.final(seq, Speaker.USER, text);
    if (seq === 1) {
      voice.cut(); // as a dropped connection would; the next final resumes the session
    }
    console.log(`voice: committed ${voice.committed} (reconnects ${voice.reconnects})`);
  }
  const known = await chat.recall("", RecallScope.ALL);
  for (const hit of known.hits) {
    if (hit.item.case === "memory") {
      console.log(`known: ${hit.item.value.key} = ${hit.item.value.value}`);
    }
  }
}
if (voice) {
  const totals = await voice.end();
  console.log(`voice: ${totals?.finalsStored ?? 0} finals stored`);
}
