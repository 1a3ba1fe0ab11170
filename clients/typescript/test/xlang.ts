/**
 * The TypeScript side of the cross-language test (tests/test_clients.py):
 *
 *     node dist/test/xlang.js append ADDRESS OWNER CHAT TEXT   stores TEXT, prints its id
 *     node dist/test/xlang.js recall ADDRESS OWNER CHAT QUERY  prints the matching messages as JSON
 */

import { RecallSource, connect, user } from "../src/index.js";

const [action, address, owner, chatId, text] = process.argv.slice(2);
const memoryd = connect(address);
const chat = memoryd.conversation({ ownerId: owner, channel: "xlang", chatId });
if (action === "append") {
  const appended = await chat.append(user(owner, text));
  console.log(String(appended.results[0].id));
} else if (action === "recall") {
  const recalled = await memoryd.memory.recall({
    conversation: chat.key,
    query: text,
    source: RecallSource.HISTORY,
  });
  console.log(
    JSON.stringify(recalled.hits.map((hit) => (hit.item.case === "message" ? hit.item.value.message?.content : null))),
  );
} else {
  console.error("usage: xlang append|recall ADDRESS OWNER CHAT TEXT");
  process.exit(2);
}
