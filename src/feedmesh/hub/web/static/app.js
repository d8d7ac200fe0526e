// feedmesh web interface: sign up, write a query with a live preview (why each entry matched),
// copy the feed URLs or all of them as OPML, edit a subscription or replace its URL, see recent
// matches, push it to webhooks (with their delivery log and a test button) and see its WebSub
// subscribers, add, import and remove sources. Plain JavaScript over the JSON API.
"use strict";

const $ = (id) => document.getElementById(id);
const store = window.localStorage;
let token = store.getItem("feedmesh-token");

async function api(method, path, body, raw) {
  const headers = {};
  if (token) headers.Authorization = "Bearer " + token;
  let payload;
  if (raw !== undefined) { payload = raw; headers["Content-Type"] = "text/xml"; }
  else if (body !== undefined) { payload = JSON.stringify(body); headers["Content-Type"] = "application/json"; }
  const response = await fetch(path, { method, headers, body: payload });
  if (response.status === 204) return {};
  const type = response.headers.get("Content-Type") || "";
  const data = type.includes("json") ? await response.json() : await response.text();
  if (!response.ok) {
    const error = new Error((data.error && data.error.message) || response.statusText);
    error.detail = data.error || {};
    error.status = response.status;
    throw error;
  }
  return data;
}

function element(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

// A URL with a line-break opportunity (<wbr>) after each "/" and before its extension, ? and
// &, its parts kept whole (a token's "-" is no place to wrap) unless one is longer than a
// phone's line: a narrow screen wraps it between its parts, not inside a word or the token.
function breakableUrl(url) {
  return url.split(/(?<=\/)(?!\/)|(?=[.?&][^./]*$)/).flatMap((part, i) => {
    const shown = part.length <= 40 ? element("span", { class: "url-part", text: part }) : part;
    return i ? [element("wbr"), shown] : [shown];
  });
}

function when(seconds) {
  return new Date(seconds * 1000).toLocaleString();
}

// "in 12 s", "in 3 min", or the date for later than an hour from now.
function soon(seconds) {
  const wait = seconds - Date.now() / 1000;
  if (wait < 1) return "now";
  if (wait < 60) return `in ${Math.round(wait)} s`;
  if (wait < 3600) return `in ${Math.round(wait / 60)} min`;
  return when(seconds);
}

async function copy(text, button) {
  try { await navigator.clipboard.writeText(text); button.textContent = "Copied"; }
  catch (e) { button.textContent = "Select and copy"; }
  setTimeout(() => { button.textContent = "Copy"; }, 1500);
}

// -- sign-up --------------------------------------------------------------------------------

function show() {
  $("signup").hidden = Boolean(token);
  $("dashboard").hidden = !token;
  $("signout").hidden = !token;
  if (token) loadDashboard();
}

$("signup-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("signup-error").textContent = "";
  try {
    const data = await api("POST", "/api/accounts", { name: $("signup-name").value });
    token = data.token;
    store.setItem("feedmesh-token", token);
    show();
  } catch (error) { $("signup-error").textContent = error.message; }
});

$("token-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  token = $("token-input").value.trim();
  try { await api("GET", "/api/accounts/me"); store.setItem("feedmesh-token", token); show(); }
  catch (error) { token = null; $("signup-error").textContent = error.message; }
});

$("signout").addEventListener("click", () => { store.removeItem("feedmesh-token"); token = null; show(); });

// -- dashboard ------------------------------------------------------------------------------

async function loadDashboard() {
  try {
    const me = await api("GET", "/api/accounts/me");
    $("welcome").textContent = `Signed in as ${me.account.name || "account " + me.account.id}.`;
    $("token-value").textContent = token;
  } catch (error) {
    if (error.status === 401) { store.removeItem("feedmesh-token"); token = null; show(); return; }
  }
  await Promise.all([loadSubscriptions(), loadSources()]);
}

async function loadSubscriptions() {
  const data = await api("GET", "/api/subscriptions");
  const list = $("subscriptions");
  list.replaceChildren();
  if (!data.subscriptions.length) list.append(element("li", { text: "None yet: write a query above." }));
  for (const sub of data.subscriptions) list.append(subscriptionItem(sub));
}

// What the feed holds now and how far back its archive (RFC 5005 prev-archive) reaches.
function feedHolds(sub) {
  const feed = sub.feed || {};
  const holds = feed.holds == null ? "its reflector cannot be reached just now"
    : `holds ${feed.holds} of ${sub.keep}` + (feed.ttl_minutes ? ` · readers asked to poll every ${feed.ttl_minutes} min` : "");
  const since = feed.archive_since == null ? "no stored entries yet"
    : "older matches in its archive back to " + new Date(feed.archive_since * 1000).toLocaleString();
  return `feed ${holds} · ${since}`;
}

function subscriptionItem(sub) {
  const matches = element("ul", { class: "matches", "data-testid": "matches-" + sub.id });
  const urls = Object.entries(sub.feed_urls).map(([kind, url]) => {
    const button = element("button", { class: "copy", type: "button", text: "Copy" });
    button.addEventListener("click", () => copy(url, button));
    return element("div", { class: "feed-url" }, element("span", { text: kind.toUpperCase() }),
                   element("code", { class: "feed-link" }, ...breakableUrl(url)), button);
  });
  const refresh = element("button", { class: "secondary", type: "button", text: "Show recent matches",
                                      "data-testid": "show-matches-" + sub.id });
  refresh.addEventListener("click", () => loadMatches(sub.id, matches));
  const remove = element("button", { class: "danger", type: "button", text: "Delete" });
  remove.addEventListener("click", async () => {
    if (!confirm(`Delete "${sub.name || sub.query}"? Its feed URL will stop working.`)) return;
    await api("DELETE", "/api/subscriptions/" + sub.id);
    loadSubscriptions();
  });
  const newUrl = element("button", { class: "secondary", type: "button", text: "New feed URL",
                                     "data-testid": "new-url-" + sub.id });
  newUrl.addEventListener("click", async () => {
    if (!confirm("Replace this feed's URL? The old one stops working (for a URL that leaked).")) return;
    await api("PATCH", "/api/subscriptions/" + sub.id, { new_url: true });
    loadSubscriptions();
  });
  const edit = element("button", { class: "secondary", type: "button", text: "Edit",
                                   "data-testid": "edit-" + sub.id });
  const push = element("button", { class: "secondary", type: "button", text: "Push",
                                   "data-testid": "push-" + sub.id });
  const pushPanel = element("div", { class: "push", "data-testid": "push-panel-" + sub.id });
  const item = element("li", { "data-testid": "subscription", "data-id": sub.id },
                       element("strong", { text: sub.name || sub.query }),
                       element("div", { class: "meta", text: `query: ${sub.normalized} · keeps ${sub.keep} entries` }),
                       element("div", { class: "meta", "data-testid": "holds-" + sub.id, text: feedHolds(sub) }),
                       ...urls, refresh, " ", edit, " ", push, " ", newUrl, " ", remove, matches, pushPanel);
  edit.addEventListener("click", () => item.append(editForm(sub)));
  push.addEventListener("click", () => loadPush(sub.id, pushPanel));
  return item;
}

// -- push: webhooks (with their delivery log and a test button) and WebSub subscribers ------

function deliveryLine(d) {
  const outcome = d.status ? `HTTP ${d.status}` : "no answer";
  const what = d.entries ? `${d.entries} entr${d.entries === 1 ? "y" : "ies"}` : "test";
  return element("li", { class: d.ok ? "ok" : "failed", "data-testid": "delivery" },
                 `${when(d.at)} · ${what} · attempt ${d.attempt} · ${outcome}` +
                 (d.error ? ` · ${d.error}` : "") + ` · ${Math.round(d.elapsed_ms)} ms`);
}

async function loadPush(id, panel) {
  const [hooks, websub] = await Promise.all([api("GET", `/api/subscriptions/${id}/webhooks`),
                                             api("GET", `/api/subscriptions/${id}/websub`)]);
  const url = element("input", { type: "url", placeholder: "https://example.com/hook", "aria-label": "webhook URL",
                                 "data-testid": "webhook-url-" + id });
  const problem = element("p", { class: "error", role: "alert" });
  const secret = element("p", { class: "help" });
  const form = element("form", { class: "edit" }, element("label", {}, "Webhook URL ", url),
                       element("button", { type: "submit", text: "Add webhook" }), problem, secret);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    problem.textContent = "";
    try {
      const made = await api("POST", `/api/subscriptions/${id}/webhooks`, { url: url.value });
      await loadPush(id, panel);
      panel.append(element("p", { class: "help", "data-testid": "webhook-secret" },
                           "Signing secret (shown once; each delivery carries X-Feedmesh-Signature: sha256=HMAC of the body): ",
                           element("code", { text: made.webhook.secret })));
    } catch (error) { problem.textContent = error.message; }
  });
  const list = element("ul", { class: "webhooks" });
  for (const hook of hooks.webhooks) {
    const log = element("ul", { class: "deliveries", "data-testid": "deliveries-" + hook.id });
    for (const d of hook.deliveries) log.append(deliveryLine(d));
    if (!hook.deliveries.length) log.append(element("li", { text: "No deliveries yet." }));
    const test = element("button", { class: "secondary", type: "button", text: "Send test",
                                     "data-testid": "webhook-test-" + hook.id });
    test.addEventListener("click", async () => {
      await api("POST", `/api/subscriptions/${id}/webhooks/${hook.id}/test`);
      for (const ms of [500, 2000, 5000]) setTimeout(() => loadPush(id, panel), ms);
    });
    const refresh = element("button", { class: "secondary", type: "button", text: "Refresh log" });
    refresh.addEventListener("click", () => loadPush(id, panel));
    const remove = element("button", { class: "danger", type: "button", text: "Remove" });
    remove.addEventListener("click", async () => {
      await api("DELETE", `/api/subscriptions/${id}/webhooks/${hook.id}`);
      loadPush(id, panel);
    });
    list.append(element("li", { "data-testid": "webhook" }, element("code", { text: hook.url }), " ",
                        test, " ", refresh, " ", remove, log));
  }
  const subscribers = element("ul", { class: "websub" });
  for (const s of websub.subscribers) {
    const item = element("li", { "data-testid": "websub-subscriber" },
                         `${s.callback} · ${s.format}${s.signed ? " · signed" : ""} · until ${when(s.expires_at)}`);
    if (s.signed) {
      // sha256 unless its subscriber checks only sha1 (PubSubHubbub 0.4): docs/websub-hub.md
      const method = element("select", { "aria-label": "X-Hub-Signature method",
                                         "data-testid": "websub-signature-" + s.id });
      for (const m of ["sha256", "sha1", "sha384", "sha512"]) {
        const option = element("option", { value: m, text: m });
        if (m === s.signature) option.selected = true;
        method.append(option);
      }
      const problem = element("span", { class: "error", role: "alert" });
      method.addEventListener("change", async () => {
        problem.textContent = "";
        try {
          await api("PATCH", `/api/subscriptions/${id}/websub/${s.id}`, { signature: method.value });
          await loadPush(id, panel);
        } catch (error) { problem.textContent = error.message; }
      });
      item.append(" · ", element("label", {}, "X-Hub-Signature ", method), " ", problem);
    }
    subscribers.append(item);
  }
  panel.replaceChildren(element("h3", { text: "Webhooks" }), list, form,
                        element("h3", { text: "WebSub subscribers" }),
                        element("p", { class: "help", text: "Each feed URL names this hub (rel=\"hub\"): a WebSub subscriber that holds the URL can subscribe to it and gets each update pushed." }),
                        websub.subscribers.length ? subscribers : element("p", { text: "None." }));
}

function editForm(sub) {
  const query = element("input", { name: "query", maxlength: "1000", value: sub.query, "aria-label": "query" });
  const name = element("input", { name: "name", maxlength: "200", value: sub.name, "aria-label": "name" });
  const keep = element("input", { name: "keep", type: "number", min: "1", max: "100", value: String(sub.keep),
                                  "aria-label": "entries kept" });
  const problem = element("pre", { class: "error", role: "alert" });
  const form = element("form", { class: "edit", "data-testid": "edit-form-" + sub.id },
                       element("label", {}, "Query ", query), element("label", { class: "short" }, "Name ", name),
                       element("label", { class: "short" }, "Keeps ", keep),
                       element("button", { type: "submit", text: "Save" }), problem);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    problem.textContent = "";
    try {
      await api("PATCH", "/api/subscriptions/" + sub.id,
                { query: query.value, name: name.value, keep: Number(keep.value) });
      loadSubscriptions();
    } catch (error) {
      let text = error.message;
      if (error.detail && error.detail.hint) text += "\nhint: " + error.detail.hint;
      problem.textContent = text;
    }
  });
  return form;
}

$("subs-opml").addEventListener("click", async (event) => {
  event.preventDefault();
  const kind = $("subs-opml-format").value;
  const text = await api("GET", "/api/subscriptions.opml?format=" + kind);
  const link = element("a", { href: URL.createObjectURL(new Blob([text], { type: "text/x-opml" })),
                              download: `feedmesh-subscriptions-${kind}.opml` });
  link.click();
});

async function loadMatches(id, list) {
  const data = await api("GET", `/api/subscriptions/${id}/entries`);
  list.replaceChildren();
  if (!data.entries.length) list.append(element("li", { text: "No matches yet: new articles appear here as the feeds post them." }));
  for (const entry of data.entries) {
    list.append(element("li", {}, element("a", { href: entry.link, text: entry.title || entry.link, rel: "noopener" }),
                        element("span", { class: "meta", text: ` — ${entry.feed_title} · ${when(entry.first_seen_at)}` })));
  }
}

// -- query with live preview ----------------------------------------------------------------

let previewTimer = null;
let previewSeq = 0;

function showQueryError(query, detail, message) {
  let text = message;
  if (detail && Number.isInteger(detail.position)) {
    const start = Math.max(0, detail.position - 30);
    text += "\n  " + query.slice(start, start + 60) + "\n  " + " ".repeat(detail.position - start) + "^";
  }
  if (detail && detail.hint) text += "\nhint: " + detail.hint;
  $("query-error").textContent = text;
}

async function preview() {
  const query = $("query-input").value;
  const seq = ++previewSeq;
  $("query-error").textContent = "";
  if (!query.trim()) { $("preview-summary").textContent = ""; $("preview-list").replaceChildren(); return; }
  try {
    const data = await api("POST", "/api/preview", { query });
    if (seq !== previewSeq) return;
    $("preview-summary").textContent =
      `${data.matched} of the ${data.searched} most recent articles match ${data.normalized}`;
    $("preview-list").replaceChildren(...data.matches.slice(0, 10).map((m) => {
      const link = element("a", { href: m.link, rel: "noopener" }, ...highlighted(m.title || m.link, m.terms));
      return element("li", {}, link, element("span", { class: "meta", text: " — " + m.feed_title }),
                     element("div", { class: "summary" }, ...highlighted(m.summary, m.terms)));
    }));
  } catch (error) {
    if (seq !== previewSeq) return;
    $("preview-summary").textContent = "";
    $("preview-list").replaceChildren();
    showQueryError(query, error.detail, error.message);
  }
}

// The text split into plain parts and <mark>ed terms (why the entry matched); never HTML.
// Matching is by word, so is marking: a term marks whole words only ("law" not in "Flawed"),
// a prefix term ("music*") the words it starts, a phrase its words with anything between
// them that is not a letter or digit. Scripts written without spaces match anywhere.
const WORD_CHAR = "[\\p{L}\\p{M}\\p{N}]";
const UNSPACED = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}]/u;

function termPattern(term) {
  const prefix = term.endsWith("*");
  const words = term.replace(/^"|"$/g, "").replace(/\*$/, "").split(/\s+/).filter(Boolean)
    .map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  if (!words.length || (words.length === 1 && words[0].length < 2)) return null;
  const body = words.join(`(?:(?!${WORD_CHAR}).)+`);
  if (UNSPACED.test(term)) return body;
  return `(?<!${WORD_CHAR})${body}${prefix ? WORD_CHAR + "*" : `(?!${WORD_CHAR})`}`;
}

function highlighted(text, terms) {
  const patterns = (terms || []).map(termPattern).filter(Boolean);
  if (!patterns.length || !text) return [text || ""];
  const pattern = new RegExp(`(${patterns.join("|")})`, "giu");
  return text.split(pattern).map((part, i) => (i % 2 ? element("mark", { text: part }) : part));
}

$("query-input").addEventListener("input", () => {
  clearTimeout(previewTimer);
  previewTimer = setTimeout(preview, 250);
});

$("sub-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const query = $("query-input").value;
  try {
    await api("POST", "/api/subscriptions", { query, name: $("sub-name").value });
    $("query-input").value = ""; $("sub-name").value = "";
    $("preview-summary").textContent = ""; $("preview-list").replaceChildren();
    await loadSubscriptions();
  } catch (error) { showQueryError(query, error.detail, error.message); }
});

// -- sources ----------------------------------------------------------------------------------

async function loadSources() {
  const data = await api("GET", "/api/sources");
  $("sources").replaceChildren(...data.sources.map((s) => {
    const remove = element("button", { class: "danger", type: "button", text: "Remove",
                                       "data-testid": "remove-source-" + s.id });
    remove.addEventListener("click", async () => {
      if (!confirm(`Stop following ${s.title || s.url}?`)) return;
      await api("DELETE", "/api/sources/" + s.id);
      loadSources();
    });
    return element("li", { "data-testid": "source", "data-id": s.id },
      element("strong", { text: s.title || s.url }), " ", remove,
      element("div", { class: "meta", text: (s.category ? s.category + " · " : "") + s.url }),
      element("div", { class: "meta", "data-testid": "crawl-state", text: crawlState(s) }),
      element("div", { class: "meta", "data-testid": "next-fetch",
                       text: s.next_fetch_at ? "next fetch: " + soon(s.next_fetch_at) : "" }));
  }));
  const fetched = data.sources.filter((s) => s.last_fetched_at).length;
  const failing = data.sources.filter((s) => s.errors || !s.active).length;
  $("sources-summary").textContent = data.sources.length
    ? `The hub crawls ${data.sources.length} feed${data.sources.length === 1 ? "" : "s"} for you: ` +
      `${fetched} fetched, ${failing} with problems, ${data.sources.length - fetched} not fetched yet.`
    : "You follow no feeds yet.";
}

// How a source's fetching goes: the last fetch (when, what came of it) and its failures in a row.
function crawlState(s) {
  if (!s.last_fetched_at) return s.active ? "not fetched yet" : "not crawled: " + (s.last_error || s.last_outcome);
  const last = "last fetch: " + ago(s.last_fetched_at) + " (" + (s.last_outcome || "ok") + ")";
  if (!s.active) return last + " · no longer crawled: " + (s.last_error || s.last_outcome);
  return s.errors ? `${last} · problem (${s.errors} failed in a row): ${s.last_error}` : last;
}

// "12 s ago", "3 min ago", or the date for longer than an hour ago.
function ago(seconds) {
  const past = Date.now() / 1000 - seconds;
  if (past < 60) return Math.max(0, Math.round(past)) + " s ago";
  if (past < 3600) return Math.round(past / 60) + " min ago";
  return when(seconds);
}

$("source-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("source-error").textContent = "";
  try { await api("POST", "/api/sources", { url: $("source-url").value }); $("source-url").value = ""; loadSources(); }
  catch (error) { $("source-error").textContent = error.message; }
});

$("opml-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("source-error").textContent = "";
  const file = $("opml-file").files[0];
  if (!file) { $("source-error").textContent = "choose an OPML file first"; return; }
  try {
    const data = await api("POST", "/api/opml", undefined, await file.text());
    $("source-status").textContent = `Imported ${data.added} feeds` +
      (data.already_followed ? `; ${data.already_followed} you already followed` : "") +
      (data.skipped.length ? `; skipped ${data.skipped.length}: ${data.skipped.slice(0, 3).join("; ")}` : "");
    loadSources();
  } catch (error) { $("source-error").textContent = error.message; }
});

$("opml-export").addEventListener("click", async (event) => {
  event.preventDefault();
  const text = await api("GET", "/api/opml");
  const link = element("a", { href: URL.createObjectURL(new Blob([text], { type: "text/x-opml" })), download: "feedmesh.opml" });
  link.click();
});

document.querySelectorAll("button[data-copy-from]").forEach((button) =>
  button.addEventListener("click", () => copy($(button.dataset.copyFrom).textContent, button)));

show();
