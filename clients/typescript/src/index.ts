/**
 * The TypeScript client of memoryd, the long-term memory of conversational agents.
 *
 * The generated service descriptors (src/gen, protoc-gen-es v2) are served over connect-node's
 * gRPC transport. Around them, what every adapter needs: `connect()` with a bearer token and a
 * default deadline, retries of the calls the contract marks idempotent, a `Conversation` helper,
 * and a `Transcript` stream that resumes after a reconnect and replays what was not
 * acknowledged. Errors are connect's `ConnectError`: `code` is the gRPC status, `rawMessage` the
 * server's message.
 *
 *     const memoryd = connect("127.0.0.1:50051");
 *     const chat = memoryd.conversation({ channel: "telegram", chatId: "42" });
 *     await chat.append(user("ada", "I'm vegetarian"));
 */

import type { DescMethod, MessageInitShape } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel as Idempotency } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

import { CompactionService } from "./gen/memoryd/v1/compaction_service_pb.js";
import {
  MemoryService,
  RecallScope,
  type CommitTurnResponse,
  type NewMessageSchema,
} from "./gen/memoryd/v1/memory_service_pb.js";
import { Role, type ConversationSchema } from "./gen/memoryd/v1/records_pb.js";

export * from "./gen/memoryd/v1/compaction_service_pb.js";
export * from "./gen/memoryd/v1/memory_service_pb.js";
export * from "./gen/memoryd/v1/records_pb.js";
export { Code, ConnectError } from "@connectrpc/connect";
export { Transcript, type TranscriptOpenInit } from "./transcript.js";

import { Transcript, type TranscriptOpenInit } from "./transcript.js";

/** The deadline of a call that sets none. */
export const DEFAULT_TIMEOUT_MS = 30_000;
/** Attempts of an idempotent call that fails with UNAVAILABLE. */
export const RETRY_ATTEMPTS = 4;

export interface Options {
  /** Sent as `authorization: Bearer <token>` with every call. */
  token?: string;
  /** The deadline of calls that set none (default 30 s; streams have none). */
  timeoutMs?: number;
  /** "https" for TLS (default "http", plain text: loopback, tests). */
  scheme?: "http" | "https";
  /** More interceptors, run after memoryd's own. */
  interceptors?: Interceptor[];
}

export type ConversationKey = MessageInitShape<typeof ConversationSchema>;
export type NewMessageInit = MessageInitShape<typeof NewMessageSchema>;

/** A user message from `sender`. */
export function user(sender: string, content: string): NewMessageInit {
  return { role: Role.USER, sender, content };
}

/** An assistant message from `sender`. */
export function assistant(sender: string, content: string): NewMessageInit {
  return { role: Role.ASSISTANT, sender, content };
}

/** Whether the contract marks a method idempotent (then it is retried on UNAVAILABLE). */
export function isIdempotent(method: DescMethod): boolean {
  return (
    method.methodKind === "unary" &&
    (method.idempotency === Idempotency.NO_SIDE_EFFECTS ||
      method.idempotency === Idempotency.IDEMPOTENT)
  );
}

function bearer(token: string): Interceptor {
  return (next) => async (request) => {
    request.header.set("authorization", `Bearer ${token}`);
    return next(request);
  };
}

/** Idempotent calls are tried again on UNAVAILABLE, up to RETRY_ATTEMPTS, with a growing
 * delay; writes never are (send them again with a client_message_id, and they are skipped). */
const retryIdempotent: Interceptor = (next) => async (request) => {
  if (request.stream || !isIdempotent(request.method)) {
    return next(request);
  }
  for (let attempt = 1; ; attempt++) {
    try {
      return await next(request);
    } catch (error) {
      const failure = ConnectError.from(error);
      if (failure.code !== Code.Unavailable || attempt >= RETRY_ATTEMPTS || request.signal.aborted) {
        throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** (attempt - 1)));
    }
  }
};

/** memoryd's two services over one connection. */
export class Memoryd {
  readonly memory: Client<typeof MemoryService>;
  readonly compaction: Client<typeof CompactionService>;

  constructor(address: string, options: Options = {}) {
    const interceptors = [retryIdempotent];
    if (options.token) {
      interceptors.push(bearer(options.token));
    }
    const transport = createGrpcTransport({
      baseUrl: `${options.scheme ?? "http"}://${address}`,
      defaultTimeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      interceptors: [...interceptors, ...(options.interceptors ?? [])],
    });
    this.memory = createClient(MemoryService, transport);
    this.compaction = createClient(CompactionService, transport);
  }

  /** One conversation's calls, with its key filled in. */
  conversation(key: ConversationKey): Conversation {
    return new Conversation(this, key);
  }

  /** Open (or resume) a realtime transcript session. */
  openTranscript(open: TranscriptOpenInit): Promise<Transcript> {
    return Transcript.open(this.memory, open);
  }
}

/** Connect to memoryd at `address` ("host:port"). */
export function connect(address: string, options: Options = {}): Memoryd {
  return new Memoryd(address, options);
}

/** One conversation's calls. */
export class Conversation {
  constructor(
    private readonly client: Memoryd,
    readonly key: ConversationKey,
  ) {}

  /** Store messages (all valid ones, or none). */
  append(...messages: NewMessageInit[]) {
    return this.client.memory.appendMessages({ conversation: this.key, messages });
  }

  /** Store one turn's messages and mark the conversation for review. */
  commitTurn(...messages: NewMessageInit[]): Promise<CommitTurnResponse> {
    return this.client.memory.commitTurn({ conversation: this.key, messages });
  }

  /** The newest page of the current window, oldest first. */
  list(pageSize = 50) {
    return this.client.memory.listMessages({ conversation: this.key, pageSize });
  }

  /** Messages of this conversation matching `query` (plain words, never syntax). */
  search(query: string) {
    return this.client.memory.searchHistory({
      query,
      scope: { case: "conversation", value: this.key },
    });
  }

  /** Keep a fact learnt in this conversation. */
  store(init: { category: number; key?: string; value: string }) {
    return this.client.memory.storeMemory({
      caller: { case: "conversation", value: this.key },
      ...init,
    });
  }

  /** What is known that matches `query`. */
  recall(query: string, scope: RecallScope = RecallScope.CURRENT) {
    return this.client.memory.recall({ conversation: this.key, query, scope });
  }

  /** The context of the next model call, for a model of `contextWindow` tokens. */
  compose(contextWindow: bigint | number) {
    return this.client.compaction.composeContext({
      conversation: this.key,
      contextWindow: BigInt(contextWindow),
    });
  }

  /** The owner's USER.md and MEMORY.md. */
  promptContext() {
    return this.client.memory.getPromptContext({
      agentId: this.key.agentId ?? "",
      ownerId: this.key.ownerId ?? "",
    });
  }
}
