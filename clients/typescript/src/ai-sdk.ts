/**
 * The Vercel AI SDK's memory, kept by memoryd: a language-model middleware
 * (`@memoryd/client/ai-sdk`).
 *
 *     import { wrapLanguageModel, generateText } from "ai";
 *     import { connect } from "@memoryd/client";
 *     import { memorydMiddleware } from "@memoryd/client/ai-sdk";
 *
 *     const model = wrapLanguageModel({
 *       model: openai("gpt-4.1-mini"),
 *       middleware: memorydMiddleware({ memoryd: connect(url), conversation: { ownerId: "ada",
 *         channel: "web", chatId: sessionId }, contextWindow: 128_000 }),
 *     });
 *
 * Before each call it puts memoryd's composed context into the prompt, as system messages after
 * the application's own: the <memory-context> block (USER.md and MEMORY.md), the conversation's
 * working memory, the agent's recent entries and the latest checkpoint summary (ComposeContext),
 * and the owner's facts that match the user's new message (Recall). With `history: "memoryd"`
 * the earlier turns come from memoryd's window too (so the application sends only the new
 * message, and memoryd's compaction keeps them within the context window); with `"app"` (the
 * default) the application's messages are the history, as `useChat` sends them.
 *
 * After a call that answered, it records the turn (CommitTurn): the user's new message and the
 * model's text, with the prompt tokens the provider reported, so that memoryd's review learns
 * from it and every adapter can search it. A call that failed records nothing, so a retry records
 * the turn once. A step that continues after tool results records the model's text alone. Tool
 * calls and their results are not recorded. A refusal of memoryd is thrown as connect's
 * ConnectError, with its code and message.
 *
 * The middleware is for one conversation of one owner: make one per request, naming the user
 * the application has authenticated. It is typed against @ai-sdk/provider's LanguageModelV3
 * (AI SDK 6); it imports nothing of the SDK at run time.
 */

import type {
  LanguageModelV3CallOptions,
  LanguageModelV3Content,
  LanguageModelV3Message,
  LanguageModelV3Middleware,
  LanguageModelV3Prompt,
  LanguageModelV3StreamPart,
  LanguageModelV3Usage,
} from "@ai-sdk/provider";

import { ContextPartKind } from "./gen/memoryd/v2/context_service_pb.js";
import { RecallScope, RecallSource } from "./gen/memoryd/v2/memory_service_pb.js";
import { Role, type Trust } from "./gen/memoryd/v2/records_pb.js";
import type { ConversationKey, Memoryd, NewMessageInit } from "./index.js";

export interface MemorydMiddlewareOptions {
  /** The client (`connect(url, { token })`). */
  memoryd: Memoryd;
  /** The conversation, with its owner: the user this request is for. */
  conversation: ConversationKey;
  /** The model's context window in tokens: what ComposeContext fits the context into. */
  contextWindow: number;
  /** Where the earlier turns come from (default "app"; see the module's comment). */
  history?: "app" | "memoryd";
  /** How many of the owner's facts that match the new message to add (default 5; 0: none). */
  recallLimit?: number;
  /** The trust of what the user says (Trust.GUEST for a stranger; unset: the operator). */
  userTrust?: Trust;
  /** The user's name as memoryd stores it (default: the conversation's owner). */
  userName?: string;
  /** The assistant's name as memoryd stores it (default "assistant"). */
  assistantName?: string;
}

/** The kinds of composed parts that are memory, not the window's messages. */
const BLOCKS = new Set([
  ContextPartKind.MEMORY_CONTEXT,
  ContextPartKind.WORKING_MEMORY,
  ContextPartKind.RECENT_ENTRIES,
  ContextPartKind.CHECKPOINT_SUMMARY,
  ContextPartKind.RECALLED,
]);

/** A language-model middleware that gives each call memoryd's context and records each turn. */
export function memorydMiddleware(options: MemorydMiddlewareOptions): LanguageModelV3Middleware {
  const recallLimit = options.recallLimit ?? 5;
  const history = options.history ?? "app";
  return {
    specificationVersion: "v3",

    async transformParams({ params }) {
      const said = newUserText(params.prompt);
      const [composed, matching] = await Promise.all([
        options.memoryd.context.composeContext({
          conversation: options.conversation,
          contextWindow: BigInt(options.contextWindow),
          trust: options.userTrust,
        }),
        said && recallLimit > 0
          ? options.memoryd.memory.recall({
              conversation: options.conversation,
              query: searchQuery(said),
              scope: RecallScope.ALL,
              source: RecallSource.MEMORIES,
              limit: recallLimit,
              trust: options.userTrust,
            })
          : undefined,
      ]);
      const blocks: LanguageModelV3Message[] = composed.parts
        .filter((part) => BLOCKS.has(part.kind) && part.content.trim())
        .map((part) => ({ role: "system", content: part.content }));
      const facts = (matching?.hits ?? []).flatMap((hit) =>
        hit.item.case === "memory" ? [`- ${hit.item.value.value}`] : [],
      );
      if (facts.length) {
        blocks.push({
          role: "system",
          content: `What is known of the user that matches their message:\n${facts.join("\n")}`,
        });
      }
      const leading = params.prompt.findIndex((message) => message.role !== "system");
      const head = leading < 0 ? params.prompt : params.prompt.slice(0, leading);
      let rest = leading < 0 ? [] : params.prompt.slice(leading);
      if (history === "memoryd") {
        const earlier: LanguageModelV3Message[] = composed.parts
          .filter((part) => part.kind === ContextPartKind.MESSAGE && part.content.trim())
          .map((part) => asMessage(part.role, part.content));
        rest = rest.slice(lastUserIndex(rest));
        // A step after tool results: the turn's user message was recorded by the step before
        // (memoryd's window ends with it), and the application sends it too.
        const first = rest[0];
        const last = earlier[earlier.length - 1];
        if (first?.role === "user" && last?.role === "user" && textOfMessage(last) === textOfMessage(first)) {
          earlier.pop();
        }
        rest = [...earlier, ...rest];
      }
      return { ...params, prompt: [...head, ...blocks, ...rest] };
    },

    async wrapGenerate({ doGenerate, params }) {
      const result = await doGenerate();
      await record(options, params, textOf(result.content), result.usage);
      return result;
    },

    async wrapStream({ doStream, params }) {
      const { stream, ...rest } = await doStream();
      let text = "";
      let usage: LanguageModelV3Usage | undefined;
      const recording = new TransformStream<LanguageModelV3StreamPart, LanguageModelV3StreamPart>({
        transform(part, controller) {
          if (part.type === "text-delta") text += part.delta;
          if (part.type === "finish") usage = part.usage;
          controller.enqueue(part);
        },
        async flush() {
          await record(options, params, text, usage);
        },
      });
      return { stream: stream.pipeThrough(recording), ...rest };
    },
  };
}

/** CommitTurn: the new user message (when this call started a turn) and the model's text. */
async function record(
  options: MemorydMiddlewareOptions,
  params: LanguageModelV3CallOptions,
  answer: string,
  usage: LanguageModelV3Usage | undefined,
): Promise<void> {
  const messages: NewMessageInit[] = [];
  const said = newUserText(params.prompt);
  if (said) {
    messages.push({
      role: Role.USER,
      sender: options.userName ?? options.conversation.ownerId ?? "user",
      content: said,
      trust: options.userTrust,
    });
  }
  if (answer.trim()) {
    messages.push({
      role: Role.ASSISTANT,
      sender: options.assistantName ?? "assistant",
      content: answer,
    });
  }
  if (!messages.length) return;
  const prompted = usage?.inputTokens.total;
  await options.memoryd.conversations.commitTurn({
    conversation: options.conversation,
    messages,
    trust: options.userTrust,
    usage:
      prompted === undefined
        ? undefined
        : { peakPromptTokens: BigInt(prompted), contextWindow: BigInt(options.contextWindow) },
  });
}

/** memoryd's limits of a search query: distinct words, characters. */
const MAX_QUERY_WORDS = 32;
const MAX_QUERY_CHARS = 1024;

/** A user's message as a memoryd search query: its last 32 distinct words (a long message ends
 * with what it asks more often than it starts with it), at most 1,024 characters. */
export function searchQuery(text: string): string {
  const kept: string[] = [];
  for (const word of text.split(/\s+/u).filter(Boolean).reverse()) {
    if (!kept.includes(word)) kept.push(word);
    if (kept.length === MAX_QUERY_WORDS) break;
  }
  return kept.reverse().join(" ").slice(-MAX_QUERY_CHARS).trim();
}

/** The user's new message: the last message's text when it is the user's (a step that goes on
 * after tool results has none). */
function newUserText(prompt: LanguageModelV3Prompt): string {
  const last = prompt[prompt.length - 1];
  if (!last || last.role !== "user") return "";
  return last.content
    .flatMap((part) => (part.type === "text" ? [part.text] : []))
    .join("\n")
    .trim();
}

function textOfMessage(message: LanguageModelV3Message): string {
  if (message.role === "system") return message.content;
  return message.content
    .flatMap((part) => (part.type === "text" ? [part.text] : []))
    .join("\n")
    .trim();
}

function lastUserIndex(messages: LanguageModelV3Prompt): number {
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i]?.role === "user") return i;
  }
  return messages.length;
}

function textOf(content: LanguageModelV3Content[]): string {
  return content.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("");
}

function asMessage(role: Role, content: string): LanguageModelV3Message {
  if (role === Role.USER) return { role: "user", content: [{ type: "text", text: content }] };
  if (role === Role.ASSISTANT) {
    return { role: "assistant", content: [{ type: "text", text: content }] };
  }
  return { role: "system", content };
}
