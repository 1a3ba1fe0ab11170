/** A local chat-completions server with scripted answers, for the framework tests. */

import { createServer, type IncomingMessage, type Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before } from "node:test";

import { connect, type Memoryd } from "../src/index.js";
import { startServer, type Server } from "./server.js";

/** A chat-completions server: each request is kept, each answer is the next scripted text
 * (streamed as server-sent events when the request asks for a stream). */
export class FakeModel {
  readonly requests: { messages: { role: string; content: unknown }[] }[] = [];
  private readonly replies: string[] = [];
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

  /** Everything the model was last sent, as text. */
  lastSent(): string {
    return JSON.stringify(this.requests[this.requests.length - 1]?.messages ?? []);
  }

  private async answer(request: IncomingMessage): Promise<[number, string, string]> {
    let raw = "";
    for await (const chunk of request) raw += String(chunk);
    const body = JSON.parse(raw) as { messages: { role: string; content: unknown }[]; stream?: boolean };
    this.requests.push(body);
    const text = this.replies.shift();
    if (text === undefined) return [500, "application/json", '{"error":{"message":"no reply scripted"}}'];
    const usage = { prompt_tokens: 321, completion_tokens: 5, total_tokens: 326 };
    if (!body.stream) {
      const message = { role: "assistant", content: text };
      const completion = { id: "c1", object: "chat.completion", created: 1, model: "fake", usage,
        choices: [{ index: 0, message, finish_reason: "stop" }] };
      return [200, "application/json", JSON.stringify(completion)];
    }
    const chunks: object[] = [...(text.match(/.{1,4}/gsu) ?? [])].map((piece) => ({
      id: "c1", object: "chat.completion.chunk", created: 1, model: "fake",
      choices: [{ index: 0, delta: { content: piece }, finish_reason: null }],
    }));
    chunks.push({ id: "c1", object: "chat.completion.chunk", created: 1, model: "fake",
      choices: [{ index: 0, delta: {}, finish_reason: "stop" }], usage });
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

