// The agent-sdk console: reads /v1/connections, /v1/metrics, /v1/sessions; acts through POST routes.
// No framework, no build step; text from servers reaches the page through textContent only.
"use strict";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "agent-sdk-token";
const WINDOW_S = 600; // charts show the last ten minutes
let operator = false;
let stopped = false;
// `?refresh=N` polls every N seconds (at least 1), 5 by default.
const REFRESH_S = Math.max(1, Number(new URLSearchParams(window.location.search).get("refresh")) || 5);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c) node.append(c);
  return node;
}

async function api(path, options) {
  const headers = Object.assign({ Accept: "application/json" }, (options && options.headers) || {});
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  else headers["X-Agent-Sdk-Console"] = "before-token"; // its 401 is not a failure (docs/console.md)
  const response = await fetch(path, Object.assign({}, options, { headers, credentials: "same-origin" }));
  if (response.status === 401) {
    $("token-form").hidden = false;
    stopped = true;
    throw new Error("the gateway wants its bearer token");
  }
  return response;
}

async function post(path, body) {
  const response = await api(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body || {}),
  });
  const data = await response.json();
  if (!response.ok && !("toolName" in data)) throw new Error(data.message || data.error || "HTTP " + response.status);
  return data;
}

const problems = new Map(); // source -> sentence; a source's next success clears its own

function problem(text, source = "action") {
  if (text) problems.set(source, text);
  else problems.delete(source);
  const p = $("problem");
  p.textContent = [...problems.values()].join(" · ");
  p.hidden = problems.size === 0;
}

// ---- connections ----

function oauthLine(o) {
  if (!o) return null;
  let text = o.loggedIn ? "OAuth: logged in" : "OAuth: not logged in";
  if (o.loggedIn && o.expiresIn !== null) text += o.expiresIn > 0 ? `, expires in ${o.expiresIn}s` : ", expired";
  if (o.refreshToken) text += ", refresh token";
  text += ` (store: ${o.store})`;
  return el("span", { class: "muted oauth", text });
}

function renderConnection(c) {
  const head = el(
    "div",
    { class: "conn-head" },
    el("strong", { text: c.name }),
    el("span", { class: "muted", text: c.transport + (c.advertised ? ", advertised" : "") + (c.hostOnly ? ", host only" : "") }),
    el("span", { class: "state", "data-state": c.state, text: c.state.replace("_", " ") }),
    oauthLine(c.oauth),
  );
  if (operator) {
    if (c.oauth) head.append(el("button", { class: "login", "data-connection": c.name, text: "Log in", onclick: () => login(c.name) }));
    if (c.oauth && c.oauth.loggedIn) head.append(el("button", { class: "logout", "data-connection": c.name, text: "Log out", onclick: () => logout(c.name) }));
    if (c.transport !== "account") head.append(el("button", { class: "restart", text: "Restart", onclick: () => restart(c.name) }));
  }
  const box = el("div", { class: "conn", id: "conn-" + c.name, "data-state": c.state }, head);
  const details = [`opens ${c.opens}`, `failures ${c.failures}`];
  if (c.pid) details.push(`pid ${c.pid}`);
  if (c.protocolVersion) details.push(`protocol ${c.protocolVersion}`);
  box.append(el("div", { class: "muted details", text: details.join(" · ") }));
  if (c.cause) box.append(el("div", { class: "cause", text: c.cause }));
  for (const d of c.drift || []) {
    // mcp.lock drift: the sentence, and the diff of the reviewed definition against the live one.
    box.append(el("div", { class: "drift cause", "data-tool": d.tool || "", text: (d.heldBack ? "held back: " : "") + d.sentence }));
    if (d.diff) box.append(el("pre", { class: "drift-diff", text: d.diff }));
  }
  if (c.tools) {
    const list = el("ul", { class: "tools" });
    for (const t of c.tools) {
      const item = el("li", { title: t.description || "" }, t.name);
      if (operator && c.advertised) item.append(el("button", { class: "run", "data-tool": t.name, text: "Run", onclick: () => openRun(t) }));
      list.append(item);
    }
    box.append(list);
  }
  return box;
}

async function refreshConnections() {
  const response = await api("/v1/connections");
  const data = await response.json();
  if (!data.ok) throw new Error(data.message);
  operator = data.operator;
  $("who").textContent = `you: ${data.principal}${data.operator ? " (operator)" : ""}`;
  $("connections").replaceChildren(...data.connections.map(renderConnection));
  $("updated").textContent = "updated " + new Date().toLocaleTimeString();
}

async function restart(name) {
  try {
    await post(`/v1/connections/${encodeURIComponent(name)}/restart`);
    await refreshConnections();
  } catch (e) {
    problem(e.message);
  }
}

async function logout(name) {
  try {
    const data = await post(`/v1/connections/${encodeURIComponent(name)}/logout`);
    problem(data.revocationError ? `${name}: logged out here; the server did not confirm the revocation (${data.revocationError})` : "");
    await refreshConnections();
  } catch (e) {
    problem(e.message);
  }
}

async function login(name) {
  try {
    const data = await post(`/v1/connections/${encodeURIComponent(name)}/login`);
    window.location.assign(data.authorizationUrl);
  } catch (e) {
    problem(e.message);
  }
}

// ---- running a tool from its input schema ----

function fieldFor(name, schema, required) {
  const id = "arg-" + name;
  const label = el("label", { for: id, text: name + (required ? " *" : "") + (schema.description ? " — " + schema.description : "") });
  let input;
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  if (Array.isArray(schema.enum)) {
    input = el("select", { id });
    for (const v of schema.enum) input.append(el("option", { value: JSON.stringify(v), text: String(v) }));
    input.dataset.kind = "enum";
  } else if (type === "boolean") {
    input = el("input", { id, type: "checkbox" });
    input.dataset.kind = "boolean";
  } else if (type === "integer" || type === "number") {
    input = el("input", { id, type: "number", step: type === "integer" ? "1" : "any" });
    input.dataset.kind = type;
  } else if (type === "string") {
    input = el("input", { id, type: "text" });
    input.dataset.kind = "string";
  } else {
    input = el("textarea", { id, rows: "3", placeholder: "JSON" });
    input.dataset.kind = "json";
  }
  if (schema.default !== undefined && input.dataset.kind !== "boolean") input.value = input.dataset.kind === "json" ? JSON.stringify(schema.default) : String(schema.default);
  if (schema.default === true && input.dataset.kind === "boolean") input.checked = true;
  input.dataset.name = name;
  input.dataset.required = required ? "1" : "";
  return el("div", {}, label, input);
}

function openRun(tool) {
  const schema = tool.inputSchema || {};
  const required = new Set(schema.required || []);
  $("run-title").textContent = tool.name;
  $("run-form").dataset.tool = tool.name;
  $("run-fields").replaceChildren(...Object.entries(schema.properties || {}).map(([n, s]) => fieldFor(n, s || {}, required.has(n))));
  $("run-result").replaceChildren();
  $("run-dialog").showModal();
}

class FormProblem extends Error {}

// The form's values as the tool's input; a FormProblem naming the field when one cannot be sent as it is
// (an empty required number is refused, never sent as 0).
function readInput() {
  const input = {};
  for (const node of $("run-fields").querySelectorAll("[data-name]")) {
    const { name, kind, required } = node.dataset;
    node.removeAttribute("aria-invalid");
    const refuse = (why) => {
      node.setAttribute("aria-invalid", "true");
      node.focus();
      throw new FormProblem(`${name} ${why}`);
    };
    if (kind === "boolean") { input[name] = node.checked; continue; }
    if (node.value === "" && kind !== "string") {
      // An invalid number leaves the field's value empty too: say which it is.
      if (node.validity && node.validity.badInput) refuse("is not a number");
      if (required) refuse(kind === "json" ? "is required: enter a JSON value" : `is required: enter ${kind === "integer" ? "an integer" : "a number"}`);
      continue;
    }
    if (node.value === "" && !required) continue;
    if (kind === "integer") {
      const n = Number(node.value);
      if (!Number.isInteger(n)) refuse(`is not an integer (${node.value})`);
      input[name] = n;
    } else if (kind === "number") input[name] = Number(node.value);
    else if (kind === "json" || kind === "enum") {
      try {
        input[name] = JSON.parse(node.value);
      } catch {
        refuse("is not valid JSON");
      }
    } else input[name] = node.value;
  }
  return input;
}

function renderResult(envelope) {
  const out = $("run-result");
  const parts = [];
  if (!envelope.ok) {
    parts.push(el("p", { class: "is-error", text: `${envelope.error}: ${envelope.message}` }));
    return out.replaceChildren(...parts);
  }
  const result = envelope.result || {};
  parts.push(el("p", { class: envelope.isError ? "is-error" : "muted", text: `${envelope.isError ? "tool error" : "ok"} in ${envelope.durationMs} ms` }));
  for (const item of result.content || []) {
    if (item.type === "text") parts.push(el("pre", { class: "result-text", text: item.text }));
    else if (item.type === "image" && /^image\/(png|jpeg|gif|webp)$/.test(item.mimeType)) parts.push(el("img", { alt: "image result", src: `data:${item.mimeType};base64,${item.data}` }));
    else parts.push(el("pre", { text: JSON.stringify(item, null, 2) }));
  }
  if (result.structuredContent !== undefined) parts.push(el("pre", { class: "result-json", text: JSON.stringify(result.structuredContent, null, 2) }));
  if (!result.content && result.structuredContent === undefined) parts.push(el("pre", { class: "result-json", text: JSON.stringify(result, null, 2) }));
  out.replaceChildren(...parts);
}

async function submitRun(event) {
  event.preventDefault();
  const name = $("run-form").dataset.tool;
  let input;
  try {
    input = readInput();
  } catch (e) {
    $("run-result").replaceChildren(el("p", { class: "is-error form-problem", text: `Not sent: ${e.message}` }));
    return;
  }
  try {
    renderResult(await post(`/v1/tools/${encodeURIComponent(name)}`, { input }));
  } catch (e) {
    $("run-result").replaceChildren(el("p", { class: "is-error", text: e.message }));
  }
}

// ---- metrics: rate, p50/p99 and errors from Prometheus text, kept apart per replica ----
// Behind a load balancer each scrape may reach another replica, with its own counters: differences are
// taken between two scrapes of the same replica only (the agent-sdk-replica header names it), and the
// figure shown is the sum of each replica's latest rate (docs/console.md#replicas).

// Only the samples the page reads (prometheus_client's `name[]` filter): a scrape stays small.
const METRICS_PATH = "/v1/metrics?" + ["agent_sdk_tool_calls_total", ...["bucket", "sum", "count"].map((x) => "agent_sdk_tool_call_duration_seconds_" + x)].map((n) => "name%5B%5D=" + n).join("&");

function parseMetrics(text) {
  const sample = { t: Date.now() / 1000, tools: {} };
  for (const line of text.split("\n")) {
    const m = /^(agent_sdk_tool_call\w*)\{([^}]*)\}\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const pair of m[2].matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]] = pair[2];
    const value = Number(m[3]);
    const conn = labels.connection || "(authored)";
    const key = conn + "\u0000" + (labels.tool || "");
    const s = (sample.tools[key] = sample.tools[key] || { conn, tool: labels.tool || "", calls: 0, errors: 0, sum: 0, count: 0, buckets: {} });
    if (m[1] === "agent_sdk_tool_calls_total") {
      s.calls += value;
      if (labels.outcome !== "ok") s.errors += value;
    } else if (m[1] === "agent_sdk_tool_call_duration_seconds_bucket") {
      s.buckets[labels.le] = (s.buckets[labels.le] || 0) + value;
    } else if (m[1] === "agent_sdk_tool_call_duration_seconds_sum") s.sum += value;
    else if (m[1] === "agent_sdk_tool_call_duration_seconds_count") s.count += value;
  }
  return sample;
}

function addInto(into, from) {
  into.calls += from.calls; into.errors += from.errors; into.sum += from.sum; into.count += from.count;
  for (const [le, n] of Object.entries(from.buckets)) into.buckets[le] = (into.buckets[le] || 0) + n;
  return into;
}

const blank = () => ({ calls: 0, errors: 0, sum: 0, count: 0, buckets: {} });

function byConnection(sample) {
  const out = {};
  for (const s of Object.values(sample.tools)) addInto((out[s.conn] = out[s.conn] || blank()), s);
  return out;
}

function quantile(buckets, q) {
  const les = Object.keys(buckets).sort((a, b) => Number(a) - Number(b));
  const total = les.length ? buckets[les[les.length - 1]] : 0;
  if (!total) return null;
  const hit = les.find((le) => buckets[le] >= q * total);
  return hit && hit !== "+Inf" ? Number(hit) * 1000 : null;
}

const STALE_S = 60; // a replica not scraped for this long (gone, or out of the balancer) no longer counts
// A replica's rate is taken over the span from its oldest kept scrape to its newest, at least MIN_SPAN_S and
// about RATE_SPAN_S long: two scrapes close together (timers bunching on a busy browser, or the balancer
// sending two polls to one replica) would turn a burst of calls into a spike.
const MIN_SPAN_S = 2;
const RATE_SPAN_S = 10;
const replicas = new Map(); // replica id -> {last: sample, kept: [sample], rates: {conn: {calls, errors, buckets}} | null}
const series = []; // [{t, conns: {conn: {rate, errors, p50, p99}}}]

function wentBack(now, then) {
  for (const [conn, b] of Object.entries(then)) if ((now[conn] || blank()).calls < b.calls) return true;
  return false;
}

function takeSample(id, sample) {
  const known = replicas.get(id);
  let kept = known ? known.kept : [];
  let rates = known ? known.rates : null;
  if (kept.length && wentBack(byConnection(sample), byConnection(kept[kept.length - 1]))) {
    kept = []; // the counters went back: this replica restarted, its series starts again
    rates = null;
  }
  kept.push(sample);
  while (kept.length > 2 && sample.t - kept[1].t >= RATE_SPAN_S) kept.shift();
  const first = kept[0];
  if (kept.length > 1 && sample.t - first.t >= MIN_SPAN_S) {
    const dt = sample.t - first.t, now = byConnection(sample), then = byConnection(first);
    rates = {};
    for (const [conn, a] of Object.entries(now)) {
      const b = then[conn] || blank();
      const buckets = {};
      for (const [le, n] of Object.entries(a.buckets)) buckets[le] = n - (b.buckets[le] || 0);
      rates[conn] = { calls: (a.calls - b.calls) / dt, errors: ((a.errors - b.errors) * 60) / dt, buckets };
    }
  }
  replicas.set(id, { last: sample, kept, rates });
  for (const [other, r] of replicas) if (sample.t - r.last.t > STALE_S) replicas.delete(other);
  const conns = {};
  let any = false;
  for (const r of replicas.values()) {
    if (!r.rates) continue;
    any = true;
    for (const [conn, x] of Object.entries(r.rates)) {
      const c = (conns[conn] = conns[conn] || { rate: 0, errors: 0, buckets: {} });
      c.rate += x.calls; c.errors += x.errors;
      for (const [le, n] of Object.entries(x.buckets)) c.buckets[le] = (c.buckets[le] || 0) + n;
    }
  }
  if (!any) return;
  for (const c of Object.values(conns)) { c.p50 = quantile(c.buckets, 0.5); c.p99 = quantile(c.buckets, 0.99); }
  series.push({ t: sample.t, conns });
  while (series.length > 2 && series[series.length - 1].t - series[0].t > WINDOW_S) series.shift();
}

function sparkline(label, values, unit) {
  const w = 160, h = 36, max = Math.max(1e-9, ...values.filter((v) => v !== null));
  const points = values.map((v, i) => `${(i * w) / Math.max(1, values.length - 1)},${h - ((v || 0) * h) / max}`).join(" ");
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("width", w); svg.setAttribute("height", h); svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  line.setAttribute("points", points);
  svg.append(line);
  const last = values[values.length - 1];
  // Latencies come from histogram buckets: the figure is the bucket's upper bound, hence "≤".
  const shown = last === null || last === undefined ? "–" : unit === "ms" ? "≤ " + last.toFixed(1) : last.toFixed(2);
  return el("div", { class: "chart" }, el("div", { class: "label", text: `${label}: ${shown} ${unit}`.trim() }), svg);
}

function renderCharts() {
  const charts = [];
  const conns = new Set(series.flatMap((p) => Object.keys(p.conns)));
  for (const conn of [...conns].sort()) {
    const pick = (k) => series.map((p) => (p.conns[conn] ? p.conns[conn][k] : k.startsWith("p") ? null : 0));
    charts.push(el("h3", { class: "muted", text: conn }), sparkline("calls", pick("rate"), "/s"), sparkline("p50", pick("p50"), "ms"), sparkline("p99", pick("p99"), "ms"), sparkline("errors", pick("errors"), "/min"));
  }
  $("charts").replaceChildren(...charts);
  if (series.length) $("charts").dataset.t = String(series[series.length - 1].t);
  $("charts").dataset.replicas = String(replicas.size);
}

const ms = (v) => (v < 1 ? v.toFixed(3) : v.toFixed(1));

function renderToolTable() {
  // Since each replica started: the sums over the replicas' latest scrapes.
  const tools = {};
  for (const r of replicas.values()) for (const [key, s] of Object.entries(r.last.tools)) addInto((tools[key] = tools[key] || Object.assign(blank(), { conn: s.conn, tool: s.tool })), s);
  const rows = Object.values(tools).sort((a, b) => (a.conn + a.tool < b.conn + b.tool ? -1 : 1)).map((s) => {
    const p99 = quantile(s.buckets, 0.99);
    return el("tr", { "data-tool": s.tool }, el("td", { text: s.conn }), el("td", { text: s.tool }), el("td", { class: "calls", text: String(s.calls) }), el("td", { class: "errors", text: String(s.errors) }), el("td", { text: s.count ? ms((s.sum / s.count) * 1000) : "–" }), el("td", { text: p99 === null ? "–" : "≤ " + p99.toFixed(1) }));
  });
  const head = el("tr", {}, ...["connection", "tool", "calls", "errors", "mean ms", "p99 ms"].map((t) => el("th", { text: t })));
  $("tool-table").replaceChildren(...(rows.length ? [el("table", {}, head, ...rows)] : [el("p", { class: "muted", text: "No tool calls yet." })]));
}

async function refreshMetrics() {
  const response = await api(METRICS_PATH, { headers: { Accept: "text/plain" } });
  if (response.status === 404) {
    $("metrics-note").textContent = "This gateway serves no /v1/metrics.";
    return;
  }
  if (response.status === 403) {
    $("metrics-note").textContent = "The metrics are for operators: open the console with an operator token.";
    return;
  }
  const sample = parseMetrics(await response.text());
  takeSample(response.headers.get("agent-sdk-replica") || "this gateway", sample);
  const many = replicas.size > 1 ? `, summed over ${replicas.size} replicas` : "";
  $("metrics-note").textContent = `From /v1/metrics, every ${REFRESH_S} s over the last ${WINDOW_S / 60} minutes${many}.`;
  renderCharts();
  renderToolTable();
}

// ---- the caller's sessions and their events; failures ----

async function refreshSessions() {
  const response = await api("/v1/sessions");
  const data = await response.json();
  const sessions = (data.sessions || []).slice(0, 10);
  const rows = [];
  const failures = [];
  for (const s of sessions) {
    const id = s.sessionId || s.id;
    const ev = await (await api(`/v1/session/${encodeURIComponent(id)}/events?format=json`)).json();
    const events = ev.events || [];
    rows.push(el("tr", {}, el("td", { text: id }), el("td", { text: s.title || "" }), el("td", { text: s.status || "" }), el("td", { text: events.slice(-3).map((e) => e.type).join(", ") })));
    for (const e of events) {
      if (e.type === "turn.failed" || (e.type === "action.result" && e.data && e.data.isError)) {
        const d = e.data || {};
        failures.push({ at: e.at, text: `${e.sessionId} ${e.type}: ${d.message || d.error || ""}`, requestId: d.requestId });
      }
    }
  }
  $("sessions").replaceChildren(rows.length ? el("table", {}, el("tr", {}, el("th", { text: "session" }), el("th", { text: "title" }), el("th", { text: "status" }), el("th", { text: "last events" })), ...rows) : el("p", { class: "muted", text: "No sessions yet." }));
  if (operator) await refreshOperatorViews();
  if (operator) {
    const logged = await (await api("/v1/failures")).json();
    for (const f of logged.failures || []) failures.push({ at: f.at, text: `${f.level}: ${f.message}`, requestId: f.requestId });
  }
  failures.sort((a, b) => (a.at < b.at ? 1 : -1));
  $("failures").replaceChildren(...failures.slice(0, 15).map((f) => el("li", { text: `${f.at} ${f.text}${f.requestId ? " (request " + f.requestId + ")" : ""}` })));
  if (!failures.length) $("failures").replaceChildren(el("li", { class: "muted", text: "None." }));
}

function line(entry) {
  const tail = entry.requestId ? ` (request ${entry.requestId})` : "";
  return el("li", { "data-level": entry.level, text: `${entry.at} ${entry.level} ${entry.logger}: ${entry.message}${tail}` });
}

// ---- approvals and the audit trail (docs/audit.md) ----

async function decide(id, decision) {
  try {
    await post(`/v1/approvals/${encodeURIComponent(id)}`, { decision });
    problem("");
  } catch (e) {
    problem(e.message);
  }
  await refreshOperatorViews();
}

function person(a) {
  // The display name (an email, a name, or the principal id) and, for an OAuth principal, its subject.
  const name = a.name || a.principal;
  return a.subject && a.subject !== name ? `${name} (sub ${a.subject})` : name;
}

function peerOf(a) {
  const p = a.peer || {};
  return [p.client, p.userAgent, p.session ? `session ${p.session}` : ""].filter(Boolean).join("; ");
}

function renderApprovals(list) {
  // Every value goes in as text (`el`'s textContent): arguments and names are the caller's, never markup.
  const rows = list.map((a) =>
    el("tr", { id: `approval-${a.id}`, "data-tool": a.tool },
      el("td", { text: a.tool }), el("td", { text: a.connection || "" }),
      el("td", { class: "arguments" }, el("pre", { text: JSON.stringify(a.arguments ?? {}, null, 1) })),
      el("td", { class: "person", text: person(a) }), el("td", { class: "peer", text: peerOf(a) }),
      el("td", { text: a.surface }), el("td", { text: a.expiresAt }),
      el("td", {}, el("button", { text: "Approve", onclick: () => decide(a.id, "approve") }),
        el("button", { text: "Deny", onclick: () => decide(a.id, "deny") }))));
  const head = el("tr", {}, ...["tool", "connection", "arguments", "person", "peer", "surface", "until", ""].map((h) => el("th", { text: h })));
  $("approvals").replaceChildren(rows.length ? el("table", {}, head, ...rows) : el("p", { class: "muted", text: "No call is waiting." }));
}

function auditQuery() {
  const query = new URLSearchParams({ limit: "20" });
  for (const [field, param] of [["audit-person", "who"], ["audit-tool", "tool"], ["audit-outcome", "outcome"]]) {
    const value = $(field).value.trim();
    if (value) query.set(param, value);
  }
  return "/v1/audit?" + query.toString();
}

function renderAudit(records) {
  const cols = ["time", "name", "surface", "target", "outcome", "approver", "durationMs"];
  const shown = (r, c) => (c === "name" ? person(r) : r[c] == null ? "" : String(r[c]));
  const rows = records.map((r) => el("tr", { "data-outcome": r.outcome }, ...cols.map((c) => el("td", { text: shown(r, c) }))));
  const head = el("tr", {}, ...cols.map((h) => el("th", { text: { target: "tool", name: "person" }[h] || h })));
  $("audit").replaceChildren(rows.length ? el("table", {}, head, ...rows) : el("p", { class: "muted", text: "No calls recorded yet." }));
}

async function refreshOperatorViews() {
  const [log, who, held, trail] = await Promise.all([
    (await api("/v1/log")).json(), (await api("/v1/principals")).json(),
    (await api("/v1/approvals")).json(), (await api(auditQuery())).json(),
  ]);
  $("operator-views").hidden = false;
  renderApprovals(held.approvals || []);
  renderAudit(trail.records || []);
  const actions = (log.actions || []).slice(0, 15);
  $("actions").replaceChildren(...(actions.length ? actions.map(line) : [el("li", { class: "muted", text: "None yet." })]));
  const recent = (log.log || []).slice(0, 50);
  $("log").replaceChildren(...(recent.length ? recent.map(line) : [el("li", { class: "muted", text: "None yet." })]));
  const rows = (who.principals || []).map((p) => el("tr", {}, el("td", { text: p.principal }), el("td", { class: "sessions", text: String(p.sessions) })));
  $("principals").replaceChildren(rows.length ? el("table", {}, el("tr", {}, el("th", { text: "principal" }), el("th", { text: "sessions" })), ...rows) : el("p", { class: "muted", text: "No sessions yet." }));
  if (who.more) $("principals").append(el("p", { class: "muted", text: "…and more (the first 100 shown)." }));
}

function every(ms, fn) {
  const tick = async () => {
    if (stopped) return;
    try {
      await fn();
      problem("", fn.name);
    } catch (e) {
      problem(e.message, fn.name);
    }
    setTimeout(tick, ms);
  };
  tick();
}

async function showInfo() {
  const info = await (await api("/v1/info")).json();
  const r = info.runtime || {};
  $("about").textContent = `${info.agent ? info.agent.name : ""} · auth ${r.auth || "?"} · runner ${r.runner || "?"} · up since ${r.startedAt || "?"}`;
}

function start() {
  stopped = false;
  problems.clear(); // a new token: the last one's refusals are past
  problem("");
  showInfo().catch((e) => problem(e.message, "showInfo"));
  every(Math.min(3, REFRESH_S) * 1000, refreshConnections);
  every(REFRESH_S * 1000, refreshMetrics);
  every(REFRESH_S * 1000, refreshSessions);
}

document.addEventListener("DOMContentLoaded", () => {
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value);
    $("token-form").hidden = true;
    start();
  });
  $("run-form").addEventListener("submit", submitRun);
  $("audit-filter").addEventListener("submit", (event) => {
    event.preventDefault();
    refreshOperatorViews().catch((e) => problem(e.message, "audit"));
  });
  $("run-close").addEventListener("click", () => $("run-dialog").close());
  start();
});
