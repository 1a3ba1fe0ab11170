import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import {
  AppendOutcome,
  Category,
  Code,
  ConnectError,
  ConversationService,
  MemoryService,
  RecallScope,
  Speaker,
  assistant,
  connect,
  createTransport,
  errorDetails,
  isIdempotent,
  isKeyedAppend,
  Memoryd,
  user,
} from "../src/index.js";
import { startServer, unique, type Server } from "./server.js";

let server: Server;
let memoryd: Memoryd;

before(async () => {
  server = await startServer();
  memoryd = connect(server.address);
});

after(async () => {
  await server.stop();
});

test("append, list and search keep text byte for byte", async () => {
  const chat = memoryd.conversation({ ownerId: "ts-tests", channel: "telegram", chatId: unique("chat") });
  const text = "Meet me in 東京 at 🍣 time, naïve café";
  const appended = await chat.append(user("ada", text), assistant("bot", "Booked."));
  assert.deepEqual(
    appended.results.map((result) => result.outcome),
    [AppendOutcome.STORED, AppendOutcome.STORED],
  );
  const listed = await chat.list(10);
  assert.deepEqual(
    listed.messages.map((message) => message.content),
    [text, "Booked."],
  );
  const found = await chat.search("東京");
  // The word match comes first; once vectors are made, hybrid search may add the other message
  // of the conversation by its meaning.
  assert.equal(found.hits[0]?.message?.content, text);
});

test("store, recall, the prompt context and the composed context", async () => {
  const chat = memoryd.conversation({ ownerId: unique("owner"), channel: "telegram", chatId: "c" });
  await chat.store({ category: Category.PREFERENCE, key: "diet", value: "Vegetarian, no fish" });
  const recalled = await chat.recall("vegetarian", RecallScope.OWNER);
  assert.deepEqual(
    recalled.hits.map((hit) => (hit.item.case === "memory" ? hit.item.value.value : "")),
    ["Vegetarian, no fish"],
  );
  const prompt = await chat.promptContext();
  assert.match(prompt.userMd, /Vegetarian, no fish/);
  await chat.commitTurn(user("ada", "what should I cook?"), assistant("bot", "Dal."));
  const composed = await chat.compose(8000);
  assert.match(composed.parts[0].content, /Vegetarian, no fish/);
  assert.equal(composed.parts.at(-1)?.content, "Dal.");
});

test("an error is a ConnectError with the status and the server's message", async () => {
  await assert.rejects(
    memoryd.conversations.appendMessages({ conversation: { chatId: "x" }, messages: [user("ada", "hi")] }),
    (error: unknown) => {
      assert.ok(error instanceof ConnectError);
      assert.equal(error.code, Code.InvalidArgument);
      assert.match(error.rawMessage, /conversation\.channel is required/);
      return true;
    },
  );
});

test("only the calls the contract marks idempotent are retried", () => {
  const methods = ConversationService.method;
  assert.ok(isIdempotent(methods.listMessages));
  assert.ok(isIdempotent(MemoryService.method.recall));
  assert.ok(!isIdempotent(methods.appendMessages));
  assert.ok(!isIdempotent(methods.commitTurn));
  assert.ok(!isIdempotent(methods.streamTranscript));
});

test("an append is retried only when every message carries a client_message_id", () => {
  const methods = ConversationService.method;
  const keyed = { clientMessageId: "m-1", content: "hi" };
  assert.ok(isKeyedAppend(methods.appendMessages, { messages: [keyed, { ...keyed, clientMessageId: "m-2" }] }));
  assert.ok(!isKeyedAppend(methods.appendMessages, { messages: [keyed, { content: "no key" }] }));
  assert.ok(!isKeyedAppend(methods.appendMessages, { messages: [] }));
  assert.ok(!isKeyedAppend(methods.commitTurn, { messages: [keyed] }));
});

test("a transcript cut mid-stream resumes without loss or duplicate", async () => {
  const device = unique("kitchen");
  const session = await memoryd.openTranscript({
    deviceId: device,
    sessionId: "s-1",
    ownerId: "ts-tests",
    model: "rt",
  });
  assert.ok(session.persisted, "the server must store transcripts (persist_transcripts)");
  session.partial(1, Speaker.USER, "what's the");
  await session.final(1, Speaker.USER, "what's the weather");
  await session.final(2, Speaker.ASSISTANT, "sunny, 21°C");
  // A final in flight when the stream is cut: it is sent again on the reopened stream.
  const third = session.final(3, Speaker.USER, "and tomorrow?");
  session.cut();
  await third;
  await session.final(4, Speaker.ASSISTANT, "rain 雨");
  assert.equal(session.committed, 4n);
  assert.ok(session.reconnects >= 1);
  await session.end();
  const listed = await memoryd.conversations.listMessages({
    conversation: { ownerId: "ts-tests", channel: "realtime", chatId: `local:${device}` },
    pageSize: 100,
  });
  assert.deepEqual(
    listed.messages.map((message) => message.content),
    ["what's the weather", "sunny, 21°C", "and tomorrow?", "rain 雨"],
  );
});

test("a refusal carries its reason and field, readable with errorDetails", async () => {
  const failure = await memoryd.conversations
    .appendMessages({ conversation: { chatId: "x" }, messages: [user("ada", "hi")] })
    .then(
      () => undefined,
      (error: unknown) => ConnectError.from(error),
    );
  assert.equal(failure?.code, Code.InvalidArgument);
  assert.match(failure?.rawMessage ?? "", /conversation\.channel is required/);
  const details = errorDetails(failure);
  assert.equal(details?.reason, "REQUIRED");
  assert.equal(details?.field, "conversation.channel");
  assert.equal(errorDetails(new Error("not a status")), undefined);
});

test("TLS with a custom CA, and mutual TLS with a client certificate", async () => {
  const secured = await startServer({ tls: "mutual" });
  try {
    const tls = secured.tls!;
    const client = new Memoryd(
      createTransport(`https://${secured.address}`, {
        tls: { ca: tls.ca, cert: tls.clientCert, key: tls.clientKey },
      }),
    );
    const chat = client.conversation({ ownerId: "ts-tls", channel: "telegram", chatId: unique("tls") });
    await chat.append(user("ada", "over TLS"));
    assert.deepEqual(
      (await chat.list(5)).messages.map((message) => message.content),
      ["over TLS"],
    );
    // Without the client certificate the server refuses the connection (in TLS 1.3 after the
    // handshake: the stream is reset, which node reports as CANCELED).
    const anonymous = connect(`https://${secured.address}`, { tls: { ca: tls.ca }, timeoutMs: 5000 });
    await assert.rejects(
      anonymous.conversations.listMessages({ conversation: { channel: "telegram", chatId: "x" } }),
      (error: unknown) => [Code.Unavailable, Code.Canceled].includes(ConnectError.from(error).code),
    );
    // A CA that did not sign the server's certificate: the client refuses the server.
    const stranger = connect(`https://${secured.address}`, {
      tls: { ca: tls.clientCert, cert: tls.clientCert, key: tls.clientKey },
      timeoutMs: 5000,
    });
    await assert.rejects(
      stranger.conversations.listMessages({ conversation: { channel: "telegram", chatId: "x" } }),
      /unable to verify the first certificate/,
    );
    // TLS options need an https:// URL.
    assert.throws(() => createTransport(`http://${secured.address}`, { tls: { ca: tls.ca } }));
  } finally {
    await secured.stop();
  }
});
