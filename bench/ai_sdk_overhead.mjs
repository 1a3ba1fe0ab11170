// The Vercel AI SDK's memoryd middleware against the same RPCs called directly, turn by turn
// (bench/ai_sdk_overhead.py starts memoryd and the model, builds the client, and runs this).
// Reads TS_CLIENT (clients/typescript, built), MEMORYD_ADDRESS, MODEL_URL, TURNS_FILE (JSON list
// of user lines), ROUNDS; prints one JSON document.

import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const client = process.env.TS_CLIENT;
const load = (path) => import(pathToFileURL(`${client}/${path}`).href);
const { connect, Role } = await load("dist/src/index.js");
const { memorydMiddleware, searchQuery } = await load("dist/src/ai-sdk.js");
const { ContextPartKind } = await load("dist/src/gen/memoryd/v2/context_service_pb.js");
const { RecallScope, RecallSource } = await load("dist/src/gen/memoryd/v2/memory_service_pb.js");
const { generateText, wrapLanguageModel } = await load("node_modules/ai/dist/index.mjs");
const { createOpenAICompatible } = await load("node_modules/@ai-sdk/openai-compatible/dist/index.mjs");

const memoryd = connect(`http://${process.env.MEMORYD_ADDRESS}`);
const model = createOpenAICompatible({ name: "fake", baseURL: process.env.MODEL_URL, apiKey: "x" }).chatModel("m");
const turns = JSON.parse(readFileSync(process.env.TURNS_FILE, "utf8"));
const rounds = Number(process.env.ROUNDS ?? "3");
const contextWindow = 128_000;
const BLOCKS = new Set([ContextPartKind.MEMORY_CONTEXT, ContextPartKind.WORKING_MEMORY,
  ContextPartKind.RECENT_ENTRIES, ContextPartKind.CHECKPOINT_SUMMARY]);

function integration(conversation) {
  const wrapped = wrapLanguageModel({ model, middleware: memorydMiddleware({ memoryd, conversation, contextWindow }) });
  return async (said) => {
    await generateText({ model: wrapped, prompt: said, maxRetries: 0 });
  };
}

// What an application does without the middleware: the same two reads, the prompt, the call,
// the turn recorded.
function direct(conversation) {
  return async (said) => {
    const [composed, matching] = await Promise.all([
      memoryd.context.composeContext({ conversation, contextWindow: BigInt(contextWindow) }),
      memoryd.memory.recall({ conversation, query: searchQuery(said), scope: RecallScope.ALL,
        source: RecallSource.MEMORIES, limit: 5 }),
    ]);
    const system = composed.parts.filter((p) => BLOCKS.has(p.kind)).map((p) => ({ role: "system", content: p.content }));
    const facts = matching.hits.flatMap((h) => (h.item.case === "memory" ? [`- ${h.item.value.value}`] : []));
    if (facts.length) system.push({ role: "system", content: facts.join("\n") });
    const result = await generateText({ model, messages: [...system, { role: "user", content: said }], maxRetries: 0 });
    await memoryd.conversations.commitTurn({
      conversation,
      messages: [
        { role: Role.USER, sender: "bench", content: said },
        { role: Role.ASSISTANT, sender: "assistant", content: result.text },
      ],
    });
  };
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const p99 = (values) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * 0.99))];
const through = [];
const plain = [];
for (let round = 0; round < rounds; round++) {
  const id = `${Date.now()}-${round}`;
  const ours = integration({ ownerId: "bench", channel: "ai-sdk", chatId: `mw-${id}` });
  const theirs = direct({ ownerId: "bench", channel: "ai-sdk", chatId: `direct-${id}` });
  for (const [index, said] of turns.entries()) {
    const pair = [[ours, through], [theirs, plain]];
    if ((index + round) % 2) pair.reverse();
    for (const [step, spent] of pair) {
      const started = performance.now();
      await step(said);
      spent.push(performance.now() - started);
    }
  }
}
const round3 = (value) => Math.round(value * 1000) / 1000;
console.log(JSON.stringify({
  turns: through.length,
  integration_p50_ms: round3(median(through)),
  direct_p50_ms: round3(median(plain)),
  added_p50_ms: round3(median(through) - median(plain)),
  integration_p99_ms: round3(p99(through)),
  direct_p99_ms: round3(p99(plain)),
}));
