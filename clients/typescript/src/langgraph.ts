/**
 * LangGraph.js's long-term store, kept by memoryd (`@memoryd/client/langgraph`): the same
 * mapping as the Python client's `memoryd_client.integrations.langgraph`, so the two read each
 * other's items.
 *
 *     import { connect } from "@memoryd/client";
 *     import { MemorydStore } from "@memoryd/client/langgraph";
 *
 *     const graph = builder.compile({ store: new MemorydStore(connect(url)) });
 *     // in a node: await config.store.put(["ada", "memories"], "diet", { text: "Is vegetarian" })
 *
 * A namespace names its owner (the label at `ownerAt`, the first by default), so one user's
 * items are that owner's memory rows of the store's agent, and a get, a search or a listing
 * reaches only the owner its namespace names; a namespace without one is refused
 * (InvalidNamespaceError). Each item is a row of the owner's scope, of category fact (in no
 * prompt file): its key is `lg:` and the JSON of the namespace's other labels and the item's key
 * (256 characters in all), its value the item's text (the `index` fields, else its longest text,
 * whitespace folded, 200 characters: what memoryd searches by words and meaning), its metadata
 * the whole item. A query is memoryd's Recall: only items that match come back, best first,
 * `score` their relevance, the first 100 at most, searched by the message's last 32 distinct
 * words; `index: false` items are never found by a query. Without a query, items come most
 * recently updated first; filters compare as `matches` says. A refusal of memoryd is
 * connect's ConnectError. TTLs are not supported: memoryd forgets only when asked.
 */

import { Code, ConnectError } from "@connectrpc/connect";
import {
  BaseStore,
  InvalidNamespaceError,
  type GetOperation,
  type Item,
  type ListNamespacesOperation,
  type MatchCondition,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
} from "@langchain/langgraph-checkpoint";

import { searchQuery } from "./ai-sdk.js";
import { RecallScope, RecallSource } from "./gen/memoryd/v2/memory_service_pb.js";
import { Category, ScopeType, type Memory, type Trust } from "./gen/memoryd/v2/records_pb.js";
import type { Memoryd } from "./index.js";

/** The start of every item's row key, and the metadata member that holds the item. */
export const KEY_PREFIX = "lg:";
export const METADATA_KEY = "langgraph";
const MAX_VALUE_CHARS = 200;
const MAX_RECALL = 100;
const PAGE_SIZE = 1000;
const OWNERS_PAGE_SIZE = 500;

export interface MemorydStoreOptions {
  /** The agent whose owners the namespaces name (default "main"). */
  agentId?: string;
  /** The position of the owner in every namespace (default 0). */
  ownerAt?: number;
  /** The fields whose text memoryd searches (default: the item's longest text). */
  index?: string[];
  /** The trust of the writes (unset: the operator). */
  trust?: Trust;
}

interface Kept {
  namespace: string[];
  key: string;
  value: Record<string, unknown>;
  index?: false;
}

/** A LangGraph.js BaseStore over memoryd's memory rows: namespaces name owners. */
export class MemorydStore extends BaseStore {
  readonly agentId: string;
  readonly ownerAt: number;

  constructor(
    private readonly memoryd: Memoryd,
    private readonly options: MemorydStoreOptions = {},
  ) {
    super();
    this.agentId = options.agentId ?? "main";
    this.ownerAt = options.ownerAt ?? 0;
  }

  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = [];
    for (const operation of operations) {
      if ("namespacePrefix" in operation) results.push(await this.searchItems(operation));
      else if ("value" in operation) results.push(await this.putItem(operation));
      else if ("matchConditions" in operation || "maxDepth" in operation || "limit" in operation) {
        results.push(await this.namespaces(operation));
      } else results.push(await this.getItem(operation));
    }
    return results as OperationResults<Op>;
  }

  private async getItem(operation: GetOperation): Promise<Item | null> {
    const [owner, key] = this.rowKey(operation.namespace, operation.key);
    try {
      const answer = await this.memoryd.memory.getMemory({
        caller: { case: "owner", value: owner },
        scopeType: ScopeType.OWNER,
        key,
        trust: this.options.trust,
      });
      const found = itemOf(answer.memory);
      if (!found) return null;
      return {
        namespace: found.namespace,
        key: found.key,
        value: found.value,
        createdAt: found.createdAt,
        updatedAt: found.updatedAt,
      };
    } catch (error) {
      if (ConnectError.from(error).code === Code.NotFound) return null;
      throw error;
    }
  }

  private async putItem(operation: PutOperation): Promise<void> {
    const [owner, key] = this.rowKey(operation.namespace, operation.key);
    if (operation.value === null) {
      await this.memoryd.memory.deleteMemory({
        caller: { case: "owner", value: owner },
        scopeType: ScopeType.OWNER,
        key,
        trust: this.options.trust,
      });
      return;
    }
    const index = operation.index === undefined ? this.options.index : operation.index;
    const kept: Kept = { namespace: operation.namespace, key: operation.key, value: operation.value };
    if (index === false) kept.index = false;
    await this.memoryd.memory.storeMemory({
      caller: { case: "owner", value: owner },
      scopeType: ScopeType.OWNER,
      category: Category.FACT,
      key,
      value: searchedText(operation.value, index || undefined) || operation.key,
      metadata: JSON.stringify({ [METADATA_KEY]: kept }),
      trust: this.options.trust,
    });
  }

  private async searchItems(operation: SearchOperation): Promise<SearchItem[]> {
    const owner = this.ownerOf(operation.namespacePrefix);
    const prefix = this.keyPrefix(operation.namespacePrefix);
    const limit = operation.limit ?? 10;
    const offset = operation.offset ?? 0;
    if (limit <= 0 || offset < 0) return [];
    const found: SearchItem[] = [];
    if (operation.query) {
      const answer = await this.memoryd.memory.recall({
        owner,
        query: searchQuery(operation.query),
        scope: RecallScope.OWNER,
        source: RecallSource.MEMORIES,
        limit: Math.min(MAX_RECALL, offset + limit),
        trust: this.options.trust,
      });
      for (const hit of answer.hits) {
        if (hit.item.case !== "memory") continue;
        const row = hit.item.value;
        const item = itemOf(row, hit.scores?.relevance);
        if (item && row.key.startsWith(prefix) && keptOf(row)?.index !== false && matches(item.value, operation.filter)) {
          found.push(item);
        }
      }
    } else {
      let pageToken = "";
      do {
        const page = await this.memoryd.memory.listMemories({
          caller: { case: "owner", value: owner },
          scopeType: ScopeType.OWNER,
          categories: [Category.FACT],
          keyPrefix: prefix,
          pageSize: PAGE_SIZE,
          pageToken,
          trust: this.options.trust,
        });
        for (const listed of page.memories) {
          const item = listed.memory && itemOf(listed.memory);
          if (item && matches(item.value, operation.filter)) found.push(item);
        }
        pageToken = page.nextPageToken;
      } while (pageToken && found.length < offset + limit);
    }
    return found.slice(offset, offset + limit);
  }

  private async namespaces(operation: ListNamespacesOperation): Promise<string[][]> {
    const conditions = operation.matchConditions ?? [];
    let owners = this.ownersNamed(conditions);
    if (!owners) {
      owners = [];
      let pageToken = "";
      do {
        const page = await this.memoryd.overview.listOwners({
          agentId: this.agentId,
          pageSize: OWNERS_PAGE_SIZE,
          pageToken,
        });
        owners.push(...page.owners.map((summary) => summary.ownerId));
        pageToken = page.nextPageToken;
      } while (pageToken);
    }
    const seen = new Map<string, string[]>();
    for (const ownerId of owners) {
      let pageToken = "";
      do {
        const page = await this.memoryd.memory.listMemories({
          caller: { case: "owner", value: { agentId: this.agentId, ownerId } },
          scopeType: ScopeType.OWNER,
          categories: [Category.FACT],
          keyPrefix: KEY_PREFIX,
          pageSize: PAGE_SIZE,
          pageToken,
          trust: this.options.trust,
        });
        for (const listed of page.memories) {
          const kept = listed.memory && keptOf(listed.memory);
          if (kept) seen.set(JSON.stringify(kept.namespace), kept.namespace);
        }
        pageToken = page.nextPageToken;
      } while (pageToken);
    }
    let chosen = [...seen.values()].filter((namespace) =>
      conditions.every((condition) => doesMatch(condition, namespace)),
    );
    if (operation.maxDepth !== undefined) {
      const cut = new Map(chosen.map((namespace) => {
        const short = namespace.slice(0, operation.maxDepth);
        return [JSON.stringify(short), short] as const;
      }));
      chosen = [...cut.values()];
    }
    chosen.sort(compareNamespaces);
    return chosen.slice(operation.offset, operation.offset + operation.limit);
  }

  private ownerOf(namespace: string[]): { agentId: string; ownerId: string } {
    const ownerId = namespace[this.ownerAt];
    if (ownerId === undefined || !ownerId.trim()) {
      throw new InvalidNamespaceError(
        `namespace ${JSON.stringify(namespace)} names no owner: memoryd keeps each owner's items ` +
          `apart, and this store reads the owner at position ${this.ownerAt}`,
      );
    }
    return { agentId: this.agentId, ownerId };
  }

  private labels(namespace: string[]): string[] {
    return namespace.filter((_, position) => position !== this.ownerAt);
  }

  private rowKey(namespace: string[], key: string): [{ agentId: string; ownerId: string }, string] {
    return [this.ownerOf(namespace), KEY_PREFIX + JSON.stringify([...this.labels(namespace), key])];
  }

  private keyPrefix(namespacePrefix: string[]): string {
    const labels = this.labels(namespacePrefix);
    return KEY_PREFIX + (labels.length ? `${JSON.stringify(labels).slice(0, -1)},` : "[");
  }

  private ownersNamed(conditions: MatchCondition[]): string[] | undefined {
    for (const condition of conditions) {
      const owner = condition.path[this.ownerAt];
      if (condition.matchType === "prefix" && owner !== undefined && owner !== "*") return [owner];
    }
    return undefined;
  }
}

/** The text memoryd searches an item by: its `fields` (dotted paths), or its longest text;
 * whitespace folded, at most 200 characters. */
export function searchedText(value: Record<string, unknown>, fields?: string[]): string {
  const texts = fields
    ? fields.flatMap((field) => textsOf(at(value, field.split("."))))
    : textsOf(value).sort((a, b) => b.length - a.length).slice(0, 1);
  return texts.join(" ").split(/\s+/u).filter(Boolean).join(" ").slice(0, MAX_VALUE_CHARS).trim();
}

/** Whether an item's value passes a filter: LangGraph.js's operators ($eq, $ne, $gt, $gte, $lt,
 * $lte, $in, $nin), and objects and arrays compared by their contents, as its PostgreSQL store
 * and the Python stores compare them (its InMemoryStore compares them by identity). */
export function matches(value: Record<string, unknown>, filter?: Record<string, unknown>): boolean {
  return !filter || Object.entries(filter).every(([key, want]) => compare(value[key], want));
}

function compare(value: unknown, want: unknown): boolean {
  if (want !== null && typeof want === "object" && !Array.isArray(want)) {
    const entries = Object.entries(want);
    if (entries.some(([key]) => key.startsWith("$"))) {
      return entries.every(([operator, operand]) => applyOperator(value, operator, operand));
    }
    return (
      value !== null &&
      typeof value === "object" &&
      !Array.isArray(value) &&
      entries.every(([key, inner]) => compare((value as Record<string, unknown>)[key], inner))
    );
  }
  if (Array.isArray(want)) {
    return (
      Array.isArray(value) &&
      value.length === want.length &&
      want.every((inner, position) => compare(value[position], inner))
    );
  }
  return value === want;
}

function applyOperator(value: unknown, operator: string, operand: unknown): boolean {
  if (operator === "$eq") return compare(value, operand);
  if (operator === "$ne") return !compare(value, operand);
  if (operator === "$in") return Array.isArray(operand) && operand.some((one) => compare(value, one));
  if (operator === "$nin") return !Array.isArray(operand) || !operand.some((one) => compare(value, one));
  // An operator LangGraph.js does not define matches nothing, as in its own stores.
  if (!["$gt", "$gte", "$lt", "$lte"].includes(operator)) return false;
  const left = Number(value);
  const right = Number(operand);
  if (value === null || value === undefined || Number.isNaN(left) || Number.isNaN(right)) return false;
  if (operator === "$gt") return left > right;
  if (operator === "$gte") return left >= right;
  if (operator === "$lt") return left < right;
  return left <= right;
}

function doesMatch(condition: MatchCondition, namespace: string[]): boolean {
  const path = condition.path;
  if (namespace.length < path.length) return false;
  const labels = condition.matchType === "prefix" ? namespace : [...namespace].reverse();
  const wanted = condition.matchType === "prefix" ? path : [...path].reverse();
  return wanted.every((want, position) => want === "*" || want === labels[position]);
}

function compareNamespaces(a: string[], b: string[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const left = a[i] ?? "";
    const right = b[i] ?? "";
    if (left !== right) return left < right ? -1 : 1;
  }
  return a.length - b.length;
}

function keptOf(memory: Memory): Kept | undefined {
  if (!memory.key.startsWith(KEY_PREFIX)) return undefined;
  try {
    const kept = (JSON.parse(memory.metadata || "{}") as Record<string, unknown>)[METADATA_KEY];
    return kept && typeof kept === "object" ? (kept as Kept) : undefined;
  } catch {
    return undefined;
  }
}

function itemOf(memory: Memory | undefined, score?: number): SearchItem | undefined {
  const kept = memory && keptOf(memory);
  if (!memory || !kept) return undefined;
  const item: SearchItem = {
    namespace: kept.namespace,
    key: kept.key,
    value: kept.value,
    createdAt: timeOf(memory.createdAt),
    updatedAt: timeOf(memory.updatedAt),
  };
  if (score !== undefined) item.score = score;
  return item;
}

function timeOf(stamp: { seconds: bigint; nanos: number } | undefined): Date {
  return stamp ? new Date(Number(stamp.seconds) * 1000 + Math.floor(stamp.nanos / 1e6)) : new Date(0);
}

function textsOf(value: unknown): string[] {
  if (typeof value === "string") return value.trim() ? [value] : [];
  if (Array.isArray(value)) return value.flatMap(textsOf);
  if (value !== null && typeof value === "object") return Object.values(value).flatMap(textsOf);
  return [];
}

function at(value: unknown, path: string[]): unknown {
  let found = value;
  for (const step of path) {
    if (step === "*" && Array.isArray(found)) return found;
    found =
      found !== null && typeof found === "object" && !Array.isArray(found)
        ? (found as Record<string, unknown>)[step]
        : undefined;
  }
  return found;
}
