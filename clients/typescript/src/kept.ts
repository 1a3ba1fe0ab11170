/**
 * What the session integrations share with the Python client's (`memoryd_client.integrations._kept`):
 * a framework's object kept in a memoryd message (its longest text the content, the rest in the
 * metadata under the integration's member, with where the text was), and the window read page
 * by page.
 */

import type { Message } from "./gen/memoryd/v2/records_pb.js";
import type { ConversationKey, Memoryd } from "./index.js";

/** The most messages memoryd takes in one AppendMessages and returns in one ListMessages page. */
export const APPEND_BATCH = 100;
export const PAGE_SIZE = 1000;
/** Where an object's text may be: the members the frameworks put text in. */
const TEXT_MEMBERS = new Set(["content", "text", "output", "arguments", "refusal"]);

type Path = (string | number)[];
type JsonObject = Record<string, unknown>;

/** The object's text (its longest non-blank text member) and what is kept of it: the object
 * without that text, and where it was. An object with no text is named by its type or role, so
 * that no message is blank. */
export function splitText(item: JsonObject): [string, JsonObject] {
  let found: [string, Path] | undefined;
  for (const [text, path] of textMembers(item, [])) {
    if (text.trim() && (found === undefined || text.length > found[0].length)) found = [text, path];
  }
  if (found === undefined) {
    return [`[${textOr(item.type, textOr(item.role, "item"))}]`, { item }];
  }
  const shape = structuredClone(item);
  setAt(shape, found[1], null);
  return [found[0], { item: shape, text_at: found[1] }];
}

/** A message's metadata holding the shape under `member`. */
export function keptMetadata(member: string, shape: JsonObject): string {
  return JSON.stringify({ [member]: shape });
}

/** The object a message keeps under `member`, its text put back; undefined when it keeps none
 * (a message another adapter or memoryd wrote). */
export function keptItem(message: Message, member: string): JsonObject | undefined {
  if (!message.metadata) return undefined;
  let kept: unknown;
  try {
    kept = (JSON.parse(message.metadata) as JsonObject)[member];
  } catch {
    return undefined;
  }
  if (!isObject(kept) || !isObject(kept.item)) return undefined;
  const item = kept.item;
  if (Array.isArray(kept.text_at) && !setAt(item, kept.text_at as Path, message.content)) {
    return undefined; // a path that leads nowhere: not a shape an integration wrote
  }
  return item;
}

/** The conversation's window, oldest first; with a limit, its newest `limit` messages. */
export async function readWindow(
  memoryd: Memoryd,
  conversation: ConversationKey,
  limit?: number,
): Promise<Message[]> {
  if (limit !== undefined && limit <= 0) return [];
  const pages: Message[][] = [];
  let wanted = limit;
  let pageToken = "";
  for (;;) {
    const page = await memoryd.conversations.listMessages({
      conversation,
      pageSize: Math.min(wanted ?? PAGE_SIZE, PAGE_SIZE),
      pageToken,
    });
    pages.push(page.messages);
    pageToken = page.nextPageToken;
    if (wanted !== undefined) wanted -= page.messages.length;
    if (!pageToken || (wanted !== undefined && wanted <= 0)) break;
  }
  // Pages come newest first, each oldest first.
  const messages = pages.reverse().flat();
  return limit === undefined ? messages : messages.slice(-limit);
}

/** A member's text, or `fallback` when it is no non-empty string. */
export function textOr(value: unknown, fallback: string): string {
  return typeof value === "string" && value ? value : fallback;
}

/** Messages in AppendMessages' batches. */
export function batches<T>(messages: T[]): T[][] {
  const found: T[][] = [];
  for (let i = 0; i < messages.length; i += APPEND_BATCH) found.push(messages.slice(i, i + APPEND_BATCH));
  return found;
}

function textMembers(value: unknown, path: Path): [string, Path][] {
  const found: [string, Path][] = [];
  if (Array.isArray(value)) {
    value.forEach((member, index) => found.push(...textMembers(member, [...path, index])));
  } else if (isObject(value)) {
    for (const [key, member] of Object.entries(value)) {
      if (typeof member === "string" && TEXT_MEMBERS.has(key)) found.push([member, [...path, key]]);
      else found.push(...textMembers(member, [...path, key]));
    }
  }
  return found;
}

/** Set the member at `path`; false when the path leads to no member of an object or array. */
function setAt(item: unknown, path: Path, value: unknown): boolean {
  let target: unknown = item;
  for (const step of path.slice(0, -1)) {
    if (typeof target !== "object" || target === null) return false;
    target = (target as Record<string | number, unknown>)[step];
  }
  const last = path[path.length - 1];
  const member = Array.isArray(target)
    ? typeof last === "number" && Number.isInteger(last) && last >= 0 && last < target.length
    : isObject(target) && typeof last === "string";
  if (!member || last === undefined) return false;
  (target as Record<string | number, unknown>)[last] = value;
  return true;
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
