/**
 * The TypeScript client of memoryd, the long-term memory of conversational agents.
 *
 * The generated service descriptors (src/gen, protoc-gen-es v2) are served over connect-node's
 * gRPC transport. Around them, what every adapter needs: `createTransport()` with a bearer
 * token, a default deadline, TLS (a custom CA, and a client certificate for mutual TLS) and
 * retries of the calls the contract marks idempotent; `new Memoryd(transport)` (a client of
 * each memoryd.v2 service: `conversations`, `memory`, `context`, `resources`, `reviews`,
 * `overview`, `admin`), or `connect(baseUrl, options)` for both at once; a
 * `ConversationClient` helper; and a
 * `Transcript` stream that resumes after a reconnect and replays what was not acknowledged.
 * Errors are connect's `ConnectError`: `code` is the gRPC status, `rawMessage` the server's
 * message, and `errorDetails(error)` the reason and the field at fault.
 *
 *     const memoryd = connect("http://127.0.0.1:50051");
 *     const chat = memoryd.conversation({ channel: "telegram", chatId: "42" });
 *     await chat.append(user("ada", "I'm vegetarian"));
 */

import type { DescMethod, MessageInitShape } from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { MethodOptions_IdempotencyLevel as Idempotency } from "@bufbuild/protobuf/wkt";
import {
  Code,
  ConnectError,
  createClient,
  type Client,
  type Interceptor,
  type Transport,
} from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

import { AdminService } from "./gen/memoryd/v2/admin_service_pb.js";
import { ContextService } from "./gen/memoryd/v2/context_service_pb.js";
import {
  ConversationService,
  type CommitTurnResponse,
  type NewMessageSchema,
} from "./gen/memoryd/v2/conversation_service_pb.js";
import { MemoryService, RecallScope } from "./gen/memoryd/v2/memory_service_pb.js";
import { OverviewService } from "./gen/memoryd/v2/overview_service_pb.js";
import { Role, type ConversationSchema } from "./gen/memoryd/v2/records_pb.js";
import { ResourceService } from "./gen/memoryd/v2/resource_service_pb.js";
import { ReviewService } from "./gen/memoryd/v2/review_service_pb.js";

export * from "./gen/memoryd/v2/admin_service_pb.js";
export * from "./gen/memoryd/v2/context_service_pb.js";
export * from "./gen/memoryd/v2/conversation_service_pb.js";
export * from "./gen/memoryd/v2/memory_service_pb.js";
export * from "./gen/memoryd/v2/overview_service_pb.js";
export * from "./gen/memoryd/v2/records_pb.js";
export * from "./gen/memoryd/v2/resource_service_pb.js";
export * from "./gen/memoryd/v2/review_service_pb.js";
export { Code, ConnectError } from "@connectrpc/connect";
export { Transcript, type TranscriptOpenInit } from "./transcript.js";

import { Transcript, type TranscriptOpenInit } from "./transcript.js";

/** The deadline of a call that sets none. */
export const DEFAULT_TIMEOUT_MS = 30_000;
/** Attempts of an idempotent call (or a keyed append) that fails with UNAVAILABLE or CANCELLED. */
export const RETRY_ATTEMPTS = 4;

export interface Options {
  /** Sent as `authorization: Bearer <token>` with every call. */
  token?: string;
  /** The deadline of calls that set none (default 30 s; streams have none). */
  timeoutMs?: number;
  /** With an https:// base URL: the CA that signed the server's certificate (PEM; default:
   * the system's), and for mutual TLS the client's certificate chain and key (PEM). */
  tls?: { ca?: string | Buffer; cert?: string | Buffer; key?: string | Buffer };
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

/** Whether the contract marks a method idempotent (then it is retried on UNAVAILABLE or CANCELLED). */
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

/** The services whose AppendMessages is read by isKeyedAppend: memoryd.v2's, and memoryd.v1's
 * (still served). */
const APPEND_SERVICES = new Set(["memoryd.v2.ConversationService", "memoryd.v1.MemoryService"]);

/** Whether a call is an AppendMessages that is safe to send again: every message carries a
 * client_message_id, so the server stores each once (and answers APPEND_OUTCOME_DUPLICATE). */
export function isKeyedAppend(method: DescMethod, message: unknown): boolean {
  if (method.name !== "AppendMessages" || !APPEND_SERVICES.has(method.parent.typeName)) {
    return false;
  }
  const messages = (message as { messages?: { clientMessageId?: string }[] }).messages ?? [];
  return messages.length > 0 && messages.every((m) => Boolean(m.clientMessageId));
}

/** Idempotent calls and keyed appends are tried again on UNAVAILABLE, and on a CANCELLED the
 * caller did not ask for (a server that stops cancels the calls it had not started yet:
 * grpc/grpc#41785), up to RETRY_ATTEMPTS, with a growing delay; other writes never are (send
 * them again with a client_message_id, and they are skipped). */
const retryIdempotent: Interceptor = (next) => async (request) => {
  if (
    request.stream ||
    !(isIdempotent(request.method) || isKeyedAppend(request.method, request.message))
  ) {
    return next(request);
  }
  for (let attempt = 1; ; attempt++) {
    try {
      return await next(request);
    } catch (error) {
      const failure = ConnectError.from(error);
      const retryable = failure.code === Code.Unavailable || failure.code === Code.Canceled;
      if (!retryable || attempt >= RETRY_ATTEMPTS || request.signal.aborted) {
        throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(100 * 2 ** (attempt - 1), 1000)));
    }
  }
};

/** A gRPC transport to memoryd at `baseUrl` ("http://host:port", or "https://host:port" for
 * TLS; a bare "host:port" is plain text) with memoryd's defaults: the bearer token, the default
 * deadline, TLS options, and retries of idempotent calls. */
export function createTransport(baseUrl: string, options: Options = {}): Transport {
  const interceptors = [retryIdempotent];
  if (options.token) {
    interceptors.push(bearer(options.token));
  }
  const url = baseUrl.includes("://") ? baseUrl : `http://${baseUrl}`;
  if (options.tls && !url.startsWith("https://")) {
    throw new ConnectError("tls options need an https:// base URL", Code.InvalidArgument);
  }
  return createGrpcTransport({
    baseUrl: url,
    defaultTimeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    interceptors: [...interceptors, ...(options.interceptors ?? [])],
    nodeOptions: options.tls,
  });
}

/** memoryd's services (memoryd.v2) over one transport, each named after what it holds. */
export class Memoryd {
  /** What was said: append, list, search, clear, purge. */
  readonly conversations: Client<typeof ConversationService>;
  /** What is known: store, recall, update, archive, jobs. */
  readonly memory: Client<typeof MemoryService>;
  /** What the next model call gets: compose, compact, the prompt files. */
  readonly context: Client<typeof ContextService>;
  /** The prompt files' revisions. */
  readonly resources: Client<typeof ResourceService>;
  /** The background reviewer. */
  readonly reviews: Client<typeof ReviewService>;
  /** Owners and activity. */
  readonly overview: Client<typeof OverviewService>;
  /** The operator's calls (a token with role admin). */
  readonly admin: Client<typeof AdminService>;

  constructor(transport: Transport) {
    this.conversations = createClient(ConversationService, transport);
    this.memory = createClient(MemoryService, transport);
    this.context = createClient(ContextService, transport);
    this.resources = createClient(ResourceService, transport);
    this.reviews = createClient(ReviewService, transport);
    this.overview = createClient(OverviewService, transport);
    this.admin = createClient(AdminService, transport);
  }

  /** One conversation's calls, with its key filled in. */
  conversation(key: ConversationKey): ConversationClient {
    return new ConversationClient(this, key);
  }

  /** Open (or resume) a realtime transcript session. */
  openTranscript(open: TranscriptOpenInit): Promise<Transcript> {
    return Transcript.open(this.conversations, open);
  }
}

/** memoryd at `baseUrl` (see createTransport), with `options`. */
export function connect(baseUrl: string, options: Options = {}): Memoryd {
  return new Memoryd(createTransport(baseUrl, options));
}

/** What a refusal says to a program: the google.rpc.ErrorInfo memoryd attaches to every error
 * status, its reason ("VALUE_TOO_LONG"; the list is in docs/api.md) and the request field at
 * fault ("" when none). Undefined for an error without one (a deadline, an unreachable server). */
export function errorDetails(error: unknown): ErrorDetails | undefined {
  for (const detail of ConnectError.from(error).details) {
    if ("type" in detail && detail.type === "google.rpc.ErrorInfo") {
      return readErrorInfo(detail.value);
    }
  }
  return undefined;
}

export interface ErrorDetails {
  reason: string;
  field: string;
  metadata: Record<string, string>;
}

/** ErrorInfo's wire form: reason = 1, domain = 2, map<string, string> metadata = 3. Read by
 * hand so that the package needs no generated google.rpc types. */
function readErrorInfo(bytes: Uint8Array): ErrorDetails {
  const reader = new BinaryReader(bytes);
  const found: ErrorDetails = { reason: "", field: "", metadata: {} };
  while (reader.pos < reader.len) {
    const [number, wireType] = reader.tag();
    if (number === 1 && wireType === WireType.LengthDelimited) {
      found.reason = reader.string();
    } else if (number === 3 && wireType === WireType.LengthDelimited) {
      const entry = new BinaryReader(reader.bytes());
      let key = "";
      let value = "";
      while (entry.pos < entry.len) {
        const [entryNumber, entryType] = entry.tag();
        if (entryNumber === 1) key = entry.string();
        else if (entryNumber === 2) value = entry.string();
        else entry.skip(entryType);
      }
      found.metadata[key] = value;
    } else {
      reader.skip(wireType);
    }
  }
  found.field = found.metadata.field ?? "";
  return found;
}

/** One conversation's calls (the same helper as the Python and Go clients' ConversationClient). */
export class ConversationClient {
  constructor(
    private readonly client: Memoryd,
    readonly key: ConversationKey,
  ) {}

  /** Store messages (all valid ones, or none). */
  append(...messages: NewMessageInit[]) {
    return this.client.conversations.appendMessages({ conversation: this.key, messages });
  }

  /** Store one turn's messages and mark the conversation for review. */
  commitTurn(...messages: NewMessageInit[]): Promise<CommitTurnResponse> {
    return this.client.conversations.commitTurn({ conversation: this.key, messages });
  }

  /** The newest page of the current window, oldest first. */
  list(pageSize = 50) {
    return this.client.conversations.listMessages({ conversation: this.key, pageSize });
  }

  /** Messages of this conversation matching `query` (plain words, never syntax). */
  search(query: string) {
    return this.client.conversations.searchHistory({
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
    return this.client.context.composeContext({
      conversation: this.key,
      contextWindow: BigInt(contextWindow),
    });
  }

  /** The owner's USER.md and MEMORY.md. */
  promptContext() {
    return this.client.context.getPromptContext({
      agentId: this.key.agentId ?? "",
      ownerId: this.key.ownerId ?? "",
    });
  }
}
