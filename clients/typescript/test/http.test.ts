/** HTTP/JSON ([memoryd.http] listen): the same client over connect-web's Connect transport (what
 * a browser uses; Node 20 has fetch), JSON on the wire: calls answer as over gRPC, refusals keep
 * their code and memoryd's details. */

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { createConnectTransport } from "@connectrpc/connect-web";

import { Code, ConnectError, Memoryd, RecallScope, Category, errorDetails, user } from "../src/index.js";
import { startServer, unique, type Server } from "./server.js";

let server: Server;
let memoryd: Memoryd;

before(async () => {
  server = await startServer({ http: true });
  assert.ok(server.http, "the server reports its HTTP address");
  memoryd = new Memoryd(createConnectTransport({ baseUrl: `http://${server.http}`, useBinaryFormat: false }));
});

after(async () => {
  await server.stop();
});

test("append, list, store and recall over HTTP/JSON", async () => {
  const chat = memoryd.conversation({ ownerId: unique("web"), channel: "browser", chatId: unique("chat") });
  const text = "Meet me in 東京 at 🍣 time";
  await chat.append(user("ada", text));
  const listed = await chat.list();
  assert.deepEqual(
    listed.messages.map((message) => message.content),
    [text],
  );
  await chat.store({ category: Category.PREFERENCE, key: "drink", value: "Green tea" });
  const known = await chat.recall("tea", RecallScope.OWNER);
  assert.deepEqual(
    known.hits.map((hit) => (hit.item.case === "memory" ? hit.item.value.value : "")),
    ["Green tea"],
  );
});

test("a refusal keeps its code, message and details over HTTP/JSON", async () => {
  const chat = memoryd.conversation({ channel: "", chatId: "x" });
  await assert.rejects(chat.append(user("ada", "hi")), (error: unknown) => {
    const refused = ConnectError.from(error);
    assert.equal(refused.code, Code.InvalidArgument);
    assert.equal(refused.rawMessage, "conversation.channel is required");
    assert.deepEqual(errorDetails(error)?.field, "conversation.channel");
    return true;
  });
});
