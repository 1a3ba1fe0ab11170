/**
 * LangGraph.js's store over memoryd (`@memoryd/client/langgraph`), through a compiled graph with
 * ChatOpenAI on a local chat-completions server, against a real memoryd; and every method against
 * LangGraph's own InMemoryStore.
 */

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { test } from "node:test";

import { InMemoryStore, type BaseStore } from "@langchain/langgraph-checkpoint";
import {
  MessagesAnnotation,
  START,
  StateGraph,
  type LangGraphRunnableConfig,
} from "@langchain/langgraph";
import { ChatOpenAI } from "@langchain/openai";

import { MemorydStore, searchedText } from "../src/langgraph.js";
import { serverAndModel } from "./fake-model.js";
import { unique } from "./server.js";

const rig = serverAndModel();

/** LangGraph's long-term memory pattern: a node reads what the store knows of the user, keeps
 * what the user asks it to remember, and calls the model with it. */
function memoryGraph(store: BaseStore) {
  const model = new ChatOpenAI({ model: "fake-model", apiKey: "unused", configuration: { baseURL: rig.baseURL } });
  async function callModel(state: typeof MessagesAnnotation.State, config: LangGraphRunnableConfig) {
    const namespace = [String(config.configurable?.userId), "memories"];
    const last = state.messages[state.messages.length - 1];
    const said = typeof last?.content === "string" ? last.content : "";
    const known = (await config.store?.search(namespace, { query: said, limit: 5 })) ?? [];
    const info = known.map((item) => String(item.value.data)).join("; ") || "nothing";
    if (said.toLowerCase().startsWith("remember")) {
      await config.store?.put(namespace, unique("k"), { data: said.split(":")[1]?.trim() ?? said });
    }
    const answer = await model.invoke([
      { role: "system", content: `What you know of the user: ${info}` },
      ...state.messages,
    ]);
    return { messages: [answer] };
  }
  return new StateGraph(MessagesAnnotation)
    .addNode("callModel", callModel)
    .addEdge(START, "callModel")
    .compile({ store });
}

async function embedded(): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const status = await rig.memoryd.admin.getEmbeddingStatus({});
    if (status.pendingMessages === 0n && status.pendingMemories === 0n) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.fail("embedding did not catch up");
}

test("a graph remembers a user across threads and never for another", async () => {
  const agentId = unique("lgjs");
  const graph = memoryGraph(new MemorydStore(rig.memoryd, { agentId }));
  rig.fake.reply("I'll remember.");
  await graph.invoke(
    { messages: [{ role: "user", content: "Remember: is vegetarian and cooks Sichuan dishes" }] },
    { configurable: { userId: "ada", thread_id: unique("t") } },
  );
  await embedded();
  rig.fake.reply("You are vegetarian.");
  await graph.invoke(
    { messages: [{ role: "user", content: "Am I vegetarian?" }] },
    { configurable: { userId: "ada", thread_id: unique("t") } },
  );
  assert.match(rig.fake.lastSent(), /is vegetarian and cooks Sichuan dishes/);
  rig.fake.reply("I don't know.");
  await graph.invoke(
    { messages: [{ role: "user", content: "Am I vegetarian?" }] },
    { configurable: { userId: "ben", thread_id: unique("t") } },
  );
  assert.match(rig.fake.lastSent(), /What you know of the user: nothing/);
  // The item is Ada's memory row, keyed as the Python client keys it.
  const rows = await rig.memoryd.memory.listMemories({
    caller: { case: "owner", value: { agentId, ownerId: "ada" } },
  });
  assert.equal(rows.memories.length, 1);
  assert.match(rows.memories[0]?.memory?.key ?? "", /^lg:\["memories","k-/);
  assert.equal(rows.memories[0]?.memory?.value, "is vegetarian and cooks Sichuan dishes");
});

async function fill(store: BaseStore): Promise<void> {
  await store.put(["ada", "memories"], "diet", { data: "Is vegetarian", rank: 3, tags: ["food"] });
  await store.put(["ada", "memories"], "city", { data: "Lives in Porto", rank: 7 });
  await store.put(["ada", "memories", "work"], "team", { data: "Billing team", rank: 5 });
  await store.put(["ada", "profile"], "name", { data: "Ada — 東京 🍣", nested: { lang: "pt" }, rank: 0 });
  await store.put(["ben", "memories"], "diet", { data: "Eats everything", rank: 1 });
  await store.put(["ada", "memories"], "city", { data: "Lives in Lisbon", rank: 8 });
}

function keyed(items: { namespace: string[]; key: string; value: unknown }[]): string[] {
  return items.map((item) => JSON.stringify([item.namespace, item.key, item.value])).sort();
}

test("every method answers as LangGraph's InMemoryStore", async () => {
  const ours = new MemorydStore(rig.memoryd, { agentId: unique("lgjs") });
  const theirs = new InMemoryStore();
  await fill(ours);
  await fill(theirs);
  for (const [namespace, key] of [
    [["ada", "memories"], "diet"],
    [["ada", "memories"], "city"],
    [["ada", "memories", "work"], "team"],
    [["ada", "memories"], "nothing"],
  ] as [string[], string][]) {
    const mine = await ours.get(namespace, key);
    const reference = await theirs.get(namespace, key);
    assert.deepEqual(mine && [mine.namespace, mine.key, mine.value], reference && [reference.namespace, reference.key, reference.value]);
  }
  const searches: [string[], Record<string, unknown>][] = [
    [["ada"], {}],
    [["ada", "memories"], {}],
    [["ada", "memories", "work"], {}],
    [["ada"], { filter: { rank: { $gte: 5 } } }],
    [["ada"], { filter: { rank: { $gt: 3, $lt: 8 } } }],
    [["ada"], { filter: { rank: { $in: [3, 5] } } }],
    [["ada"], { filter: { rank: { $nin: [3, 5] } } }],
    [["ada"], { filter: { rank: { $regex: "3" } } }],
    [["ada"], { filter: { data: { $ne: "Is vegetarian" } } }],
    [["ben"], {}],
    [["ada"], { limit: 2, offset: 10 }],
  ];
  for (const [prefix, options] of searches) {
    assert.deepEqual(keyed(await ours.search(prefix, options)), keyed(await theirs.search(prefix, options)), JSON.stringify([prefix, options]));
  }
  const listings: Parameters<BaseStore["listNamespaces"]>[0][] = [
    {},
    { prefix: ["ada"] },
    { prefix: ["ada", "memories"] },
    { suffix: ["memories"] },
    { prefix: ["*", "memories"] },
    { maxDepth: 2 },
    { prefix: ["ada"], maxDepth: 1 },
    { limit: 2, offset: 1 },
  ];
  for (const listing of listings) {
    assert.deepEqual(await ours.listNamespaces(listing), await theirs.listNamespaces(listing), JSON.stringify(listing));
  }
  // Objects and arrays compare by their contents (InMemoryStore compares them by identity, so
  // such a filter never matches there).
  assert.deepEqual((await ours.search(["ada"], { filter: { tags: ["food"] } })).map((i) => i.key), ["diet"]);
  assert.deepEqual((await ours.search(["ada"], { filter: { nested: { lang: "pt" } } })).map((i) => i.key), ["name"]);
  await ours.delete(["ada", "memories"], "diet");
  await theirs.delete(["ada", "memories"], "diet");
  assert.deepEqual(keyed(await ours.search(["ada"])), keyed(await theirs.search(["ada"])));
  const second = new MemorydStore(rig.memoryd, { agentId: ours.agentId, ownerAt: 1 });
  await assert.rejects(second.put(["memories"], "k", { data: "x" }), /names no owner/);
});

test("an item's searched text is its index or its longest text", () => {
  const value = { data: "short", notes: { long: "a  much\nlonger text ".repeat(3) }, n: 5 };
  assert.equal(searchedText(value), "a much longer text a much longer text a much longer text");
  assert.equal(searchedText(value, ["data"]), "short");
  assert.equal(searchedText({ data: "x".repeat(500) }), "x".repeat(200));
});

test("the Python client's store and this one read each other's items", async () => {
  const agentId = unique("lgxl");
  const ours = new MemorydStore(rig.memoryd, { agentId });
  await ours.put(["ada", "memories", "work"], "team", { data: "Billing team — 東京", rank: 5 });
  const script = [
    "import json, sys",
    "import memoryd_client as md",
    "from memoryd_client.integrations.langgraph import MemorydStore",
    `with md.connect_sync(${JSON.stringify(rig.server.address)}) as channel:`,
    `    store = MemorydStore(channel=channel, agent_id=${JSON.stringify(agentId)})`,
    "    item = store.get(('ada', 'memories', 'work'), 'team')",
    "    store.put(('ada', 'memories'), 'diet', {'data': 'Is vegetarian', 'from': 'python'})",
    "    print(json.dumps(item.value, ensure_ascii=False))",
  ].join("\n");
  const python = process.env.MEMORYD_PYTHON ?? "python3";
  const printed = execFileSync(python, ["-c", script], { encoding: "utf8" });
  assert.deepEqual(JSON.parse(printed), { data: "Billing team — 東京", rank: 5 });
  const fromPython = await ours.get(["ada", "memories"], "diet");
  assert.deepEqual(fromPython?.value, { data: "Is vegetarian", from: "python" });
  assert.deepEqual(await ours.listNamespaces({ prefix: ["ada"] }), [["ada", "memories"], ["ada", "memories", "work"]]);
});
