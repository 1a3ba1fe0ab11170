// memoryd's web console: a page of plain JavaScript over the public HTTP/JSON API (the Connect
// protocol), with the rights of the token its user signed in with. No build step, no
// dependencies. Every piece of stored text reaches the page through textContent (`h` below),
// never as markup.
"use strict";

function byName(service, ...methods) {
  return Object.fromEntries(methods.map((method) => [method, service]));
}
// Each RPC's memoryd.v2 service (memoryd.api.contract; tests/surfaces/test_console_sessions.py
// holds this table to it).
const SERVICE_OF = {
  ...byName("memoryd.v2.ConversationService", "AppendMessages", "CommitTurn", "IngestMessages", "StreamTranscript", "ListMessages", "GetMessage", "SearchHistory", "GetConversation", "ListConversations", "ClearConversation", "PurgeConversation", "PurgeMessages"),
  ...byName("memoryd.v2.MemoryService", "StoreMemory", "GetMemory", "ListMemories", "UpdateMemory", "ArchiveMemory", "RestoreMemory", "DeleteMemory", "Recall", "ListMemorySources", "SetJobStatus", "FinishJobRun"),
  ...byName("memoryd.v2.ContextService", "GetPromptContext", "ComposeContext", "Preflight", "Compact", "GetCompactionState"),
  ...byName("memoryd.v2.ResourceService", "ListResources", "ListRevisions", "GetRevision", "DiffRevisions", "RollbackResource"),
  ...byName("memoryd.v2.ReviewService", "ReviewNow", "GetReviewState", "ListReviewRuns", "GetReviewExchange"),
  ...byName("memoryd.v2.OverviewService", "ListOwners", "GetActivity"),
  ...byName("memoryd.v2.AdminService", "GetServerInfo", "UpdateReviewSettings", "GetEmbeddingStatus", "ReindexEmbeddings", "ExportData", "ImportData", "PurgeOwner"),
};
const state = { session: null };
const main = () => document.getElementById("main");

// --- the page's building blocks -----------------------------------------------------------

// An element: attributes (on* are listeners) and children (strings become text nodes).
function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "class") node.className = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Replace a node's children, leaving out the absent ones (null, undefined, false).
function fill(node, ...children) {
  node.replaceChildren(...children.flat(Infinity).filter((child) => child !== null && child !== undefined && child !== false));
}

function link(route, text) {
  return h("a", { href: "#" + route }, text);
}

function route(...parts) {
  return "/" + parts.map((part) => encodeURIComponent(part)).join("/");
}

function show(...nodes) {
  fill(main(), ...nodes);
}

function say(text) {
  const status = document.getElementById("status");
  status.textContent = text;
  clearTimeout(say.timer);
  say.timer = setTimeout(() => (status.textContent = ""), 4000);
}

function when(stamp) {
  if (!stamp) return "";
  const date = new Date(stamp);
  return isNaN(date) ? String(stamp) : date.toISOString().replace("T", " ").slice(0, 19) + " UTC";
}

function bytes(count) {
  const n = Number(count || 0);
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

function label(enumName, prefix) {
  if (!enumName) return "";
  return String(enumName).replace(prefix, "").toLowerCase().replace(/_/g, " ");
}

function table(headers, rows, caption) {
  return h(
    "table",
    {},
    caption ? h("caption", { class: "muted" }, caption) : null,
    h("thead", {}, h("tr", {}, headers.map((name) => h("th", { scope: "col" }, name)))),
    h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: headers.length }, "None.")))
  );
}

// A cell of long text: the first 2,000 characters, and a button that shows the rest.
function clipped(text) {
  const cell = h("td", { class: "text" });
  const full = String(text || "");
  if (full.length <= 2000) {
    cell.append(full);
    return cell;
  }
  const more = h("button", { type: "button" }, `Show all ${full.length.toLocaleString("en")} characters`);
  more.addEventListener("click", () => fill(cell, full));
  cell.append(full.slice(0, 2000) + "…", h("br"), more);
  return cell;
}

function cards(pairs) {
  return h(
    "dl",
    { class: "cards" },
    pairs.map(([name, value]) => h("div", {}, h("dt", {}, name), h("dd", {}, value)))
  );
}

// A confirmation with a real dialog (focus stays in it; Escape cancels).
function confirmed(question) {
  return new Promise((resolve) => {
    const dialog = h(
      "dialog",
      { "aria-labelledby": "confirm-text" },
      h("p", { id: "confirm-text" }, question),
      h(
        "form",
        { method: "dialog", class: "inline" },
        h("button", { value: "yes", class: "danger" }, "Confirm"),
        h("button", { value: "no", autofocus: true }, "Cancel")
      )
    );
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "yes");
      dialog.remove();
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

// --- the API -----------------------------------------------------------------------------

class ApiError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

async function call(method, request) {
  const response = await fetch(`/${SERVICE_OF[method]}/${method}`, {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/json", "x-memoryd-csrf": state.session.csrf },
    body: JSON.stringify(request || {}),
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    if (response.status === 401) signedOut(body.message);
    throw new ApiError(body.code || String(response.status), body.message || response.statusText);
  }
  return body;
}

function failure(error) {
  return h("p", { class: "error", role: "alert" }, `${error.code || "error"}: ${error.message}`);
}

// A section filled by an API read; its failure is shown in its place.
function section(title, read) {
  const body = h("div", {}, h("p", { class: "muted loading" }, "Loading…"));
  const node = h("section", { "aria-label": title }, h("h2", {}, title), body);
  Promise.resolve()
    .then(read)
    .then((content) => fill(body, ...[content].flat()))
    .catch((error) => fill(body, failure(error)))
    .then(rendered);
  return node;
}

// The page's every section is filled: marked for the first-view benchmark
// (bench/console_first_view.py reads the mark).
function rendered() {
  if (!main().querySelector(".loading")) performance.mark("memoryd:view-rendered");
}

// Pages of a listing: `load(token)` answers {rows, next}; Previous and Next walk the pages.
function paged(headers, load, caption) {
  const tokens = [""];
  const holder = h("div", {});
  async function render(index) {
    const page = await load(tokens[index]);
    tokens[index + 1] = page.next || null;
    fill(holder,
      table(headers, page.rows, caption),
      h(
        "div",
        { class: "pager" },
        h("button", { type: "button", disabled: index === 0, onclick: () => render(index - 1).catch(showError(holder)) }, "Previous page"),
        h("button", { type: "button", disabled: !page.next, onclick: () => render(index + 1).catch(showError(holder)) }, "Next page")
      )
    );
  }
  return render(0).then(() => holder);
}

const showError = (holder) => (error) => fill(holder, failure(error));

// --- sign-in -------------------------------------------------------------------------------

function signedOut(message) {
  state.session = null;
  document.getElementById("nav").hidden = true;
  const input = h("input", { id: "token", type: "password", autocomplete: "off", "aria-describedby": "token-hint" });
  const error = h("p", { class: "error", role: "alert" }, message || "");
  const form = h(
    "form",
    { class: "signin", "aria-labelledby": "signin-title" },
    h("h1", { id: "signin-title" }, "Sign in"),
    h("p", { class: "muted" }, "Sign in with a memoryd token: the console has that token's rights."),
    h("label", { for: "token" }, "Token"),
    input,
    h(
      "p",
      { id: "token-hint", class: "muted" },
      "A token of the server's [[memoryd.auth.tokens]] (its token, or the value of its token_env). " +
        "A server without tokens (on loopback only) takes an empty one: leave the field blank."
    ),
    h("p", {}, h("button", { type: "submit" }, "Sign in")),
    error
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const response = await fetch("/console/session", {
      method: "POST",
      credentials: "same-origin",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token: input.value }),
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      error.textContent = body.message || "sign-in failed";
      return;
    }
    input.value = "";
    signedIn(body);
  });
  show(form);
  input.focus();
}

// The session's CSRF token is kept by this tab (sessionStorage is this origin's alone, its port
// included): the server describes a session only to a request that carries it, so that the
// cookie, which a browser sends to every port of the host, is of no use on its own.
const CSRF_KEY = "memoryd-console-csrf";

function signedIn(session) {
  state.session = session;
  sessionStorage.setItem(CSRF_KEY, session.csrf);
  document.getElementById("nav").hidden = false;
  const agents = session.agents ? session.agents.join(", ") : "every agent";
  document.getElementById("who").textContent =
    `${session.fingerprint || "no tokens configured"} · ${session.role} · ${agents}` +
    (session.max_trust === "guest" ? " · guest" : "");
  render();
}

async function signOut() {
  await fetch("/console/session", {
    method: "DELETE",
    credentials: "same-origin",
    headers: { "x-memoryd-csrf": state.session ? state.session.csrf : "" },
  });
  sessionStorage.removeItem(CSRF_KEY);
  location.hash = "#/";
  signedOut("Signed out.");
}

// --- pages ---------------------------------------------------------------------------------

const isGuest = () => state.session.max_trust === "guest";
const isAdmin = () => state.session.role === "admin" && !state.session.agents;

function overview() {
  if (isGuest()) return guestContext();
  const title = h("h1", {}, "Overview");
  if (!isAdmin()) {
    const rows = state.session.agents.map((agent) => h("tr", {}, h("td", {}, link(route("agent", agent), agent))));
    show(title, h("p", { class: "muted" }, "This token covers these agents."), table(["Agent"], rows));
    return;
  }
  show(
    title,
    section("Server", async () => {
      const info = await call("GetServerInfo");
      state.info = info;
      const failures = (info.recentFailures || []).map((item) => {
        const c = item.conversation;
        return h(
          "tr",
          {},
          h("td", {}, link(conversationRoute(c), `${c.agentId} / ${c.ownerId} / ${c.channel}:${c.chatId}`)),
          h("td", {}, when(item.run.completedAt)),
          h("td", { class: "text" }, item.run.error || "")
        );
      });
      const agents = (info.agents || []).map((agent) =>
        h(
          "tr",
          {},
          h("td", {}, link(route("agent", agent.agentId), agent.agentId)),
          h("td", {}, String(agent.owners || 0)),
          h("td", {}, String(agent.conversations || 0))
        )
      );
      return [
        cards([
          ["Version", info.version],
          ["Storage", info.backend],
          ["Database size", bytes(info.databaseBytes)],
          ["Review backlog", String(info.reviewBacklog || 0)],
          ["Failed reviews (24 h)", String(info.reviewFailures24h || 0)],
          ["Compacted (24 h)", String(info.compactedConversations24h || 0)],
          ["Embedding queue", embeddingProgress(Number(info.embeddingPendingMessages || 0) + Number(info.embeddingPendingMemories || 0))],
          ["Background review", info.backgroundReview ? "on" : "off"],
        ]),
        h("h2", {}, "Agents"),
        table(["Agent", "Owners", "Conversations"], agents),
        h("h2", {}, "Recent review failures"),
        table(["Conversation", "When", "Error"], failures),
      ];
    }),
    section("Activity", () => activitySection({}))
  );
}

// The embedding queue, live and backlog; while it is not empty, followed every 2 s
// (GetEmbeddingStatus) with the rate and the time to go, as `memoryd embeddings --watch`
// prints them.
function embeddingProgress(waiting) {
  const node = h("span", { "data-embedding-queue": String(waiting) }, String(waiting));
  if (waiting === 0) return node;
  let first = null;
  const follow = async () => {
    if (!node.isConnected) return;
    let status;
    try {
      status = await call("GetEmbeddingStatus");
    } catch (error) {
      node.textContent = `${waiting} (${error.message})`;
      return;
    }
    const left = Number(status.pendingMessages || 0) + Number(status.pendingMemories || 0);
    const done = Number(status.embeddedMessages || 0) + Number(status.embeddedMemories || 0);
    // The live queue (chats' messages, then rows) is embedded before the backlog.
    const live = Number(status.liveMessages || 0) + Number(status.pendingMemories || 0);
    const now = performance.now();
    let text = `${left.toLocaleString("en")} waiting (${live.toLocaleString("en")} live, ${(left - live).toLocaleString("en")} in the backlog)`;
    if (first === null) first = { now, done, left };
    else {
      const rate = Math.max(done - first.done, first.left - left) / ((now - first.now) / 1000);
      text += ` · ${rate.toFixed(1)}/s`;
      if (rate > 0 && left > 0) text += ` · about ${Math.round(left / rate)} s to go`;
    }
    if (left === 0) text = "0 waiting: every message and row has its vector";
    node.textContent = text;
    node.dataset.embeddingQueue = String(left);
    if (left > 0) setTimeout(follow, 2000);
  };
  setTimeout(follow, 0);
  return node;
}

function agentPage(agent) {
  show(
    h("p", { class: "crumbs" }, link("/", "Overview"), " / agent"),
    h("h1", {}, `Agent ${agent}`),
    section("Activity", () => activitySection({ agent: { agentId: agent } })),
    section("Owners", () =>
      paged(
        ["Owner", "Conversations", "Memory rows", "Archived", "Latest conversation"],
        async (token) => {
          const page = await call("ListOwners", { agentId: agent, pageSize: 50, pageToken: token });
          return {
            next: page.nextPageToken,
            rows: (page.owners || []).map((owner) =>
              h(
                "tr",
                {},
                h("td", {}, link(route("owner", agent, owner.ownerId), owner.ownerId)),
                h("td", {}, String(owner.conversations || 0)),
                h("td", {}, String(owner.activeMemories || 0)),
                h("td", {}, String(owner.archivedMemories || 0)),
                h("td", {}, when(owner.latestConversationAt))
              )
            ),
          };
        }
      )
    )
  );
}

function conversationRoute(c) {
  return route("conversation", c.agentId || "main", c.ownerId || "default", c.channel, c.chatId, c.threadScope || "");
}

function ownerPage(agent, owner) {
  const scope = { agentId: agent, ownerId: owner };
  show(
    h("p", { class: "crumbs" }, link("/", "Overview"), " / ", link(route("agent", agent), agent), " / owner"),
    h("h1", {}, `Owner ${owner}`),
    section("Prompt files", async () => {
      const context = await call("GetPromptContext", scope);
      return [h("h3", {}, "USER.md"), h("pre", { tabindex: 0 }, context.userMd || "(empty)"), h("h3", {}, "MEMORY.md"), h("pre", { tabindex: 0 }, context.memoryMd || "(empty)")];
    }),
    section("Conversations", () =>
      paged(["Conversation", "Started", "Window starts after"], async (token) => {
        const page = await call("ListConversations", { owner: scope, pageSize: 50, pageToken: token });
        return {
          next: page.nextPageToken,
          rows: (page.conversations || []).map((item) => {
            const c = item.conversation;
            return h(
              "tr",
              {},
              h("td", {}, link(conversationRoute(c), `${c.channel}:${c.chatId}${c.threadScope ? " / " + c.threadScope : ""}`)),
              h("td", {}, when(item.createdAt)),
              h("td", {}, `message #${item.windowStartId || 0}`)
            );
          }),
        };
      })
    ),
    section("Memory rows", () => memoryRows(scope)),
    section("Activity", () => activitySection({ owner: scope })),
    section("Revisions", () => revisions(agent, owner)),
    section("Review and erase", () => {
      const outcome = h("div", {});
      return [
        h(
          "p",
          {},
          h("button", { type: "button", onclick: () => reviewNow({ agentId: agent, ownerId: owner }, outcome) }, "Review now"),
          h("span", { class: "muted" }, " every conversation of the owner with unread messages"),
          " ",
          h("button", { type: "button", class: "danger", onclick: () => eraseOwner(agent, owner, outcome) }, "Erase the owner…")
        ),
        outcome,
      ];
    })
  );
}

// Where a row came from: its source, the messages it was learnt from (each opens in a dialog,
// linked to its conversation), the review run, its model and provider.
function provenance(scope, memory) {
  const p = memory.provenance || {};
  let details = {};
  try {
    details = p.details ? JSON.parse(p.details) : {};
  } catch (error) {
    details = {};
  }
  const ids = p.sourceMessageId ? [p.sourceMessageId] : (details.source_message_ids || []).slice(-3);
  const parts = [];
  if (p.sourceName) parts.push(p.sourceName);
  if (details.review_run_id) parts.push(`review run #${details.review_run_id}`);
  if (details.model) parts.push(`model ${details.model}`);
  if (details.provider) parts.push(`via ${details.provider}`);
  const messages = ids.map((id) => h("button", { type: "button", class: "link", onclick: () => showMessage(scope, id) }, `message #${id}`));
  return [parts.join(" · "), messages.length ? h("br") : null, ...messages.flatMap((button) => [button, " "])];
}

// One row a review changed: what it did, the row (it opens in a dialog), before and after.
function appliedOperation(conversation, op) {
  const scope = { agentId: conversation.agentId, ownerId: conversation.ownerId };
  const row = h("button", { type: "button", class: "link", onclick: () => showMemory(scope, op.memoryId) }, `row #${op.memoryId}`);
  const head = [h("strong", {}, `operation ${op.index || 0} (${op.action})`), ": ", row];
  if (op.action === "replace") return h("li", {}, head, h("br"), h("del", {}, op.valueBefore || ""), " → ", h("ins", {}, op.valueAfter || ""));
  if (op.action === "archive") return h("li", {}, head, " archived: ", h("q", {}, op.valueAfter || op.valueBefore || ""));
  return h("li", {}, head, " added: ", h("ins", {}, op.valueAfter || ""));
}

async function showMemory(scope, id) {
  let body;
  try {
    const found = (await call("GetMemory", { owner: scope, id })).memory;
    body = [
      h("p", {}, `${label(found.category, "CATEGORY_")} · ${label(found.scopeType, "SCOPE_TYPE_")} · key ${found.key}${found.archived ? " · archived" : ""} · updated ${when(found.updatedAt)}`),
      h("pre", { tabindex: 0 }, found.value),
      h("p", {}, link(route("owner", scope.agentId, scope.ownerId), "The owner's rows")),
    ];
  } catch (error) {
    body = [failure(error)];
  }
  opened(`Memory row #${id}`, body);
}

async function showMessage(scope, id) {
  let body;
  try {
    const found = (await call("GetMessage", { owner: scope, id })).message;
    const c = found.conversation;
    body = [
      h("p", {}, `${found.sender} (${label(found.role, "ROLE_")}), ${when(found.createdAt)}, in `, link(conversationRoute(c), `${c.channel}:${c.chatId}`)),
      h("pre", { tabindex: 0 }, found.content),
    ];
  } catch (error) {
    body = [failure(error)];
  }
  opened(`Message #${id}`, body);
}

// A dialog to read (Escape or Close ends it; following a link in it too).
function opened(title, body) {
  const dialog = h(
    "dialog",
    { "aria-labelledby": "dialog-title", class: "reading" },
    h("h2", { id: "dialog-title" }, title),
    body,
    h("form", { method: "dialog" }, h("button", { autofocus: true }, "Close"))
  );
  dialog.addEventListener("close", () => dialog.remove());
  dialog.addEventListener("click", (event) => {
    if (event.target.tagName === "A") dialog.close();
  });
  document.body.append(dialog);
  dialog.showModal();
}

async function showExchange(conversation, run) {
  let body;
  try {
    const found = await call("GetReviewExchange", { conversation, runId: run });
    body = [
      h("h3", {}, "Prompt"),
      (found.prompt || []).map((m) => [h("h4", {}, m.role), h("pre", { tabindex: 0 }, m.content)]),
      h("h3", {}, "Answer"),
      h("pre", { tabindex: 0 }, found.answer || "(no model answered)"),
    ];
  } catch (error) {
    body = [failure(error)];
  }
  opened(`Review run #${run}: prompt and answer`, body);
}

const MEMORY_COLUMNS = ["Category", "Scope", "Key", "Value", "Trust", "Provenance", "State", "Actions"];

function memoryRow(scope, memory) {
  const value = h("td", { class: "text" }, memory.value);
  const actions = h("td", {});
  const act = async (question, method, request, done) => {
    if (!(await confirmed(question))) return;
    try {
      await call(method, { owner: scope, id: memory.id, ...request });
      say(done);
      render();
    } catch (error) {
      actions.append(failure(error));
    }
  };
  const remove = h("button", { type: "button", class: "danger", onclick: () => act(`Delete row #${memory.id} (${memory.key}: “${memory.value}”)? It is erased from the database and its indexes, and the prompt files are rewritten without it. It cannot be restored.`, "DeleteMemory", {}, `Deleted row #${memory.id}.`) }, "Delete");
  if (memory.archived) {
    actions.append(h("button", { type: "button", onclick: () => act(`Restore row #${memory.id}?`, "RestoreMemory", {}, "Restored.") }, "Restore"), " ", remove);
  } else {
    actions.append(
      h("button", { type: "button", class: "danger", onclick: () => act(`Archive row #${memory.id}?`, "ArchiveMemory", { reason: "archived in the console" }, "Archived.") }, "Archive"),
      " ",
      h("button", { type: "button", onclick: () => editRow(scope, memory, value) }, "Edit"),
      " ",
      remove
    );
  }
  return h(
    "tr",
    { id: `memory-${memory.id}` },
    h("td", {}, label(memory.category, "CATEGORY_")),
    h("td", {}, `${label(memory.scopeType, "SCOPE_TYPE_")} ${memory.scopeId || ""}`),
    h("td", { class: "text" }, memory.key),
    value,
    h("td", {}, label(memory.trust, "TRUST_")),
    h("td", { class: "text" }, provenance(scope, memory)),
    h("td", {}, memory.archived ? h("span", { class: "badge" }, "archived") : "active"),
    actions
  );
}

// How a search hit matched: each way (words, part of a word, meaning, a neighbour's match).
const matchedBy = (hit) => (hit.matches || [hit.match]).map((m) => label(m, "MATCH_KIND_")).join(", ");

// How well a search hit matches (every hit reaches the server's floor), and what that is made
// of: the share of the query's words it holds, its similarity, its place in each ranking.
function relevanceOf(hit) {
  const s = hit.scores || {};
  const parts = [
    `words held ${Number(s.coverage || 0).toFixed(2)}`,
    s.similarity ? `similarity ${Number(s.similarity).toFixed(3)}` : "",
    s.lexicalRank ? `word rank ${s.lexicalRank}` : "",
    s.semanticRank ? `meaning rank ${s.semanticRank}` : "",
  ].filter(Boolean);
  return [h("strong", { "data-relevance": Number(s.relevance || 0).toFixed(2) }, Number(s.relevance || 0).toFixed(2)), h("br", {}), h("span", { class: "muted" }, parts.join(" · "))];
}

// What a search's floor left out, said under its hits.
function leftOut(found) {
  const count = Number(found.belowFloor || 0);
  if (!count) return null;
  return h("p", { class: "muted" }, `${count.toLocaleString("en")} more ${count === 1 ? "was" : "were"} too weak a match to show: few of the words, and too far in meaning.`);
}

function editRow(scope, memory, cell) {
  const area = h("textarea", { rows: 3, cols: 40, "aria-label": `New value of row ${memory.id}` });
  area.value = memory.value;
  const form = h(
    "form",
    { class: "inline" },
    area,
    h("button", { type: "submit" }, "Save"),
    h("button", { type: "button", onclick: () => render() }, "Cancel")
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!(await confirmed(`Save the new value of row #${memory.id}?`))) return;
    try {
      await call("UpdateMemory", { owner: scope, id: memory.id, value: area.value });
      say("Saved.");
      render();
    } catch (error) {
      form.append(failure(error));
    }
  });
  fill(cell, form);
  area.focus();
}

function revisions(agent, owner) {
  const holder = h("div", {});
  const picker = h("select", { id: "resource", "aria-label": "Prompt file" }, h("option", { value: "RESOURCE_TYPE_USER_MD" }, "USER.md"), h("option", { value: "RESOURCE_TYPE_MEMORY_MD" }, "MEMORY.md"));
  const load = () => {
    const ref = { agentId: agent, type: picker.value, scopeId: owner };
    fill(holder, h("p", { class: "muted loading" }, "Loading…"));
    revisionList(ref)
      .then((content) => fill(holder, content))
      .catch((error) => fill(holder, failure(error)))
      .then(rendered);
  };
  picker.addEventListener("change", load);
  load();
  return [h("form", { class: "inline" }, h("label", { for: "resource" }, "Prompt file", picker)), holder];
}

async function revisionList(ref) {
  const found = await call("ListRevisions", { ref, pageSize: 50 });
  const list = found.revisions || [];
  if (!list.length) return h("p", {}, "No revisions yet.");
  const options = () => list.map((r) => h("option", { value: r.revision }, `#${r.revision} · ${when(r.createdAt)} · ${r.mutationSource || ""}`));
  const from = h("select", { id: "diff-from" }, options());
  const to = h("select", { id: "diff-to" }, options());
  if (list.length > 1) from.selectedIndex = 1;
  const view = h("div", {});
  const compare = async () => {
    const diff = await call("DiffRevisions", { ref, fromRevision: from.value, toRevision: to.value });
    fill(view,
      sideBySide(diff),
      h(
        "p",
        {},
        h("button", { type: "button", class: "danger", onclick: () => rollback(ref, from.value) }, `Roll back to #${from.value}`)
      )
    );
  };
  const form = h(
    "form",
    { class: "inline" },
    h("label", { for: "diff-from" }, "From", from),
    h("label", { for: "diff-to" }, "To", to),
    h("button", { type: "submit" }, "Compare")
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    compare().catch((error) => fill(view, failure(error)));
  });
  return h("div", {}, form, view);
}

// A unified diff shown side by side: removed lines on the left, added on the right.
function sideBySide(diff) {
  const cells = [h("div", { class: "head" }, diff.fromLabel || "from"), h("div", { class: "head" }, diff.toLabel || "to")];
  let left = [];
  let right = [];
  const flush = () => {
    const rows = Math.max(left.length, right.length);
    for (let i = 0; i < rows; i++) {
      cells.push(h("div", { class: left[i] !== undefined ? "del" : "" }, left[i] ?? ""));
      cells.push(h("div", { class: right[i] !== undefined ? "add" : "" }, right[i] ?? ""));
    }
    left = [];
    right = [];
  };
  let inHunk = false; // the "---" and "+++" lines before the first hunk name the two sides
  for (const line of (diff.diff || "").split("\n")) {
    if ((!inHunk && !line.startsWith("@@")) || line.startsWith("\\")) continue; // "\ No newline..."
    if (line.startsWith("@@")) {
      inHunk = true;
      flush();
      cells.push(h("div", { class: "head" }, line), h("div", { class: "head" }, line));
    } else if (line.startsWith("-")) left.push(line.slice(1));
    else if (line.startsWith("+")) right.push(line.slice(1));
    else {
      flush();
      cells.push(h("div", {}, line.slice(1)), h("div", {}, line.slice(1)));
    }
  }
  flush();
  if (!diff.diff) return h("p", {}, "The two revisions are the same.");
  return h("div", { class: "diff", role: "group", "aria-label": "Differences, side by side" }, cells);
}

async function rollback(ref, revision) {
  if (!(await confirmed(`Roll back to revision #${revision}? A new revision is written; none is lost.`))) return;
  try {
    const done = await call("RollbackResource", { ref, revision });
    render();
    // The server's own words: what changed, and what became of the memory rows behind the file.
    main().prepend(h("p", { class: "notice", role: "status" }, done.notice || `Rolled back to revision #${revision}.`));
  } catch (error) {
    main().append(failure(error));
  }
}

function conversationPage(agent, owner, channel, chat, thread) {
  const conversation = { agentId: agent, ownerId: owner, channel, chatId: chat };
  if (thread) conversation.threadScope = thread;
  show(
    h("p", { class: "crumbs" }, link("/", "Overview"), " / ", link(route("agent", agent), agent), " / ", link(route("owner", agent, owner), owner), " / conversation"),
    h("h1", {}, `Conversation ${channel}:${chat}${thread ? " / " + thread : ""}`),
    h("p", {}, link(contextRoute(conversation), "What the model will see"), h("span", { class: "muted" }, ": the composed context, block by block")),
    section("State", async () => {
      const [found, review, compaction] = await Promise.all([
        call("GetConversation", { conversation }),
        call("GetReviewState", { conversation }).catch(() => ({})),
        call("GetCompactionState", { conversation }).catch(() => ({})),
      ]);
      const checkpoint = compaction.checkpoint;
      const outcome = h("div", {});
      return [
        cards([
          ["Messages", String(found.messageCount || 0)],
          ["In the window", String(found.windowMessageCount || 0)],
          ["Reviewed up to", `message #${review.lastReviewedMessageId || 0}`],
          ["Unread by the review", String(review.unreadMessages || 0)],
          ["Peak prompt tokens", String(found.peakPromptTokens || 0)],
          ["Compaction trigger", String(compaction.triggerTokens || "off")],
        ]),
        h("h3", {}, "Working memory"),
        h("pre", { tabindex: 0 }, found.workingMemory || "(none)"),
        h("h3", {}, "Description"),
        h("pre", { tabindex: 0 }, found.description || "(none)"),
        h("h3", {}, "Latest checkpoint"),
        checkpoint
          ? h("p", {}, `Summarises messages #${checkpoint.firstMessageId} to #${checkpoint.lastMessageId} (${checkpoint.tokens} tokens), ${when(checkpoint.createdAt)}.`)
          : h("p", {}, "None: the conversation was never compacted."),
        h(
          "p",
          {},
          h("button", { type: "button", onclick: () => operatorAction(`Compact ${channel}:${chat} now?`, "Compacted.", "Compact", { conversation }) }, "Compact now"),
          " ",
          h("button", { type: "button", class: "danger", onclick: () => operatorAction(`Start a new session of ${channel}:${chat} (/new)? The history is kept.`, "New session started.", "ClearConversation", { conversation }) }, "New session (/new)"),
          " ",
          h("button", { type: "button", onclick: () => reviewNow({ conversation }, outcome) }, "Review now"),
          " ",
          h("button", { type: "button", class: "danger", onclick: () => eraseConversation(conversation, outcome) }, "Erase the conversation…")
        ),
        outcome,
      ];
    }),
    section("Checkpoints", () =>
      paged(["#", "When", "Covers", "Summary"], async (token) => {
        const page = await call("ListMessages", { conversation, pageSize: 20, pageToken: token, allHistory: true, kinds: ["checkpoint_summary"] });
        return {
          next: page.nextPageToken,
          rows: (page.messages || []).slice().reverse().map((m) => {
            let covers = {};
            try {
              covers = JSON.parse(m.metadata || "{}");
            } catch (error) {
              covers = {};
            }
            const range = covers.first_message_id ? `messages #${covers.first_message_id} to #${covers.last_message_id}` : "";
            return h("tr", {}, h("td", {}, String(m.id)), h("td", {}, when(m.createdAt)), h("td", {}, range), clipped(m.content));
          }),
        };
      }, "Every compaction's summary, newest first, and the messages it covers.")
    ),
    section("Messages", () =>
      paged(["#", "When", "Sender", "Role", "Kind", "Text"], async (token) => {
        const page = await call("ListMessages", { conversation, pageSize: 50, pageToken: token, allHistory: true });
        return {
          next: page.nextPageToken,
          rows: (page.messages || []).slice().reverse().map((m) =>
            h("tr", {}, h("td", {}, String(m.id)), h("td", {}, when(m.createdAt)), h("td", { class: "text" }, m.sender), h("td", {}, label(m.role, "ROLE_")), h("td", {}, m.kind), clipped(m.content))
          ),
        };
      }, "Newest first, every stored message (before the window too).")
    ),
    section("Search", () => searchForm(conversation)),
    section("Review runs", () => reviewRuns(conversation)),
    section("Activity", () => activitySection({ conversation }))
  );
}

// An action after a confirmation; `done` is said once it is committed (a text of its own, so
// that one action's word is never taken for the next one's).
async function operatorAction(question, done, method, request) {
  if (!(await confirmed(question))) return;
  try {
    await call(method, request);
    say(done);
    render();
  } catch (error) {
    main().append(failure(error));
  }
}

function searchForm(conversation) {
  const query = h("input", { id: "search-query", type: "search", required: true });
  const mode = h(
    "select",
    { id: "search-mode" },
    h("option", { value: "SEARCH_MODE_HYBRID" }, "hybrid"),
    h("option", { value: "SEARCH_MODE_LEXICAL" }, "lexical"),
    h("option", { value: "SEARCH_MODE_SEMANTIC" }, "semantic")
  );
  const results = h("div", { id: "search-results" });
  const form = h(
    "form",
    { class: "inline", role: "search" },
    h("label", { for: "search-query" }, "Words", query),
    h("label", { for: "search-mode" }, "Mode", mode),
    h("button", { type: "submit" }, "Search")
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const found = await call("SearchHistory", { query: query.value, conversation, mode: mode.value, limit: 20 });
      const rows = (found.hits || []).map((hit) =>
        h("tr", {}, h("td", {}, String(hit.message.id)), h("td", { class: "text" }, hit.message.content), h("td", {}, matchedBy(hit)), h("td", {}, relevanceOf(hit)))
      );
      fill(results, table(["#", "Message", "Matched by", "Relevance"], rows, "The best matches first."), leftOut(found));
    } catch (error) {
      fill(results, failure(error));
    }
  });
  return [form, results];
}

function reviewRuns(conversation) {
  const holder = h("div", {});
  const tokens = [""];
  const renderPage = async (index) => {
    const page = await call("ListReviewRuns", { conversation, pageSize: 20, pageToken: tokens[index] });
    tokens[index + 1] = page.nextPageToken || null;
    const runs = (page.runs || []).map((run) => {
      const status = label(run.status, "REVIEW_STATUS_");
      const skipped = (run.skippedOperations || []).map((op) =>
        h(
          "li",
          {},
          h("strong", {}, `operation ${op.index || 0} (${op.action})`),
          ": ",
          op.reason,
          op.value ? [h("br", {}), "Value: ", h("q", { class: "refused" }, op.value)] : null,
          op.messageId && op.messageId !== "0" ? ` (from message ${op.messageId})` : null
        )
      );
      const applied = (run.appliedOperations || []).map((op) => appliedOperation(conversation, op));
      return h(
        "li",
        { class: status === "failed" ? "failed" : "", id: `run-${run.id}` },
        h("p", {}, h("strong", {}, `Run #${run.id}`), " ", h("span", { class: `badge ${status === "failed" ? "failed" : ""}` }, status), ` · ${when(run.startedAt)} · ${((new Date(run.completedAt) - new Date(run.startedAt)) / 1000).toFixed(2)} s`),
        h("p", {}, `Added ${run.opsAdded || 0}, replaced ${run.opsReplaced || 0}, archived ${run.opsArchived || 0}, skipped ${run.opsSkipped || 0}, deferred ${run.opsDeferred || 0} · ${run.tokensIn || 0} tokens in · ${run.modelCalls || 0} model calls · ${run.model || "no model"} ${run.provider ? "via " + run.provider : ""}`),
        run.error ? h("p", { class: "error" }, run.error) : null,
        run.exchangeKept ? h("p", {}, h("button", { type: "button", onclick: () => showExchange(conversation, run.id) }, "Prompt and answer")) : null,
        applied.length ? h("div", {}, h("p", {}, "Changed:"), h("ul", { class: "applied" }, applied)) : null,
        skipped.length ? h("div", {}, h("p", {}, "Skipped:"), h("ul", {}, skipped)) : null
      );
    });
    fill(holder,
      runs.length ? h("ol", { class: "timeline" }, runs) : h("p", {}, "No review has run yet."),
      h(
        "div",
        { class: "pager" },
        h("button", { type: "button", disabled: index === 0, onclick: () => renderPage(index - 1).catch(showError(holder)) }, "Newer runs"),
        h("button", { type: "button", disabled: !tokens[index + 1], onclick: () => renderPage(index + 1).catch(showError(holder)) }, "Older runs")
      )
    );
  };
  return renderPage(0).then(() => holder);
}

function guestContext() {
  const agent = h("input", { id: "guest-agent", value: (state.session.agents || ["main"])[0] });
  const owner = h("input", { id: "guest-owner", value: "default" });
  const out = h("div", {});
  const form = h(
    "form",
    { class: "inline" },
    h("label", { for: "guest-agent" }, "Agent", agent),
    h("label", { for: "guest-owner" }, "Owner", owner),
    h("button", { type: "submit" }, "Show")
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const context = await call("GetPromptContext", { agentId: agent.value, ownerId: owner.value });
      fill(out, h("h2", {}, "What a guest's prompt holds"), h("pre", { tabindex: 0 }, context.contextBlock || "(nothing)"), context.withheld ? h("p", { class: "muted" }, "The owner's files are withheld from guests.") : null);
    } catch (error) {
      fill(out, failure(error));
    }
  });
  show(h("h1", {}, "Guest view"), h("p", { class: "muted" }, "This token is capped at guest trust: it sees what GetPromptContext shows a guest, and nothing more."), form, out);
}

function settingsPage() {
  show(
    h("h1", {}, "Settings"),
    section("When the review runs", async () => {
      if (!isAdmin()) return h("p", {}, "The server's settings are shown to an admin token for every agent.");
      const info = await call("GetServerInfo");
      return reviewSettings(info);
    }),
    section("Effective settings (read-only)", async () => {
      if (!isAdmin()) return h("p", {}, "The server's settings are shown to an admin token for every agent.");
      const info = await call("GetServerInfo");
      return [h("p", { class: "muted" }, "Secrets are masked; tokens are shown by their fingerprints."), settingsTables(info.settingsJson)];
    })
  );
}

// The effective settings (GetServerInfo.settings_json) as one table a section, in the config
// file's own names: [memoryd.server] listen, ...; lists (providers, tokens) one row an entry.
function settingsTables(text) {
  let memoryd;
  try {
    memoryd = JSON.parse(text).memoryd || {};
  } catch {
    return h("pre", { tabindex: 0 }, text);
  }
  const shown = (value) => (Array.isArray(value) ? value.join(", ") : typeof value === "object" && value !== null ? JSON.stringify(value) : String(value));
  const tr = (cells) => h("tr", {}, cells.map((cell) => h("td", {}, cell)));
  // A list of entries (providers, tokens): a column a field.
  const entries = (list) => {
    const columns = [...new Set(list.flatMap((entry) => Object.keys(entry)))];
    return table(columns, list.map((entry) => tr(columns.map((key) => shown(entry[key] ?? "")))));
  };
  const general = Object.entries(memoryd).filter(([, value]) => typeof value !== "object" || value === null);
  const parts = [table(["Setting", "Value"], general.map(([key, value]) => tr([h("code", {}, key), shown(value)])))];
  for (const [name, value] of Object.entries(memoryd)) {
    if (typeof value !== "object" || value === null) continue;
    parts.push(h("h3", {}, name === "providers" ? "[[memoryd.providers]]" : `[memoryd.${name}]`));
    if (Array.isArray(value)) {
      parts.push(entries(value));
      continue;
    }
    const rows = Object.entries(value).map(([key, inner]) =>
      tr([h("code", {}, key), Array.isArray(inner) && inner.length && typeof inner[0] === "object" ? entries(inner) : shown(inner)])
    );
    parts.push(table(["Setting", "Value"], rows));
  }
  return h("div", { class: "settings-tables" }, ...parts);
}

// The review's triggers, saved to the config file (its comments kept) and applied at once.
function reviewSettings(info) {
  const now = info.reviewTriggers || {};
  const field = (id, text, value, hint, attrs) => {
    const input = h("input", { id, type: "number", min: 0, step: "any", value: value ?? 0, "aria-describedby": `${id}-hint`, ...attrs });
    return [h("label", { for: id }, text, input), h("span", { id: `${id}-hint`, class: "muted" }, hint)];
  };
  const enabled = h("input", { id: "review-enabled", type: "checkbox", checked: now.enabled === true });
  const inputs = [
    ["review-interval", "Interval (hours)", now.reviewIntervalHours, "the longest a fact waits; 0 is off"],
    ["review-turns", "Turns", now.turnInterval, "completed turns since the last review; 0 is off"],
    ["review-idle", "Idle minutes", now.idleTimeoutMinutes, "without a new message; 0 is off"],
    ["review-passive", "Passive messages", now.passiveTurnInterval, "stored without an agent turn; 0 is off"],
  ];
  const outcome = h("div", { role: "status" });
  const form = h(
    "form",
    { class: "settings", "aria-describedby": "settings-where" },
    h("p", { id: "settings-where", class: "muted" }, `Saved in ${info.configPath} ([memoryd.memory]), its comments kept. The review runs when any trigger that is on fires.`),
    h("p", {}, h("label", { for: "review-enabled" }, enabled, " Background review runs")),
    inputs.map(([id, text, value, hint]) => h("p", {}, field(id, text, value, hint))),
    h("p", {}, h("button", { type: "submit" }, "Save")),
    outcome
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const value = (id) => Number(document.getElementById(id).value);
    const triggers = {
      enabled: enabled.checked,
      reviewIntervalHours: value("review-interval"),
      turnInterval: Math.round(value("review-turns")),
      idleTimeoutMinutes: value("review-idle"),
      passiveTurnInterval: Math.round(value("review-passive")),
    };
    if (!(await confirmed(`Save these review settings in ${info.configPath}?`))) return;
    try {
      const saved = await call("UpdateReviewSettings", { triggers });
      fill(outcome,
        h("p", { class: "ok" }, `Saved in ${saved.configPath}` + (saved.applied ? " and applied." : ".")),
        saved.notice ? h("p", {}, saved.notice) : null
      );
    } catch (error) {
      fill(outcome, failure(error));
    }
  });
  return form;
}

// --- correcting memory ---------------------------------------------------------------------

const CATEGORIES = ["identity", "preference", "interest", "goal", "context", "directive", "fact", "job_run_summary"];
// What "Add a fact" offers: an owner's or agent's categories (a note belongs to a conversation,
// a job run summary to its job).
const ADDABLE = CATEGORIES.slice(0, 6);
const SCOPES = ["owner", "agent", "conversation", "job"];

function options(values, none) {
  return [h("option", { value: "" }, none), values.map((value) => h("option", { value }, value))];
}

// An owner's rows: filtered by category, scope and state (ListMemories), or found by words and
// meaning (Recall by owner, which finds active rows); a fact added; each row edited, archived,
// restored or deleted.
function memoryRows(scope) {
  const words = h("input", { id: "rows-words", type: "search", "aria-describedby": "rows-hint" });
  const category = h("select", { id: "rows-category" }, options(CATEGORIES, "any"));
  const scopeType = h("select", { id: "rows-scope" }, options(SCOPES, "any"));
  const archived = h(
    "select",
    { id: "rows-state" },
    h("option", { value: "ARCHIVED_FILTER_ALL" }, "any"),
    h("option", { value: "ARCHIVED_FILTER_ACTIVE" }, "active"),
    h("option", { value: "ARCHIVED_FILTER_ARCHIVED" }, "archived")
  );
  const results = h("div", { id: "rows" });
  const filter = h(
    "form",
    { class: "inline", role: "search", "aria-label": "Filter the rows" },
    h("label", { for: "rows-words" }, "Words or meaning", words),
    h("label", { for: "rows-category" }, "Category", category),
    h("label", { for: "rows-scope" }, "Scope", scopeType),
    h("label", { for: "rows-state" }, "State", archived),
    h("button", { type: "submit" }, "Filter")
  );
  const hint = h("p", { id: "rows-hint", class: "muted" }, "Words search the rows by words and meaning (active rows only); without words, every row that matches the filters is listed, most recently updated first.");
  const load = () => {
    const wanted = { words: words.value.trim(), category: category.value, scope: scopeType.value, state: archived.value };
    fill(results, h("p", { class: "muted loading" }, "Loading…"));
    const read = wanted.words ? foundRows(scope, wanted) : listedRows(scope, wanted);
    read.then((content) => fill(results, content)).catch(showError(results)).then(rendered);
  };
  filter.addEventListener("submit", (event) => {
    event.preventDefault();
    load();
  });
  load();
  return [filter, hint, addFact(scope, load), results];
}

// A filter's choice as its enum value's name: ("CATEGORY", "goal") is CATEGORY_GOAL.
const enumName = (prefix, choice) => `${prefix}_${choice.toUpperCase()}`;

function listedRows(scope, wanted) {
  const request = { owner: scope, archived: wanted.state, pageSize: 50 };
  if (wanted.category) request.categories = [enumName("CATEGORY", wanted.category)];
  if (wanted.scope) request.scopeType = enumName("SCOPE_TYPE", wanted.scope);
  return paged(
    MEMORY_COLUMNS,
    async (token) => {
      const page = await call("ListMemories", { ...request, pageToken: token });
      return { next: page.nextPageToken, rows: (page.memories || []).map((item) => memoryRow(scope, item.memory)) };
    },
    "The owner's rows that match, most recently updated first."
  );
}

async function foundRows(scope, wanted) {
  const found = await call("Recall", { owner: scope, query: wanted.words, limit: 50 });
  const onlyArchived = wanted.state === "ARCHIVED_FILTER_ARCHIVED";
  const hits = (found.hits || [])
    .filter((hit) => hit.memory && !onlyArchived)
    .filter((hit) => !wanted.category || hit.memory.category === enumName("CATEGORY", wanted.category))
    .filter((hit) => !wanted.scope || hit.memory.scopeType === enumName("SCOPE_TYPE", wanted.scope));
  const rows = hits.map((hit) => {
    const row = memoryRow(scope, hit.memory);
    row.prepend(h("td", {}, relevanceOf(hit), h("br", {}), h("span", { class: "muted" }, matchedBy(hit))));
    return row;
  });
  const notes = [];
  if (onlyArchived) notes.push("A search finds active rows only: clear the words to list archived rows.");
  if (found.unembedded) notes.push(`${found.unembedded} rows have no vector yet: they are found by their words only.`);
  return [table(["Relevance", ...MEMORY_COLUMNS], rows, "The best matches first, by words and meaning."), leftOut(found), notes.map((text) => h("p", { class: "muted" }, text))];
}

// "Add a fact": a category, a value and, if wanted, a key (blank: read off the value).
function addFact(scope, done) {
  const category = h("select", { id: "fact-category", required: true }, ADDABLE.map((value) => h("option", { value }, value)));
  const value = h("textarea", { id: "fact-value", rows: 2, cols: 48, maxlength: 200, required: true });
  const key = h("input", { id: "fact-key", "aria-describedby": "fact-key-hint" });
  const outcome = h("div", { role: "status" });
  const form = h(
    "form",
    { class: "inline" },
    h("label", { for: "fact-category" }, "Category", category),
    h("label", { for: "fact-value" }, "Fact (at most 200 characters)", value),
    h("label", { for: "fact-key" }, "Key (optional)", key),
    h("span", { id: "fact-key-hint", class: "muted" }, "blank: read off the fact"),
    h("button", { type: "submit" }, "Add")
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const stored = (await call("StoreMemory", { owner: scope, category: enumName("CATEGORY", category.value), key: key.value, value: value.value })).memory;
      fill(outcome, h("p", { class: "ok" }, `Stored as row #${stored.id} (${stored.key}).`));
      value.value = "";
      key.value = "";
      done();
    } catch (error) {
      fill(outcome, failure(error));
    }
  });
  return h("details", { class: "add-fact" }, h("summary", {}, "Add a fact"), form, outcome);
}

// A receipt: what an erasure removed, as the server counted it. It replaces the page, whose
// subject is gone.
function receipt(title, pairs) {
  return h("section", { class: "receipt", "aria-label": title, role: "status" }, h("h3", {}, title), cards(pairs.map(([name, value]) => [name, String(value)])));
}

function erasureCards(answer) {
  const rows = (answer.erased || []).map((item) => [`${item.table} removed`, Number(item.rows || 0).toLocaleString("en")]);
  return [
    ...rows,
    ...("messagesDeleted" in answer || "memoriesDeleted" in answer || "conversationDeleted" in answer
      ? [["Messages removed", answer.messagesDeleted || 0], ["Rows removed", answer.memoriesDeleted || 0], ["Conversation removed", answer.conversationDeleted ? "yes" : "no"]]
      : []),
    ...("promptFilesRemoved" in answer ? [["Prompt files removed", answer.promptFilesRemoved]] : []),
    ["Write-ahead log emptied", answer.walTruncated ? "yes" : "no"],
    ["Statistics rebuilt", answer.statisticsRebuilt ? "yes" : "no"],
    ["Files that may still hold it", (answer.residualFiles || []).join(", ") || "none"],
  ];
}

async function eraseOwner(agent, owner, holder) {
  if (!(await confirmed(`Erase owner ${owner} of agent ${agent}? Every conversation, message, memory row, prompt file, revision and review run of the owner is deleted from the database, and cannot be restored.`))) return;
  try {
    const answer = await call("PurgeOwner", { agentId: agent, ownerId: owner });
    show(h("h1", {}, `Owner ${owner} erased`), receipt("The receipt", erasureCards(answer)), h("p", {}, link(route("agent", agent), `Back to agent ${agent}`)));
    say("Erased.");
  } catch (error) {
    fill(holder, failure(error));
  }
}

async function eraseConversation(conversation, holder) {
  const name = `${conversation.channel}:${conversation.chatId}${conversation.threadScope ? " / " + conversation.threadScope : ""}`;
  if (!(await confirmed(`Erase conversation ${name} of owner ${conversation.ownerId}? Its messages, checkpoints and notes are deleted from the database, and cannot be restored. The owner's other memory stays.`))) return;
  try {
    const answer = await call("PurgeConversation", { conversation });
    show(h("h1", {}, `Conversation ${name} erased`), receipt("The receipt", erasureCards(answer)), h("p", {}, link(route("owner", conversation.agentId, conversation.ownerId), `Back to owner ${conversation.ownerId}`)));
    say("Erased.");
  } catch (error) {
    fill(holder, failure(error));
  }
}

// Review now, for a conversation or every conversation of an owner: what each review did.
async function reviewNow(request, holder) {
  fill(holder, h("p", { class: "muted" }, "Reviewing…"));
  try {
    const answer = await call("ReviewNow", request);
    const rows = (answer.reviews || []).map((r) => {
      const c = r.conversation;
      const status = label(r.status, "REVIEW_STATUS_");
      return h(
        "tr",
        {},
        h("td", {}, link(conversationRoute(c), `${c.channel}:${c.chatId}`)),
        h("td", {}, status, r.reason ? `: ${r.reason}` : ""),
        h("td", {}, `added ${r.opsAdded || 0}, replaced ${r.opsReplaced || 0}, archived ${r.opsArchived || 0}, skipped ${r.opsSkipped || 0}`),
        h("td", {}, r.reviewRunId && r.reviewRunId !== "0" ? link(conversationRoute(c), `run #${r.reviewRunId}`) : "")
      );
    });
    fill(holder, h("div", { role: "status" }, table(["Conversation", "Outcome", "Rows", "Run"], rows, "Each conversation's review, as it ended.")));
  } catch (error) {
    fill(holder, failure(error));
  }
}

// --- what the model will see -----------------------------------------------------------------

const PART_KINDS = [
  ["CONTEXT_PART_KIND_MEMORY_CONTEXT", "Memory (USER.md, MEMORY.md)", "k-memory"],
  ["CONTEXT_PART_KIND_WORKING_MEMORY", "Working memory", "k-working"],
  ["CONTEXT_PART_KIND_RECENT_ENTRIES", "Recent agent rows", "k-recent"],
  ["CONTEXT_PART_KIND_RECALLED", "Recalled", "k-recalled"],
  ["CONTEXT_PART_KIND_CHECKPOINT_SUMMARY", "Checkpoint summary", "k-checkpoint"],
  ["CONTEXT_PART_KIND_MESSAGE", "Window messages", "k-message"],
];

function contextRoute(c) {
  return route("context", c.agentId || "main", c.ownerId || "default", c.channel, c.chatId, c.threadScope || "");
}

// The composed context of a conversation (ComposeContext), as the model would receive it, with
// the compaction state (GetCompactionState) beside it. Read again every 5 s while shown, and
// drawn again when either answer changed: a new message, a compaction or a learnt fact shows.
function contextPage(agent, owner, channel, chat, thread) {
  const conversation = { agentId: agent, ownerId: owner, channel, chatId: chat };
  if (thread) conversation.threadScope = thread;
  const trust = h("select", { id: "context-trust" }, h("option", { value: "TRUST_OPERATOR" }, "operator"), h("option", { value: "TRUST_GUEST" }, "guest"));
  const windowTokens = h("input", { id: "context-window", type: "number", min: 0, step: 1, value: 0, "aria-describedby": "context-window-hint" });
  const recall = h("input", { id: "context-recall", type: "number", min: 0, step: 1, value: 0, "aria-describedby": "context-recall-hint" });
  const form = h(
    "form",
    { class: "inline" },
    h("label", { for: "context-trust" }, "Who speaks next", trust),
    h("label", { for: "context-window" }, "Context window (tokens)", windowTokens),
    h("span", { id: "context-window-hint", class: "muted" }, "0: the one last reported, else the provider's"),
    h("label", { for: "context-recall" }, "Recalled budget (tokens)", recall),
    h("span", { id: "context-recall-hint", class: "muted" }, "0: no Recalled block"),
    h("button", { type: "submit" }, "Compose")
  );
  const body = h("div", { id: "context-view" }, h("p", { class: "muted loading" }, "Loading…"));
  const stamp = h("p", { class: "muted", id: "context-updated" });
  let shown = "";
  const read = async () => {
    const request = { conversation, trust: trust.value, contextWindow: Number(windowTokens.value) || 0, recallTokens: Number(recall.value) || 0 };
    const [composed, compaction] = await Promise.all([
      call("ComposeContext", request),
      call("GetCompactionState", { conversation }),
    ]);
    const key = JSON.stringify([request, composed, compaction]);
    stamp.textContent = `Read ${when(new Date().toISOString())}; read again every 5 s while this page is shown.`;
    if (key === shown) return;
    shown = key;
    const omitted = await omittedMessages(conversation, composed);
    fill(body, contextView(composed, compaction, omitted, request.recallTokens));
  };
  const refresh = () => read().catch((error) => fill(body, failure(error)));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    refresh();
  });
  const follow = () => {
    if (!body.isConnected) return;
    refresh().then(() => setTimeout(follow, 5000));
  };
  show(
    h("p", { class: "crumbs" }, link("/", "Overview"), " / ", link(route("agent", agent), agent), " / ", link(route("owner", agent, owner), owner), " / ", link(conversationRoute(conversation), "conversation"), " / context"),
    h("h1", {}, `What the model will see: ${channel}:${chat}${thread ? " / " + thread : ""}`),
    h("p", { class: "muted" }, "The context ComposeContext answers for this conversation's next model call, block by block."),
    form,
    stamp,
    h("section", { "aria-label": "Composed context" }, body)
  );
  read()
    .catch((error) => fill(body, failure(error)))
    .then(rendered)
    .then(() => setTimeout(follow, 5000));
}

// The newest messages of the window that the composed context left out (at most 50): the
// window's oldest, just before the first message sent.
async function omittedMessages(conversation, composed) {
  const count = Number(composed.omittedMessages || 0);
  if (!count) return [];
  const sent = (composed.parts || []).filter((p) => p.kind === "CONTEXT_PART_KIND_MESSAGE").map((p) => Number(p.messageId));
  const firstSent = sent.length ? Math.min(...sent) : Infinity;
  const found = [];
  let token = "";
  for (let page = 0; page < 3 && found.length < 50; page++) {
    const listed = await call("ListMessages", { conversation, pageSize: 1000, pageToken: token });
    const older = (listed.messages || []).filter((m) => Number(m.id) < firstSent);
    found.unshift(...older);
    token = listed.nextPageToken;
    if (!token) break;
  }
  return found.slice(-50);
}

function contextView(composed, compaction, omitted, recallTokens) {
  const parts = composed.parts || [];
  const windowSize = Number(composed.contextWindow || 0);
  const limit = Number(composed.limitTokens || 0);
  const total = Number(composed.totalTokens || 0);
  const tokensOf = (kind) => parts.filter((p) => p.kind === kind).reduce((sum, p) => sum + Number(p.tokens || 0), 0);
  const countOf = (kind) => parts.filter((p) => p.kind === kind).length;
  const blocks = PART_KINDS.map(([kind, name, css]) => ({ kind, name, css, tokens: tokensOf(kind), count: countOf(kind) }));
  const share = (tokens) => (limit ? `${((100 * tokens) / limit).toFixed(1)} %` : "");
  const swatch = (css) => svg("svg", { class: "swatch", width: 12, height: 12, viewBox: "0 0 12 12", "aria-hidden": "true" }, svg("rect", { class: css, width: 12, height: 12 }));
  const rows = blocks.map((b) =>
    h(
      "tr",
      { "data-kind": b.kind },
      h("td", {}, swatch(b.css), " ", b.name),
      h("td", {}, String(b.count)),
      h("td", {}, b.tokens.toLocaleString("en")),
      h("td", {}, budgetOf(b, recallTokens, windowSize, limit, total)),
      h("td", {}, share(b.tokens))
    )
  );
  rows.push(h("tr", { class: "total" }, h("th", { scope: "row" }, "Total"), h("td", {}, String(parts.length)), h("td", {}, total.toLocaleString("en")), h("td", {}, `${limit.toLocaleString("en")} (the limit)`), h("td", {}, share(total))));
  const checkpoint = compaction.checkpoint;
  const left = Number(composed.omittedMessages || 0);
  return [
    contextBar(blocks, windowSize, limit),
    h(
      "p",
      { class: "muted" },
      limit
        ? `${total.toLocaleString("en")} of ${limit.toLocaleString("en")} tokens (the limit: ${Math.round(Number(compaction.threshold || 0) * 100)} % of a ${windowSize.toLocaleString("en")}-token window).`
        : `${total.toLocaleString("en")} tokens: nothing was said yet and no context window is known, so there is no limit.`,
      composed.memoryWithheld ? " The memory block is withheld: a guest speaks next." : ""
    ),
    table(["Block", "Parts", "Tokens", "Budget", "Of the limit"], rows, "Tokens counted with tiktoken cl100k_base, content only."),
    h("h2", {}, "Left out"),
    left
      ? [
          h(
            "p",
            { id: "context-omitted" },
            `${left} message${left === 1 ? "" : "s"} of the window (${Number(composed.omittedTokens || 0).toLocaleString("en")} tokens) left out to stay within the limit. `,
            checkpoint && omitted.length && omitted.every((m) => Number(m.id) <= Number(checkpoint.lastMessageId))
              ? `Checkpoint #${checkpoint.id} covers them.`
              : compaction.enabled
                ? "No checkpoint covers them yet: automatic compaction summarises them at the next Preflight or CommitTurn over the trigger."
                : "No checkpoint covers them, and automatic compaction is off: they are not sent, and stay in history and search."
          ),
          table(
            ["#", "When", "Sender", "Text", "In a checkpoint"],
            omitted.map((m) =>
              h("tr", {}, h("td", {}, String(m.id)), h("td", {}, when(m.createdAt)), h("td", { class: "text" }, m.sender), clipped(m.content), h("td", {}, checkpoint && Number(m.id) <= Number(checkpoint.lastMessageId) ? `#${checkpoint.id}` : "no"))
            ),
            left > omitted.length ? `The newest ${omitted.length} of them.` : null
          ),
        ]
      : h("p", { id: "context-omitted" }, "Nothing: every message of the window is sent."),
    h(
      "p",
      {},
      `The window starts after message #${compaction.windowStartId || 0}. `,
      checkpoint ? `The latest checkpoint (#${checkpoint.id}) summarises messages #${checkpoint.firstMessageId} to #${checkpoint.lastMessageId} in ${checkpoint.tokens} tokens.` : "No checkpoint: the conversation was never compacted."
    ),
    h("h2", {}, "The parts, in the order sent"),
    h(
      "ol",
      { class: "parts" },
      parts.map((p) => {
        const kind = PART_KINDS.find(([k]) => k === p.kind) || [p.kind, label(p.kind, "CONTEXT_PART_KIND_"), ""];
        const title = p.kind === "CONTEXT_PART_KIND_MESSAGE" ? `message #${p.messageId} · ${p.sender} (${label(p.role, "ROLE_")})` : kind[1];
        return h("li", {}, h("details", {}, h("summary", {}, swatch(kind[2]), ` ${title} · ${Number(p.tokens || 0).toLocaleString("en")} tokens`), h("pre", { tabindex: 0 }, p.content)));
      })
    ),
  ];
}

// The budget a block is held to: the Recalled block, what was asked; a checkpoint summary
// shares half the window with the messages its compaction kept; the window's messages take
// what the limit leaves; the rest count against the limit.
function budgetOf(block, recallTokens, windowSize, limit, total) {
  if (block.kind === "CONTEXT_PART_KIND_RECALLED") return recallTokens ? `${recallTokens.toLocaleString("en")} asked` : "not asked";
  if (block.kind === "CONTEXT_PART_KIND_MESSAGE") return `what the limit leaves: ${Math.max(0, limit - (total - block.tokens)).toLocaleString("en")}`;
  if (block.kind === "CONTEXT_PART_KIND_CHECKPOINT_SUMMARY") return `half the window (${Math.floor(windowSize / 2).toLocaleString("en")}), with the messages a compaction keeps`;
  return "within the limit";
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

// The model's window as a bar: each block's tokens in the order sent, the limit as a line.
function contextBar(blocks, windowSize, limit) {
  const scale = Math.max(windowSize, limit, blocks.reduce((sum, b) => sum + b.tokens, 0), 1);
  let x = 0;
  const pieces = [svg("rect", { class: "k-free", x: 0, y: 0, width: 1000, height: 28 })];
  for (const b of blocks) {
    if (!b.tokens) continue;
    const width = (1000 * b.tokens) / scale;
    pieces.push(svg("rect", { class: b.css, x: x.toFixed(2), y: 0, width: Math.max(width, 1).toFixed(2), height: 28 }, svg("title", {}, `${b.name}: ${b.tokens} tokens`)));
    x += width;
  }
  const at = ((1000 * limit) / scale).toFixed(2);
  pieces.push(svg("line", { class: "limit", x1: at, x2: at, y1: 0, y2: 28 }));
  const described = blocks.filter((b) => b.tokens).map((b) => `${b.name} ${b.tokens}`).join(", ");
  return h(
    "figure",
    { class: "context-bar" },
    svg("svg", { viewBox: "0 0 1000 28", preserveAspectRatio: "none", width: "100%", height: 28, role: "img", "aria-label": `The context window of ${windowSize} tokens: ${described || "empty"}; the limit at ${limit}.` }, ...pieces),
    h("figcaption", { class: "muted" }, `The bar is the model's window (${windowSize.toLocaleString("en")} tokens); the line is the limit (${limit.toLocaleString("en")}).`)
  );
}

// --- activity --------------------------------------------------------------------------------

// The charts of GetActivity: each a bar per bucket, its series stacked (drawn here as SVG: no
// library; see ARCHITECTURE.md), with the numbers behind them in a table below.
const ACTIVITY_CHARTS = [
  { title: "Messages stored", series: [["messages", "Messages", "s-messages"]] },
  {
    title: "Review runs",
    series: [
      ["succeeded", "Succeeded", "s-runs"],
      ["reviewFailures", "Failed", "s-failures"],
    ],
  },
  {
    title: "Facts",
    series: [
      ["factsAdded", "Added", "s-added"],
      ["factsReplaced", "Replaced", "s-replaced"],
      ["factsArchived", "Archived", "s-archived"],
      ["factsRefused", "Refused", "s-refused"],
    ],
  },
  { title: "Compactions", series: [["compactions", "Compactions", "s-compactions"]] },
  { title: "Model tokens", series: [["modelTokens", "Tokens", "s-tokens"]] },
  { title: "Model errors", series: [["modelErrors", "Errors", "s-failures"]] },
];
const ACTIVITY_RANGES = { HOUR: [["48", "48 hours"], ["168", "7 days"], ["720", "30 days"], ["2160", "90 days"]], DAY: [["7", "7 days"], ["30", "30 days"], ["90", "90 days"], ["365", "a year"]] };

// The counts of one bucket as numbers (the JSON API writes int64 as strings, and leaves zeros out).
function activityCounts(counts) {
  const found = {};
  for (const name of ["messages", "compactions", "reviewRuns", "reviewFailures", "factsAdded", "factsReplaced", "factsArchived", "factsRefused", "modelTokens", "modelErrors"]) {
    found[name] = Number((counts || {})[name] || 0);
  }
  found.succeeded = found.reviewRuns - found.reviewFailures;
  return found;
}

// The activity of a scope ({conversation}, {owner}, {agent} or {} for every agent), with its
// bucket and range chosen on the page.
function activitySection(scope) {
  const chosen = { bucket: "DAY", span: "30" };
  const charts = h("div", { class: "charts" });
  const rangeSelect = h("select", { name: "span" });
  const bucketSelect = h("select", { name: "bucket", onchange: () => { chosen.bucket = bucketSelect.value; chosen.span = ACTIVITY_RANGES[chosen.bucket][0][0]; ranges(); draw(); } }, h("option", { value: "DAY" }, "Day"), h("option", { value: "HOUR" }, "Hour"));
  const ranges = () => {
    fill(rangeSelect, ACTIVITY_RANGES[chosen.bucket].map(([value, text]) => h("option", { value, selected: value === chosen.span }, text)));
  };
  rangeSelect.addEventListener("change", () => { chosen.span = rangeSelect.value; draw(); });
  ranges();
  const draw = async () => {
    // The bucket of now and the span's others before it (the server rounds to whole buckets).
    const hours = chosen.bucket === "HOUR" ? 1 : 24;
    const start = new Date(Date.now() - (Number(chosen.span) - 1) * hours * 3600 * 1000);
    try {
      const answer = await call("GetActivity", { ...scope, bucket: `ACTIVITY_BUCKET_${chosen.bucket}`, startTime: start.toISOString() });
      fill(charts, activityCharts(answer, chosen.bucket));
    } catch (error) {
      fill(charts, failure(error));
    }
  };
  const controls = h(
    "form",
    { class: "inline", "aria-label": "Activity range", onsubmit: (event) => event.preventDefault() },
    h("label", {}, "By", bucketSelect),
    h("label", {}, "Over the last", rangeSelect)
  );
  return draw().then(() => [controls, charts]);
}

function activityCharts(answer, bucket) {
  const points = (answer.points || []).map((point) => ({ start: new Date(point.startTime), counts: activityCounts(point.counts) }));
  const total = activityCounts(answer.total);
  const unit = bucket === "HOUR" ? "hour" : "day";
  const figures = ACTIVITY_CHARTS.map((chart) => activityChart(chart, points, total, unit));
  const busy = points.filter((point) => ACTIVITY_CHARTS.some((chart) => chart.series.some(([key]) => point.counts[key])));
  // The table is built when first opened: a range of 2,160 hours would be 24,000 cells.
  const numbers = h("details", { class: "numbers" }, h("summary", {}, `The numbers: ${busy.length} of ${points.length} ${unit}s had activity`));
  numbers.addEventListener("toggle", () => {
    if (!numbers.open || numbers.querySelector("table")) return;
    const rows = busy.map((point) => {
      const c = point.counts;
      return h("tr", {}, h("td", {}, bucketName(point.start, unit)), [c.messages, c.reviewRuns, c.reviewFailures, c.factsAdded, c.factsReplaced, c.factsArchived, c.factsRefused, c.compactions, c.modelTokens, c.modelErrors].map((value) => h("td", {}, value.toLocaleString("en"))));
    });
    numbers.append(table([`${unit === "hour" ? "Hour" : "Day"} (UTC)`, "Messages", "Reviews", "Failed", "Added", "Replaced", "Archived", "Refused", "Compactions", "Tokens", "Model errors"], rows, "Activity by " + unit));
  });
  return [h("div", { class: "chart-grid" }, figures), numbers];
}

const bucketName = (date, unit) => (unit === "hour" ? date.toISOString().slice(0, 13).replace("T", " ") + ":00" : date.toISOString().slice(0, 10));

// One chart: a bar per bucket, its series stacked, each series one SVG path (thousands of bars
// stay a handful of nodes); the largest bucket's total on the axis. Pointing at a bucket shows
// its numbers under the chart.
function activityChart(chart, points, total, unit) {
  const width = 360, height = 110, left = 40, bottom = 16;
  const sums = points.map((point) => chart.series.reduce((sum, [key]) => sum + point.counts[key], 0));
  const top = Math.max(1, ...sums);
  const step = (width - left) / Math.max(points.length, 1);
  const bar = Math.max(step * 0.8, 0.5).toFixed(2);
  const shapes = chart.series.map(() => []);
  points.forEach((point, index) => {
    let y = height - bottom;
    chart.series.forEach(([key], which) => {
      const value = point.counts[key];
      if (!value) return;
      const tall = Math.max(((height - bottom - 4) * value) / top, 0.5);
      y -= tall;
      shapes[which].push(`M${(left + index * step + step * 0.1).toFixed(2)} ${y.toFixed(2)}h${bar}v${tall.toFixed(2)}h-${bar}z`);
    });
  });
  const paths = chart.series.map(([, , css], which) => (shapes[which].length ? svg("path", { class: css, d: shapes[which].join("") }) : null)).filter(Boolean);
  const short = (date) => (unit === "hour" ? bucketName(date, unit).slice(5, 13) : bucketName(date, unit));
  const axis = [
    svg("line", { class: "axis", x1: left, x2: width, y1: height - bottom, y2: height - bottom }),
    svg("text", { class: "tick", x: left - 4, y: 12, "text-anchor": "end" }, top.toLocaleString("en")),
    svg("text", { class: "tick", x: left - 4, y: height - bottom, "text-anchor": "end" }, "0"),
  ];
  if (points.length) {
    axis.push(svg("text", { class: "tick", x: left, y: height - 3 }, short(points[0].start)));
    axis.push(svg("text", { class: "tick", x: width, y: height - 3, "text-anchor": "end" }, short(points[points.length - 1].start)));
  }
  const marker = svg("rect", { class: "hover", x: 0, y: 0, width: Math.max(step, 1).toFixed(2), height: height - bottom, visibility: "hidden" });
  const said = chart.series.map(([key, name]) => `${name} ${total[key].toLocaleString("en")}`).join(", ");
  const drawing = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img", "aria-label": `${chart.title} by ${unit}, ${points.length} ${unit}s: ${said}; at most ${Math.max(0, ...sums).toLocaleString("en")} in one ${unit}.` }, marker, ...axis, ...paths);
  const legend = chart.series.map(([key, name, css]) => h("span", { class: "legend" }, svg("svg", { class: "swatch", width: 12, height: 12, "aria-hidden": "true" }, svg("rect", { class: css, width: 12, height: 12 })), ` ${name} ${total[key].toLocaleString("en")}`));
  const readout = h("p", { class: "muted readout" }, "\u00a0");
  drawing.addEventListener("pointermove", (event) => {
    const box = drawing.getBoundingClientRect();
    const index = Math.floor(((event.clientX - box.left) * (width / box.width) - left) / step);
    if (index < 0 || index >= points.length) return;
    const point = points[index];
    marker.setAttribute("x", (left + index * step).toFixed(2));
    marker.setAttribute("visibility", "visible");
    readout.textContent = `${bucketName(point.start, unit)}: ` + chart.series.map(([key, name]) => `${name} ${point.counts[key].toLocaleString("en")}`).join(", ");
  });
  drawing.addEventListener("pointerleave", () => marker.setAttribute("visibility", "hidden"));
  return h("figure", { class: "chart", "data-chart": chart.title }, h("figcaption", {}, chart.title), drawing, h("p", { class: "muted legend-line" }, legend), readout);
}

// --- routing -------------------------------------------------------------------------------

function render() {
  if (!state.session) return;
  const parts = (location.hash.replace(/^#\/?/, "") || "").split("/").filter((p, i) => p !== "" || i > 0).map(decodeURIComponent);
  const [page, ...args] = parts;
  if (isGuest() && page) return guestContext();
  if (page === "agent" && args.length === 1) return agentPage(...args);
  if (page === "owner" && args.length === 2) return ownerPage(...args);
  if (page === "conversation" && args.length >= 4) return conversationPage(...args);
  if (page === "context" && args.length >= 4) return contextPage(...args);
  if (page === "settings") return settingsPage();
  return overview();
}

window.addEventListener("hashchange", () => {
  render();
  main().focus();
});

document.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("sign-out").addEventListener("click", signOut);
  const response = await fetch("/console/session", {
    credentials: "same-origin",
    headers: { "x-memoryd-csrf": sessionStorage.getItem(CSRF_KEY) || "" },
  });
  if (response.ok) signedIn(await response.json());
  else signedOut();
});
