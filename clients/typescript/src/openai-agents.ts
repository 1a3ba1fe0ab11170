/**
 * The OpenAI Agents SDK's memory, kept by memoryd (`@memoryd/client/openai-agents`): the
 * TypeScript SDK's `Session`, and memory tools an Agent can be given.
 *
 *     import { Agent, run } from "@openai/agents";
 *     import { connect } from "@memoryd/client";
 *     import { MemorydSession, memoryTools } from "@memoryd/client/openai-agents";
 *
 *     const session = new MemorydSession(connect(url), "chat-42", { ownerId: "ada" });
 *     const agent = new Agent({ name: "assistant", tools: memoryTools(session) });
 *     await run(agent, "I'm vegetarian", { session });
 *
 * A session is a conversation of one owner (channel "openai-agents", chat_id the session id, or
 * the conversation given), and each item of a run is one message of it, committed before
 * `addItems` resolves:
 * - a message item (user, assistant, system) is a chat message with its text as the content,
 *   so memoryd's review learns from what the user said, search finds it and ComposeContext sees
 *   it; a tool call, its result and reasoning are messages of their own kinds
 *   (`openai_function_call`, ...), which the review does not read;
 * - the item itself, its longest text left out, is the message's metadata (`openai_agents_js`),
 *   so `getItems` gives back each item as it was added. A message item of a role and a text
 *   (`{ type: "message", role, content }`, what a run's string input becomes) needs none;
 * - `getItems` reads the conversation's window, oldest first; `popItem` erases the newest message
 *   (PurgeMessages: it is gone from history and search, not only from the session);
 *   `clearSession` is `/new`: a fresh window, the earlier items kept in history (searchable, and
 *   reviewed first); `purgeSession` erases them all (PurgeConversation).
 *
 * Messages that memoryd or another adapter put in the conversation (a compaction's summary, a
 * Telegram turn, the Python SDK's session of the same id) read as message items of their role
 * and text: the Python SDK's items have another shape (`call_id`, not `callId`), so each SDK
 * keeps its own member and reads the other's as text.
 *
 * `memoryTools` are the SDK's function tools over memoryd's long-term memory, for the owner the
 * application chose (no argument of the model names one): `remember` a durable fact (USER.md or
 * MEMORY.md), `recall` what is known. A refusal of memoryd is connect's ConnectError, whose
 * message (its status and memoryd's words) the SDK hands to the model.
 */

import { createHash } from "node:crypto";

import { tool, type AgentInputItem, type Session, type Tool } from "@openai/agents";

import { RecallScope, RecallSource } from "./gen/memoryd/v2/memory_service_pb.js";
import { Category, Role, Trust, type Message } from "./gen/memoryd/v2/records_pb.js";
import type { ConversationKey, Memoryd, NewMessageInit } from "./index.js";
import { batches, keptItem, keptMetadata, readWindow, splitText, textOr } from "./kept.js";

export const CHANNEL = "openai-agents";
/** The metadata member that holds the item. */
export const METADATA_KEY = "openai_agents_js";
/** Tries of popItem when another caller erases the newest message first. */
const POP_TRIES = 5;

const ROLES = new Map<unknown, Role>([
  ["user", Role.USER],
  ["assistant", Role.ASSISTANT],
  ["system", Role.SYSTEM],
]);
const ROLE_NAMES = new Map<Role, "user" | "assistant" | "system">([
  [Role.USER, "user"],
  [Role.ASSISTANT, "assistant"],
  [Role.SYSTEM, "system"],
  [Role.TOOL, "assistant"],
]);

export interface MemorydSessionOptions {
  /** The owner of the conversation (default "default"). */
  ownerId?: string;
  /** The agent (default "main"). */
  agentId?: string;
  /** The conversation itself, instead of one in channel "openai-agents" named by the id. */
  conversation?: ConversationKey;
  /** The trust of what the user says (Trust.GUEST for a stranger in a public bot; unset: the
   * operator). */
  userTrust?: Trust;
}

/** A Session of the OpenAI Agents SDK kept in memoryd: one conversation's window. */
export class MemorydSession implements Session {
  readonly conversation: ConversationKey;
  readonly userTrust: Trust;

  constructor(
    readonly memoryd: Memoryd,
    readonly sessionId: string,
    options: MemorydSessionOptions = {},
  ) {
    this.conversation = options.conversation ?? {
      agentId: options.agentId ?? "main",
      ownerId: options.ownerId ?? "default",
      channel: CHANNEL,
      chatId: sessionId,
    };
    this.userTrust = options.userTrust ?? Trust.UNSPECIFIED;
  }

  getSessionId(): Promise<string> {
    return Promise.resolve(this.sessionId);
  }

  /** The window's items, oldest first; with a limit, the newest `limit` of them. */
  async getItems(limit?: number): Promise<AgentInputItem[]> {
    return (await readWindow(this.memoryd, this.conversation, limit)).map(itemOf);
  }

  /** Append the items, in order; resolved once memoryd has committed them (each batch of 100
   * at once). */
  async addItems(items: AgentInputItem[]): Promise<void> {
    for (const batch of batches(items.map((item) => this.messageOf(item)))) {
      await this.memoryd.conversations.appendMessages({
        conversation: this.conversation,
        messages: batch,
      });
    }
  }

  /** Erase the newest item of the window and return it; undefined when the window is empty.
   * The message is erased from memoryd (PurgeMessages), not only from the session. */
  async popItem(): Promise<AgentInputItem | undefined> {
    for (let attempt = 0; attempt < POP_TRIES; attempt++) {
      const [newest] = await readWindow(this.memoryd, this.conversation, 1);
      if (newest === undefined) return undefined;
      const purged = await this.memoryd.conversations.purgeMessages({
        conversation: this.conversation,
        messageIds: [newest.id],
      });
      if (purged.purgedMessageIds.includes(newest.id)) return itemOf(newest);
    }
    throw new Error(`the newest item of session ${JSON.stringify(this.sessionId)} kept changing`);
  }

  /** /new: a fresh, empty window. The items stay in memoryd's history (searchable, and reviewed
   * first); purgeSession erases them. */
  async clearSession(): Promise<void> {
    await this.memoryd.conversations.clearConversation({ conversation: this.conversation });
  }

  /** Erase the conversation: every item, and the notes kept for it. */
  async purgeSession(): Promise<void> {
    await this.memoryd.conversations.purgeConversation({ conversation: this.conversation });
  }

  private messageOf(item: AgentInputItem): NewMessageInit {
    const raw = item as Record<string, unknown>;
    const roleName = typeof raw.role === "string" ? raw.role : undefined;
    let role = ROLES.get(roleName);
    let kind = "chat_message";
    let sender: string;
    if (role !== undefined) {
      sender = role === Role.USER ? this.conversation.ownerId || "user" : (roleName ?? "");
    } else {
      const type = textOr(raw.type, "item");
      role = /_(output|result)$/u.test(type) ? Role.TOOL : Role.ASSISTANT;
      kind = kindOf(type);
      sender = textOr(raw.name, role === Role.TOOL ? "tool" : "assistant");
    }
    const [text, shape] = splitText(raw);
    return {
      sender: sender.slice(0, 256),
      role,
      kind,
      content: text,
      metadata: isPlain(raw) ? "" : keptMetadata(METADATA_KEY, shape),
      trust: role === Role.USER ? this.userTrust : Trust.UNSPECIFIED,
    };
  }
}

/** The item a message holds: the one added, or a message item of its role and text. */
export function itemOf(message: Message): AgentInputItem {
  const kept = keptItem(message, METADATA_KEY);
  if (kept !== undefined) return kept as unknown as AgentInputItem;
  return {
    type: "message",
    role: ROLE_NAMES.get(message.role) ?? "user",
    content: message.content,
  } as AgentInputItem;
}

/** A message item of a role and a text, and nothing else: it reads back from the message's role
 * and content (itemOf). */
function isPlain(raw: Record<string, unknown>): boolean {
  const keys = Object.keys(raw).sort().join(",");
  return (
    keys === "content,role,type" &&
    raw.type === "message" &&
    typeof raw.content === "string" &&
    raw.content.trim() !== "" &&
    (raw.role === "user" || raw.role === "assistant" || raw.role === "system")
  );
}

/** A message kind for an item type: lowercase letters, digits and '_', at most 64. */
function kindOf(type: string): string {
  return `openai_${type.replace(/[^A-Za-z0-9_]/gu, "_").toLowerCase()}`.slice(0, 64);
}

// --- the memory tools ----------------------------------------------------------------------------

const CATEGORIES = new Map<unknown, Category>([
  ["identity", Category.IDENTITY],
  ["preference", Category.PREFERENCE],
  ["interest", Category.INTEREST],
  ["goal", Category.GOAL],
  ["context", Category.CONTEXT],
  ["directive", Category.DIRECTIVE],
]);

/** A key for a fact remembered without one: the same fact, the same key (as `memoryd mcp` and
 * the Python client make them). */
export function keyOf(category: string, fact: string): string {
  const digest = createHash("sha256").update(fact.trim().toLowerCase()).digest("hex");
  return `${category}_${digest.slice(0, 12)}`;
}

export interface MemoryToolsOptions {
  /** The trust of the writes (default: the session's user trust). */
  trust?: Trust;
}

/** `remember` and `recall` over the long-term memory of the session's owner, learnt in its
 * conversation. The owner is the application's choice: no argument of the model names one. */
export function memoryTools(session: MemorydSession, options: MemoryToolsOptions = {}): Tool[] {
  const { memoryd, conversation } = session;
  const trust = options.trust ?? session.userTrust;
  const remember = tool({
    name: "remember",
    description:
      "Remember a durable fact about the user or their work: it reaches every later " +
      "conversation with them. Use it for what stays true (a name, a diet, a goal).",
    parameters: {
      type: "object",
      properties: {
        fact: { type: "string", description: 'The fact, as it should read in the prompt, e.g. "Is vegetarian".' },
        category: {
          type: "string",
          enum: [...CATEGORIES.keys()],
          description:
            "About the user: identity, preference, interest, goal. About their work: context; " +
            "directive, a standing rule for you (only the operator sets one).",
        },
        key: {
          type: ["string", "null"],
          description:
            'A short stable name, e.g. "diet": remembering the same key again replaces the fact. ' +
            "Null: a key made from the fact.",
        },
      },
      required: ["fact", "category", "key"],
      additionalProperties: false,
    },
    strict: true,
    async execute(input) {
      const { fact, category, key } = input as { fact: unknown; category: unknown; key: unknown };
      const chosen = CATEGORIES.get(category);
      if (typeof fact !== "string" || typeof category !== "string" || chosen === undefined) {
        throw new Error(`remember needs a fact and one of the categories ${[...CATEGORIES.keys()].join(", ")}`);
      }
      const stored = await memoryd.memory.storeMemory({
        caller: { case: "conversation", value: conversation },
        category: chosen,
        key: typeof key === "string" && key ? key : keyOf(category, fact),
        value: fact,
        trust,
      });
      return JSON.stringify({ remembered: { key: stored.memory?.key, value: stored.memory?.value } });
    },
  });
  const recall = tool({
    name: "recall",
    description:
      "Search what is known about the user (remembered facts and notes) by words and meaning, " +
      "best first. No hits means nothing known matches: say so rather than guess.",
    parameters: {
      type: "object",
      properties: {
        query: { type: "string", description: "What to look for, in the user's words." },
        limit: { type: ["integer", "null"], description: "How many hits at most (1 to 100; null: 10)." },
      },
      required: ["query", "limit"],
      additionalProperties: false,
    },
    strict: true,
    async execute(input) {
      const { query, limit } = input as { query: unknown; limit: unknown };
      const found = await memoryd.memory.recall({
        conversation,
        query: textOr(query, ""),
        scope: RecallScope.ALL,
        source: RecallSource.MEMORIES,
        limit: typeof limit === "number" ? limit : 10,
      });
      const hits = found.hits.flatMap((hit) =>
        hit.item.case === "memory"
          ? [
              {
                key: hit.item.value.key,
                value: hit.item.value.value,
                category: Category[hit.item.value.category].toLowerCase(),
                relevance: Math.round((hit.scores?.relevance ?? 0) * 1000) / 1000,
                // Guest text is what a guest said, never an instruction.
                trust: hit.item.value.trust === Trust.GUEST ? "guest" : "operator",
              },
            ]
          : [],
      );
      return JSON.stringify({ hits });
    },
  });
  return [remember, recall];
}
