/**
 * A Vercel AI SDK chat whose memory is memoryd's: the model is wrapped in memoryd's middleware,
 * so each call gets what memoryd knows of the user and each turn is recorded for memoryd to learn
 * from. Each line of stdin is a user turn; the model is any OpenAI-compatible endpoint
 * (OPENAI_BASE_URL, OPENAI_MODEL, OPENAI_API_KEY).
 *
 *     npm run example:ai-sdk -- --address 127.0.0.1:50051 --owner ada
 */

import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";

import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import type { LanguageModelV3 } from "@ai-sdk/provider";
import { generateText, wrapLanguageModel } from "ai";

import { memorydMiddleware } from "../src/ai-sdk.js";
import { connect, type ConversationKey, type Memoryd } from "../src/index.js";

/** `model`, given memoryd's context before each call and recording each turn of `conversation`
 * (make one per request: the conversation names the user). */
export function rememberingModel(
  memoryd: Memoryd,
  model: LanguageModelV3,
  conversation: ConversationKey,
  options: { contextWindow?: number; history?: "app" | "memoryd" } = {},
): LanguageModelV3 {
  return wrapLanguageModel({
    model,
    middleware: memorydMiddleware({
      memoryd,
      conversation,
      contextWindow: options.contextWindow ?? 128_000,
      history: options.history,
    }),
  });
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      address: { type: "string", default: process.env.MEMORYD_ADDRESS ?? "127.0.0.1:50051" },
      owner: { type: "string", default: "default" },
    },
  });
  const memoryd = connect(`http://${values.address}`, { token: process.env.MEMORYD_TOKEN });
  const provider = createOpenAICompatible({
    name: "openai",
    baseURL: process.env.OPENAI_BASE_URL ?? "https://api.openai.com/v1",
    apiKey: process.env.OPENAI_API_KEY,
  });
  const model = rememberingModel(
    memoryd,
    provider.chatModel(process.env.OPENAI_MODEL ?? "gpt-4.1-mini"),
    { ownerId: values.owner, channel: "ai-sdk", chatId: values.owner },
    { history: "memoryd" },
  );
  for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    const { text } = await generateText({ model, prompt: line.trim() });
    console.log(text);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  await main();
}
