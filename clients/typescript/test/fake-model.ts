/** A local chat-completions server with scripted answers, for the framework tests. */

import { createServer, type IncomingMessage, type Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before } from "node:test";

import { connect, type Memoryd } from "../src/index.js";
import { startServer, type Server } from "./server.js";

/** A tool call a scripted answer makes: the tool's name and its arguments. */
export interface ToolCall {
  name: string;
  arguments: Record<string, unknown>;
}

/** A chat-completions server: each request is kept, each answer is the next scripted text or
 * tool calls (streamed as server-sent events when the request asks for a stream). */
export class FakeModel {
  readonly requests: { messages: { role: string; content: unknown }[] }[] = [];
  private readonly replies: (string | ToolCall[])[] = [];
  private readonly http: HttpServer;

  constructor() {
    this.http = createServer((request, response) => {
      void this.answer(request).then(([status, type, body]) => {
        response.writeHead(status, { "content-type": type });
        response.end(body);
      });
    });
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.http.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(this.http.address() as AddressInfo).port}/v1`;
  }

  stop(): Promise<void> {
    return new Promise((resolve) => this.http.close(() => resolve()));
  }

  reply(text: string): void {
    this.replies.push(text);
  }

  /** The next answer calls these tools. */
  callTools(...calls: ToolCall[]): void {
    this.replies.push(calls);
  }

  /** Everything the model was last sent, as text. */
  lastSent(): string {
    return JSON.stringify(this.requests[this.requests.length - 1]?.messages ?? []);
  }

  private async answer(request: IncomingMessage): Promise<[number, string, string]> {
    let raw = "";
    for await (const chunk of request) raw += String(chunk);
    const body = JSON.parse(raw) as { messages: { role: string; content: unknown }[]; stream?: boolean };
    this.requests.push(body);
    const reply = this.replies.shift();
    if (reply === undefined) return [500, "application/json", '{"error":{"message":"no reply scripted"}}'];
    const usage = { prompt_tokens: 321, completion_tokens: 5, total_tokens: 326 };
    const calls = typeof reply === "string" ? undefined : reply.map((call, index) => ({
      index, id: `call_${this.requests.length}_${index}`, type: "function",
      function: { name: call.name, arguments: JSON.stringify(call.arguments) },
    }));
    const finish = calls ? "tool_calls" : "stop";
    if (!body.stream) {
      const message = calls
        ? { role: "assistant", content: null, tool_calls: calls.map(({ id, type, function: f }) => ({ id, type, function: f })) }
        : { role: "assistant", content: reply };
      const completion = { id: "c1", object: "chat.completion", created: 1, model: "fake", usage,
        choices: [{ index: 0, message, finish_reason: finish }] };
      return [200, "application/json", JSON.stringify(completion)];
    }
    const deltas: object[] = calls
      ? [{ tool_calls: calls }]
      : [...((reply as string).match(/.{1,4}/gsu) ?? [])].map((piece) => ({ content: piece }));
    const chunks: object[] = deltas.map((delta) => ({
      id: "c1", object: "chat.completion.chunk", created: 1, model: "fake",
      choices: [{ index: 0, delta, finish_reason: null }],
    }));
    chunks.push({ id: "c1", object: "chat.completion.chunk", created: 1, model: "fake",
      choices: [{ index: 0, delta: {}, finish_reason: finish }], usage });
    const events = chunks.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`).join("");
    return [200, "text/event-stream", `${events}data: [DONE]\n\n`];
  }
}

/** What a framework test talks to: memoryd (its server and client) and the fake model. */
export interface Rig {
  server: Server;
  memoryd: Memoryd;
  fake: FakeModel;
  /** The fake model's OpenAI-compatible base URL. */
  baseURL: string;
}

/** A Rig for the test file: started before its tests, stopped after them. */
export function serverAndModel(): Rig {
  const rig = {} as Rig;
  before(async () => {
    rig.server = await startServer();
    rig.memoryd = connect(rig.server.address);
    rig.fake = new FakeModel();
    rig.baseURL = await rig.fake.start();
  });
  after(async () => {
    await rig.fake.stop();
    await rig.server.stop();
  });
  return rig;
}

