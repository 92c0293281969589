// The agent-sdk console: reads /v1/connections, /v1/metrics, /v1/sessions; acts through POST routes.
// No framework, no build step; text from servers reaches the page through textContent only.
"use strict";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "agent-sdk-token";
const WINDOW_S = 600; // charts show the last ten minutes
let operator = false;
let stopped = false;
const samples = []; // [{t, calls: {conn: n}, errors: {conn: n}, buckets: {conn: [[le, count]]}}]

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
    if (c.transport !== "account") head.append(el("button", { class: "restart", text: "Restart", onclick: () => restart(c.name) }));
  }
  const box = el("div", { class: "conn", id: "conn-" + c.name, "data-state": c.state }, head);
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

function readInput() {
  const input = {};
  for (const node of $("run-fields").querySelectorAll("[data-name]")) {
    const { name, kind, required } = node.dataset;
    if (kind === "boolean") { input[name] = node.checked; continue; }
    if (node.value === "" && !required) continue;
    if (kind === "integer") input[name] = parseInt(node.value, 10);
    else if (kind === "number") input[name] = Number(node.value);
    else if (kind === "json" || kind === "enum") input[name] = JSON.parse(node.value);
    else input[name] = node.value;
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
  try {
    renderResult(await post(`/v1/tools/${encodeURIComponent(name)}`, { input: readInput() }));
  } catch (e) {
    $("run-result").replaceChildren(el("p", { class: "is-error", text: e.message }));
  }
}

// ---- metrics: rate, p50/p99 and errors from Prometheus text ----

function parseMetrics(text) {
  const sample = { t: Date.now() / 1000, calls: {}, errors: {}, buckets: {} };
  for (const line of text.split("\n")) {
    const m = /^(\w+)\{([^}]*)\}\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const pair of m[2].matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]] = pair[2];
    const value = Number(m[3]);
    const conn = labels.connection || "(authored)";
    if (m[1] === "agent_sdk_tool_calls_total") {
      sample.calls[conn] = (sample.calls[conn] || 0) + value;
      if (labels.outcome !== "ok") sample.errors[conn] = (sample.errors[conn] || 0) + value;
    } else if (m[1] === "agent_sdk_tool_call_duration_seconds_bucket") {
      const b = (sample.buckets[conn] = sample.buckets[conn] || {});
      b[labels.le] = (b[labels.le] || 0) + value;
    }
  }
  return sample;
}

function quantile(now, then, q) {
  const les = Object.keys(now).sort((a, b) => Number(a) - Number(b));
  const delta = les.map((le) => [le, now[le] - ((then && then[le]) || 0)]);
  const total = delta.length ? delta[delta.length - 1][1] : 0;
  if (!total) return null;
  const hit = delta.find(([, n]) => n >= q * total);
  return hit && hit[0] !== "+Inf" ? Number(hit[0]) * 1000 : null;
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
  const shown = last === null || last === undefined ? "–" : unit === "ms" ? "≤ " + last.toFixed(1) : unit ? last.toFixed(2) : String(Math.round(last));
  return el("div", { class: "chart" }, el("div", { class: "label", text: `${label}: ${shown} ${unit}`.trim() }), svg);
}

function renderCharts() {
  const charts = [];
  const conns = new Set(samples.flatMap((s) => Object.keys(s.calls)));
  for (const conn of [...conns].sort()) {
    const rate = [], errs = [], p50 = [], p99 = [];
    for (let i = 1; i < samples.length; i++) {
      const a = samples[i - 1], b = samples[i], dt = Math.max(1e-3, b.t - a.t);
      rate.push(((b.calls[conn] || 0) - (a.calls[conn] || 0)) / dt);
      errs.push((b.errors[conn] || 0) - (a.errors[conn] || 0));
      p50.push(quantile(b.buckets[conn] || {}, a.buckets[conn], 0.5));
      p99.push(quantile(b.buckets[conn] || {}, a.buckets[conn], 0.99));
    }
    if (!rate.length) continue;
    charts.push(el("h3", { class: "muted", text: conn }), sparkline("calls", rate, "/s"), sparkline("p50", p50, "ms"), sparkline("p99", p99, "ms"), sparkline("errors", errs, ""));
  }
  $("charts").replaceChildren(...charts);
}

async function refreshMetrics() {
  const response = await api("/v1/metrics", { headers: { Accept: "text/plain" } });
  if (response.status === 404) {
    $("metrics-note").textContent = "This gateway serves no /v1/metrics.";
    return;
  }
  samples.push(parseMetrics(await response.text()));
  while (samples.length > 2 && samples[samples.length - 1].t - samples[0].t > WINDOW_S) samples.shift();
  $("metrics-note").textContent = `From /v1/metrics, every 5 s over the last ${WINDOW_S / 60} minutes.`;
  renderCharts();
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
  if (operator) {
    const logged = await (await api("/v1/failures")).json();
    for (const f of logged.failures || []) failures.push({ at: f.at, text: `${f.level}: ${f.message}`, requestId: f.requestId });
  }
  failures.sort((a, b) => (a.at < b.at ? 1 : -1));
  $("failures").replaceChildren(...failures.slice(0, 15).map((f) => el("li", { text: `${f.at} ${f.text}${f.requestId ? " (request " + f.requestId + ")" : ""}` })));
  if (!failures.length) $("failures").replaceChildren(el("li", { class: "muted", text: "None." }));
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
  problem("");
  showInfo().catch((e) => problem(e.message, "showInfo"));
  every(3000, refreshConnections);
  every(5000, refreshMetrics);
  every(5000, refreshSessions);
}

document.addEventListener("DOMContentLoaded", () => {
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value);
    $("token-form").hidden = true;
    start();
  });
  $("run-form").addEventListener("submit", submitRun);
  $("run-close").addEventListener("click", () => $("run-dialog").close());
  start();
});
