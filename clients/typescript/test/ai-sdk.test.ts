/**
 * The Vercel AI SDK's middleware over memoryd (`@memoryd/client/ai-sdk`), through the SDK's own
 * generateText and streamText with wrapLanguageModel, against a real memoryd; the model is the
 * SDK's OpenAI-compatible provider on a local chat-completions server with scripted answers.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, streamText, wrapLanguageModel } from "ai";

import { rememberingModel } from "../examples/ai-sdk.js";
import type { LanguageModelV3, LanguageModelV3Prompt } from "@ai-sdk/provider";

import { memorydMiddleware, searchQuery } from "../src/ai-sdk.js";
import { Category, Code, ConnectError, Role, ScopeType, Trust } from "../src/index.js";
import { serverAndModel } from "./fake-model.js";
import { unique } from "./server.js";

const rig = serverAndModel();

/** A model to hand transformParams (it is not called). */
function fakeModelOf(): LanguageModelV3 {
  return createOpenAICompatible({ name: "fake", baseURL: rig.baseURL, apiKey: "unused" }).chatModel("m");
}

/** The example's model for one user's conversation, on the fake. */
function modelFor(ownerId: string, chatId: string, history: "app" | "memoryd" = "app") {
  const provider = createOpenAICompatible({ name: "fake", baseURL: rig.baseURL, apiKey: "unused", includeUsage: true });
  const conversation = { agentId: "ai-sdk", ownerId, channel: "web", chatId };
  return rememberingModel(rig.memoryd, provider.chatModel("fake-model"), conversation, {
    contextWindow: 8000,
    history,
  });
}

async function remember(ownerId: string, key: string, value: string, category: Category) {
  await rig.memoryd.memory.storeMemory({
    caller: { case: "owner", value: { agentId: "ai-sdk", ownerId } },
    category,
    scopeType: ScopeType.OWNER,
    key,
    value,
  });
}

async function stored(ownerId: string, chatId: string) {
  const listed = await rig.memoryd.conversations.listMessages({
    conversation: { agentId: "ai-sdk", ownerId, channel: "web", chatId },
  });
  return listed.messages.map((message) => [message.role, message.sender, message.content]);
}

test("each call gets memoryd's context and each turn is recorded", async () => {
  const ada = unique("ada");
  await remember(ada, "diet", "Is vegetarian", Category.PREFERENCE);
  await remember(ada, "locker", "Locker code 4417", Category.FACT);
  rig.fake.reply("Your locker is 4417.");
  const first = await generateText({
    model: modelFor(ada, "c1"),
    system: "You are a helpful assistant.",
    prompt: "What is my locker code?",
  });
  assert.equal(first.text, "Your locker is 4417.");
  const sent = rig.fake.lastSent();
  assert.match(sent, /Is vegetarian/); // the memory-context block (USER.md)
  assert.match(sent, /Locker code 4417/); // a fact that matches the question
  // The application's system message stays first.
  assert.equal(rig.fake.requests[rig.fake.requests.length - 1]?.messages[0]?.content, "You are a helpful assistant.");
  assert.deepEqual(await stored(ada, "c1"), [
    [Role.USER, ada, "What is my locker code?"],
    [Role.ASSISTANT, "assistant", "Your locker is 4417."],
  ]);
  const state = await rig.memoryd.conversations.getConversation({
    conversation: { agentId: "ai-sdk", ownerId: ada, channel: "web", chatId: "c1" },
  });
  assert.equal(state.messageCount, 2n);

  // Another user of the same agent: none of Ada's memory.
  rig.fake.reply("I don't know.");
  await generateText({ model: modelFor(unique("ben"), "c1"), prompt: "What is my locker code?" });
  assert.doesNotMatch(rig.fake.lastSent(), /4417|vegetarian/);
});

test("a long message is searched by its last words, within memoryd's limits", async () => {
  const ada = unique("ada");
  await remember(ada, "boat", "Owns a sailing boat called Ariel", Category.FACT);
  // More distinct words than memoryd searches at once (it refuses such a query).
  const asides = Array.from({ length: 60 }, (_, number) => `aside${number}`).join(" ");
  const long = `${asides} where is my sailing boat moored?`;
  assert.equal(searchQuery(long).split(" ").length, 32);
  // As a query of its own, memoryd refuses it; the middleware searches its last words instead.
  await assert.rejects(
    rig.memoryd.memory.recall({ conversation: { ownerId: ada, channel: "web", chatId: "long" }, query: long }),
    /words; the limit is 32/,
  );
  rig.fake.reply("In the marina.");
  const answered = await generateText({ model: modelFor(ada, "long"), prompt: long });
  assert.equal(answered.text, "In the marina.");
  assert.equal((await stored(ada, "long")).length, 2);
});

test("with memoryd's history the application sends only the new message", async () => {
  const ada = unique("ada");
  rig.fake.reply("Nice to meet you, Ada.");
  await generateText({ model: modelFor(ada, "h", "memoryd"), prompt: "I am Ada, I live in Porto." });
  rig.fake.reply("In Porto.");
  await generateText({ model: modelFor(ada, "h", "memoryd"), prompt: "Where do I live?" });
  const messages = rig.fake.requests[rig.fake.requests.length - 1]?.messages ?? [];
  const said = messages.filter((m) => m.role !== "system").map((m) => JSON.stringify(m.content));
  assert.equal(said.length, 3);
  assert.match(said[0] ?? "", /I am Ada, I live in Porto\./);
  assert.match(said[1] ?? "", /Nice to meet you, Ada\./);
  assert.match(said[2] ?? "", /Where do I live\?/);
});

test("a step after tool results is not sent the turn's user message twice", async () => {
  const ada = unique("ada");
  const conversation = { agentId: "ai-sdk", ownerId: ada, channel: "web", chatId: "tools" };
  const middleware = memorydMiddleware({ memoryd: rig.memoryd, conversation, contextWindow: 8000, history: "memoryd" });
  // The first step called a tool and said nothing: its user message is recorded alone.
  await rig.memoryd.conversations.commitTurn({
    conversation,
    messages: [{ role: Role.USER, sender: ada, content: "Book a table for two." }],
  });
  const transform = middleware.transformParams;
  assert.ok(transform);
  const prompt: LanguageModelV3Prompt = [
    { role: "user", content: [{ type: "text", text: "Book a table for two." }] },
    { role: "assistant", content: [{ type: "tool-call", toolCallId: "c1", toolName: "book", input: "{}" }] },
    { role: "tool", content: [{ type: "tool-result", toolCallId: "c1", toolName: "book", output: { type: "text", value: "booked" } }] },
  ];
  const sent = await transform({ type: "generate", params: { prompt }, model: fakeModelOf() });
  const users = sent.prompt.filter((message) => message.role === "user");
  assert.equal(users.length, 1);
});

test("a streamed answer is recorded whole once the stream ends", async () => {
  const ada = unique("ada");
  rig.fake.reply("Streaming, piece by piece — 東京 🍣.");
  const result = streamText({ model: modelFor(ada, "s"), prompt: "Tell me in pieces." });
  let text = "";
  for await (const piece of result.textStream) text += piece;
  assert.equal(text, "Streaming, piece by piece — 東京 🍣.");
  assert.deepEqual(await stored(ada, "s"), [
    [Role.USER, ada, "Tell me in pieces."],
    [Role.ASSISTANT, "assistant", "Streaming, piece by piece — 東京 🍣."],
  ]);
});

test("a failed call records nothing, and a refusal of memoryd says why", async () => {
  const ada = unique("ada");
  // No reply scripted: the model answers 500, and the SDK gives up after its retries.
  await assert.rejects(
    generateText({ model: modelFor(ada, "f"), prompt: "Anyone there?", maxRetries: 1 }),
  );
  assert.deepEqual(await stored(ada, "f"), []);

  const guest = wrapLanguageModel({
    model: createOpenAICompatible({ name: "fake", baseURL: rig.baseURL, apiKey: "unused" }).chatModel("m"),
    middleware: memorydMiddleware({
      memoryd: rig.memoryd,
      conversation: { agentId: "ai-sdk", ownerId: " ada", channel: "web", chatId: "x" },
      contextWindow: 8000,
      userTrust: Trust.GUEST,
    }),
  });
  const refused = await generateText({ model: guest, prompt: "hello", maxRetries: 0 }).catch(
    (error: unknown) => error,
  );
  const cause = ConnectError.from(refused instanceof Error && refused.cause ? refused.cause : refused);
  assert.equal(cause.code, Code.InvalidArgument);
  assert.match(cause.rawMessage, /owner_id/);
});
