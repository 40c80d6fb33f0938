/* Table maintenance page: a hash-routed view over the /tablemgmt/v1 REST API. No framework, no build.
 *
 * Routes:  #/                      tables with a badge per action and health; search and filters
 *          #/tables/<table id>     per-action charts over time, processes with reasons, Run now, Cancel
 *          #/dags/<dag id>         a maintenance DAG's page (the Airflow "dag" external view) -> its table
 * Every request is same-origin, so the browser sends Airflow's `_token` cookie; the API decides what the
 * user may do, and a 403 is shown as a polite notice rather than an error.
 */
"use strict";

// The page is served at <prefix>/ui/, the API at <prefix>/v1: derive one from the other so any mount works.
const PREFIX = location.pathname.replace(/\/ui(\/.*)?$/, "");
const API = PREFIX + "/v1";
const ACTIVE = new Set(["PENDING", "SUBMITTED", "RUNNING", "CANCELING"]);
const PAGE_SIZE = 25;
const REFRESH_MS = 5000;

class ApiError extends Error {
  constructor(status, detail, path) {
    super(detail);
    this.status = status;
    this.detail = detail;
    this.path = path;
  }
}

function detailText(body) {
  if (!body) return "";
  const d = body.detail !== undefined ? body.detail : body;
  if (typeof d === "string") return d;
  if (Array.isArray(d)) {
    return d.map((e) => (e && e.msg ? `${(e.loc || []).slice(1).join(".")}: ${e.msg}` : JSON.stringify(e))).join("; ");
  }
  if (d && typeof d.message === "string") return d.message;
  return JSON.stringify(d);
}

async function api(path, opts = {}) {
  const init = {
    credentials: "same-origin",
    headers: { Accept: "application/json" },
    ...opts,
  };
  if (opts.body !== undefined) {
    init.headers = { ...init.headers, "Content-Type": "application/json" };
    init.body = JSON.stringify(opts.body);
  }
  const res = await fetch(API + path, init);
  let body = null;
  const text = await res.text();
  if (text) {
    try {
      body = JSON.parse(text);
    } catch (_) {
      body = { detail: text.slice(0, 300) };
    }
  }
  if (!res.ok) throw new ApiError(res.status, detailText(body) || res.statusText, path);
  return body;
}

// --- tolerant readers: the page shows what the API returns, under the names it uses -------------------

function list(body, ...keys) {
  if (Array.isArray(body)) return body;
  for (const k of [...keys, "items", "data", "results"]) if (body && Array.isArray(body[k])) return body[k];
  return [];
}
function total(body, fallback) {
  for (const k of ["total_entries", "total", "count"]) if (body && typeof body[k] === "number") return body[k];
  return fallback;
}
function pick(obj, ...keys) {
  for (const k of keys) {
    if (!obj) return undefined;
    const v = k.split(".").reduce((o, p) => (o == null ? undefined : o[p]), obj);
    if (v !== undefined && v !== null) return v;
  }
  return undefined;
}
const tableId = (t) => pick(t, "table_id", "table", "id");
const procTime = (p) => pick(p, "instant", "created_at", "started_at");
const procReason = (p) => pick(p, "failure_reason", "reason", "error") || "";

function fmtNum(v) {
  if (v === undefined || v === null || v === "") return "–";
  if (typeof v !== "number") return String(v);
  return Number.isInteger(v) ? v.toLocaleString("en-US") : v.toLocaleString("en-US", { maximumFractionDigits: 2 });
}
function fmtBytes(v) {
  if (typeof v !== "number") return fmtNum(v);
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(v) >= 1024 && i < u.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(i ? 1 : 0)} ${u[i]}`;
}
function fmtPct(v) {
  if (typeof v !== "number") return fmtNum(v);
  return `${(v <= 1 ? v * 100 : v).toFixed(0)}%`;
}
function ago(iso) {
  if (!iso) return "never";
  const s = Math.max(0, (Date.now() - new Date(iso).getTime()) / 1000);
  if (s < 90) return `${Math.round(s)}s ago`;
  if (s < 5400) return `${Math.round(s / 60)}m ago`;
  if (s < 129600) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86400)}d ago`;
}
function when(iso) {
  if (!iso) return "–";
  const d = new Date(iso);
  return isNaN(d) ? String(iso) : d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

// --- tiny DOM helper ---------------------------------------------------------------------------------

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== undefined && c !== null && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}
const svg = (tag, attrs = {}) => {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
};
const view = () => document.getElementById("view");

// --- notices -----------------------------------------------------------------------------------------

function notify(kind, message) {
  const n = document.getElementById("notice");
  n.className = `notice ${kind}`;
  n.replaceChildren(h("span", { class: "msg" }, message), h("button", { class: "close", title: "Dismiss", onclick: () => (n.hidden = true) }, "×"));
  n.hidden = false;
}
function clearNotice() {
  document.getElementById("notice").hidden = true;
}
function explain(err, doing) {
  if (err instanceof ApiError && err.status === 403) {
    notify(
      "denied",
      `You are not allowed to ${doing}. Airflow's permissions decide who may run or cancel maintenance of a table; ` +
        `ask an Airflow admin for edit access to its DAG. (${err.detail})`,
    );
  } else if (err instanceof ApiError && err.status === 401) {
    notify("denied", "Your Airflow session has expired. Reload the page to sign in again.");
  } else if (err instanceof ApiError) {
    notify("error", `Could not ${doing}: ${err.detail} (HTTP ${err.status})`);
  } else {
    notify("error", `Could not ${doing}: ${err && err.message ? err.message : err}`);
  }
}

// --- per-action state from the process history ---------------------------------------------------------

/** Last status, last success and failing streak of each action, from processes newest first. */
function actionStates(processes) {
  const out = {};
  for (const p of processes) {
    const a = p.action;
    const s = (out[a] = out[a] || { last: null, lastSuccess: null, streak: 0, streakOpen: true });
    if (!s.last) s.last = p;
    if (p.status === "SUCCESS") {
      if (!s.lastSuccess) s.lastSuccess = p;
      s.streakOpen = false;
    } else if (s.streakOpen && (p.status === "FAILED" || p.status === "KILLED")) {
      s.streak += 1;
    } else if (s.streakOpen && !ACTIVE.has(p.status)) {
      s.streakOpen = false; // CANCELED breaks a streak: nothing failed
    }
  }
  return out;
}
function newestFirst(procs) {
  return [...procs].sort((a, b) => String(procTime(b)).localeCompare(String(procTime(a))) || (b.id || 0) - (a.id || 0));
}
function actionNames(table, actionsBody) {
  const fromActions = list(actionsBody, "actions").map((a) => (typeof a === "string" ? a : pick(a, "action", "name")));
  if (fromActions.length) return fromActions;
  const a = pick(table, "actions", "enabled_actions");
  if (Array.isArray(a)) return a.map((x) => (typeof x === "string" ? x : pick(x, "action", "name")));
  if (a && typeof a === "object") return Object.keys(a);
  return [];
}

function badge(action, st) {
  const last = st && st.last;
  const status = last ? last.status : "NEVER";
  const succ = st && st.lastSuccess ? pick(st.lastSuccess, "finished_at", "instant") : null;
  return h(
    "span",
    { class: `badge ${status}`, dataset: { action, status }, title: last ? procReason(last) || status : "no process yet" },
    h("b", {}, action),
    h("span", {}, last ? status.toLowerCase() : "never ran"),
    h("span", {}, `last success ${ago(succ)}`),
    st && st.streak ? h("span", { class: "streak" }, `${st.streak} failing in a row`) : null,
  );
}

const HEALTH_FIELDS = [
  ["small files", ["small_files", "small_file_count", "small_data_files"], fmtNum, (v) => v > 0],
  ["small-file ratio", ["small_file_ratio", "small_files_ratio"], fmtPct, (v) => v >= 0.5],
  ["delete files", ["delete_files", "delete_file_count"], fmtNum, (v) => v > 0],
  ["snapshots", ["snapshots", "snapshot_count"], fmtNum, () => false],
  ["data files", ["data_files", "data_file_count"], fmtNum, () => false],
  ["bytes", ["data_bytes", "total_bytes", "bytes"], fmtBytes, () => false],
];
function healthValue(health, keys) {
  return pick(health, ...keys.map((k) => `files.${k}`), ...keys);
}
function healthLine(health) {
  if (!health) return h("span", { class: "health muted" }, "health unavailable");
  if (health.error && !health.files) return h("span", { class: "health muted", title: health.error }, "health unavailable");
  return h(
    "span",
    { class: "health" },
    HEALTH_FIELDS.slice(0, 4).map(([label, keys, fmt, hot]) => {
      const v = healthValue(health, keys);
      return h("span", { class: typeof v === "number" && hot(v) ? "hot" : "" }, `${label} `, h("b", {}, fmt(v)));
    }),
  );
}

// --- tables list -----------------------------------------------------------------------------------------

const listState = { q: "", catalog: "", namespace: "", action: "", status: "", offset: 0 };

function readListState(query) {
  const p = new URLSearchParams(query || "");
  for (const k of Object.keys(listState)) listState[k] = k === "offset" ? Number(p.get(k) || 0) : p.get(k) || "";
}
function writeListState() {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(listState)) if (v) p.set(k, String(v));
  const q = p.toString();
  history.replaceState(null, "", `#/${q ? "?" + q : ""}`);
}

async function mapLimited(items, limit, fn) {
  const out = new Array(items.length);
  let next = 0;
  async function worker() {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
const settle = (promise) => promise.then((v) => v, (e) => ({ error: e.detail || String(e), status: e.status }));

async function renderTables(token) {
  document.getElementById("crumb").textContent = "";
  const params = new URLSearchParams({ limit: String(PAGE_SIZE), offset: String(listState.offset) });
  for (const k of ["catalog", "namespace", "action", "status"]) if (listState[k]) params.set(k, listState[k]);
  const body = await api(`/tables?${params}`);
  if (token !== routeToken) return;
  let tables = list(body, "tables");
  const q = listState.q.trim().toLowerCase();
  if (q) tables = tables.filter((t) => String(tableId(t)).toLowerCase().includes(q) || String(pick(t, "owner", "spec.owner") || "").toLowerCase().includes(q));
  const rows = await mapLimited(tables, 6, async (t) => {
    const id = tableId(t);
    const enc = encodeURIComponent(id);
    // The list's rows name their actions already; per row, only health and history are fetched.
    const [health, procs] = await Promise.all([
      settle(api(`/tables/${enc}/health`)),
      settle(api(`/processes?${new URLSearchParams({ table: id, limit: "200" })}`)),
    ]);
    return { t, id, health, procs: newestFirst(list(procs, "processes")) };
  });
  if (token !== routeToken) return;
  const n = total(body, tables.length);
  // The filter bar survives re-renders, so typing in the search box keeps its focus and caret.
  let bar = document.getElementById("filters");
  if (!bar) {
    bar = filtersBar();
    view().replaceChildren(bar, h("div", { id: "results" }));
  }
  document.getElementById("results").replaceChildren(tablesGrid(rows), pager(n, list(body, "tables").length));
  stamp();
}

function filtersBar() {
  const input = (name, placeholder, type = "text") =>
    h("input", {
      type, name, placeholder, value: listState[name], "aria-label": placeholder,
      onchange: (e) => { listState[name] = e.target.value; listState.offset = 0; writeListState(); route(); },
    });
  const status = h(
    "select",
    { name: "status", "aria-label": "last status", onchange: (e) => { listState.status = e.target.value; listState.offset = 0; writeListState(); route(); } },
    ["", "SUCCESS", "FAILED", "PENDING", "SUBMITTED", "RUNNING", "CANCELING", "CANCELED", "KILLED"].map((s) => h("option", { value: s, selected: s === listState.status }, s || "any status")),
  );
  const search = input("q", "Search tables or owners", "search");
  search.addEventListener("input", debounce((e) => { listState.q = e.target.value; writeListState(); route(); }, 250));
  return h("div", { class: "filters", id: "filters" }, search, input("catalog", "catalog"), input("namespace", "namespace"), input("action", "action"), status);
}
function debounce(fn, ms) {
  let t;
  return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
}

function tablesGrid(rows) {
  if (!rows.length) return h("div", { class: "empty" }, "No tables match. Declare tables in dags/tables.yaml or register them with the REST API or `tablemgmt register`.");
  return h(
    "table",
    { class: "grid", id: "tables" },
    h("thead", {}, h("tr", {}, h("th", {}, "Table"), h("th", {}, "Actions"), h("th", {}, "Health"), h("th", {}, "Owner"))),
    h(
      "tbody",
      {},
      rows.map(({ t, id, health, procs }) => {
        const states = actionStates(procs);
        const names = actionNames(t, null);
        for (const a of Object.keys(states)) if (!names.includes(a)) names.push(a);
        return h(
          "tr",
          { dataset: { table: id } },
          h("td", {}, h("a", { href: `#/tables/${encodeURIComponent(id)}` }, id), h("div", { class: "muted small" }, [pick(t, "format", "spec.format"), dynamicText(t), pick(t, "managed_by") && `managed by ${pick(t, "managed_by")}`].filter(Boolean).join(" · "))),
          h("td", {}, h("div", { class: "badges" }, names.map((a) => badge(a, states[a])))),
          h("td", {}, healthLine(health)),
          h("td", {}, pick(t, "owner", "spec.owner") || ""),
        );
      }),
    ),
  );
}

/** "dynamic · freshness 5 MINUTE · ACTIVE" for a dynamic table (its refresh is an action with a badge). */
function dynamicText(t) {
  const d = pick(t, "dynamic", "spec.dynamic", "definition", "spec.definition");
  if (!d || typeof d !== "object") return "";
  return ["dynamic", pick(d, "freshness") && `freshness ${pick(d, "freshness")}`, pick(d, "state", "status")].filter(Boolean).join(" · ");
}

function pager(n, shown) {
  const from = n ? listState.offset + 1 : 0;
  const go = (d) => () => { listState.offset = Math.max(0, listState.offset + d); writeListState(); route(); };
  return h(
    "div",
    { class: "pager" },
    h("button", { disabled: listState.offset === 0, onclick: go(-PAGE_SIZE) }, "‹ Prev"),
    h("span", { class: "muted small" }, `${from}–${listState.offset + shown} of ${n}`),
    h("button", { disabled: listState.offset + shown >= n, onclick: go(PAGE_SIZE) }, "Next ›"),
  );
}

// --- table page ------------------------------------------------------------------------------------------

async function renderTable(id, token) {
  const enc = encodeURIComponent(id);
  document.getElementById("crumb").textContent = `/ ${id}`;
  const [table, actions, health, procsBody] = await Promise.all([
    api(`/tables/${enc}`),
    settle(api(`/tables/${enc}/actions`)),
    settle(api(`/tables/${enc}/health`)),
    api(`/processes?${new URLSearchParams({ table: id, limit: "200" })}`),
  ]);
  if (token !== routeToken) return;
  const procs = newestFirst(list(procsBody, "processes"));
  const states = actionStates(procs);
  const names = actionNames(table, actions.error ? null : actions);
  for (const a of Object.keys(states)) if (!names.includes(a)) names.push(a);
  const actionInfo = Object.fromEntries(list(actions.error ? null : actions, "actions").filter((a) => typeof a === "object").map((a) => [pick(a, "action", "name"), a]));

  view().replaceChildren(
    h("h2", { id: "table-title" }, id),
    h("p", { class: "muted", id: "dynamic", hidden: !dynamicText(table) }, dynamicText(table)),
    healthCards(health),
    ...names.map((a) => actionSection(id, a, actionInfo[a], states[a], procs.filter((p) => p.action === a))),
    h("h3", {}, "Processes"),
    processTable(procs),
  );
  stamp();
  // Keep the page current while something runs; each refresh replaces the view as a whole.
  if (procs.some((p) => ACTIVE.has(p.status))) scheduleRefresh(token);
}

function healthCards(health) {
  if (!health || (health.error && !health.files)) {
    return h("p", { class: "muted", id: "health" }, `Health unavailable${health && health.error ? `: ${health.error}` : ""}`);
  }
  return h(
    "div",
    { class: "cards", id: "health" },
    HEALTH_FIELDS.map(([label, keys, fmt]) => h("div", { class: "card" }, h("div", { class: "k" }, label), h("div", { class: "v" }, fmt(healthValue(health, keys))))),
  );
}

function actionSection(id, action, info, st, procs) {
  const schedule = [pick(info, "trigger", "schedule.trigger"), pick(info, "interval", "schedule.interval", "schedule")]
    .filter((x) => x !== undefined && typeof x !== "object")
    .join(" ");
  const next = pick(info, "next_run", "next_run_at", "schedule.next_run");
  const dagId = pick(info, "dag_id") || `tms__${id}__${action}`;
  const run = h("button", { class: "primary", dataset: { run: action }, onclick: (e) => runNow(id, action, dagId, e.target) }, "Run now");
  return h(
    "section",
    { class: "action", dataset: { action } },
    h("h3", {}, action, badge(action, st), h("span", { class: "muted small" }, [schedule, next && `next ${when(next)}`].filter(Boolean).join(" · ")), h("span", { class: "spacer" }), run),
    charts(procs),
  );
}

function summaryOf(p) {
  const s = p.summary || {};
  const dur = pick(s, "duration_seconds") ?? (p.started_at && p.finished_at ? (new Date(p.finished_at) - new Date(p.started_at)) / 1000 : undefined);
  return {
    t: new Date(procTime(p)).getTime(),
    before: pick(s, "before.data_files", "files_before"),
    after: pick(s, "after.data_files", "files_after"),
    bytes: pick(s, "rewritten_bytes_count", "rewritten_bytes", "bytes_rewritten", "drop_bytes"),
    duration: dur,
  };
}

function charts(procs) {
  const points = procs.filter((p) => !ACTIVE.has(p.status)).map(summaryOf).filter((p) => !isNaN(p.t)).sort((a, b) => a.t - b.t);
  if (!points.length) return h("p", { class: "muted small" }, "No finished process yet.");
  return h(
    "div",
    { class: "charts" },
    chart("Data files", points, [["before", "before", "var(--c1)"], ["after", "after", "var(--c2)"]], fmtNum),
    chart("Bytes rewritten", points, [["bytes", "bytes", "var(--c3)"]], fmtBytes),
    chart("Duration", points, [["duration", "seconds", "var(--c1)"]], (v) => `${fmtNum(v)} s`),
  );
}

/** A small inline SVG line chart over time; one polyline per series, dots for single points. */
function chart(title, points, series, fmt) {
  const W = 300, H = 90, P = 6;
  const values = series.flatMap(([k]) => points.map((p) => p[k]).filter((v) => typeof v === "number"));
  const box = h("div", { class: "chart", dataset: { chart: title } });
  const legend = series.map(([k, label, color]) => {
    const last = [...points].reverse().find((p) => typeof p[k] === "number");
    return h("span", { class: "legend" }, h("i", { style: `background:${color}` }), `${label} ${last ? fmt(last[k]) : "–"}`);
  });
  box.append(h("div", { class: "title" }, h("b", {}, title), legend));
  const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img", "aria-label": title });
  s.append(svg("line", { x1: P, y1: H - P, x2: W - P, y2: H - P, class: "axis" }));
  if (values.length) {
    const t0 = points[0].t, t1 = points[points.length - 1].t;
    const vmax = Math.max(...values, 0), vmin = Math.min(...values, 0);
    const x = (t) => (t1 === t0 ? W / 2 : P + ((t - t0) / (t1 - t0)) * (W - 2 * P));
    const y = (v) => (vmax === vmin ? H / 2 : H - P - ((v - vmin) / (vmax - vmin)) * (H - 2 * P));
    for (const [k, label, color] of series) {
      const pts = points.filter((p) => typeof p[k] === "number");
      if (pts.length > 1) s.append(svg("polyline", { points: pts.map((p) => `${x(p.t).toFixed(1)},${y(p[k]).toFixed(1)}`).join(" "), fill: "none", stroke: color, "stroke-width": 2, "vector-effect": "non-scaling-stroke" }));
      for (const p of pts) {
        const c = svg("circle", { cx: x(p.t).toFixed(1), cy: y(p[k]).toFixed(1), r: 2.5, fill: color });
        const tip = svg("title", {});
        tip.textContent = `${label} ${fmt(p[k])} at ${new Date(p.t).toISOString()}`;
        c.append(tip);
        s.append(c);
      }
    }
  }
  box.append(s);
  return box;
}

function processTable(procs) {
  if (!procs.length) return h("div", { class: "empty", id: "processes" }, "No process yet. Run now starts one.");
  return h(
    "table",
    { class: "grid", id: "processes" },
    h("thead", {}, h("tr", {}, ["Id", "Action", "Instant", "Status", "Attempt", "Duration", "Files", "Reason", ""].map((c) => h("th", {}, c)))),
    h(
      "tbody",
      {},
      procs.map((p) => {
        const s = summaryOf(p);
        const cancel = ACTIVE.has(p.status) && p.status !== "CANCELING"
          ? h("button", { class: "danger", dataset: { cancel: String(p.id) }, onclick: (e) => cancelProcess(p, e.target) }, "Cancel")
          : null;
        return h(
          "tr",
          { dataset: { process: String(p.id), status: p.status } },
          h("td", { class: "num" }, String(p.id)),
          h("td", {}, p.action),
          h("td", {}, when(p.instant)),
          h("td", {}, h("span", { class: `status ${p.status}` }, p.status)),
          h("td", { class: "num" }, fmtNum(p.attempt)),
          h("td", { class: "num" }, typeof s.duration === "number" ? `${fmtNum(s.duration)} s` : "–"),
          h("td", { class: "num" }, s.before !== undefined || s.after !== undefined ? `${fmtNum(s.before)} → ${fmtNum(s.after)}` : "–"),
          h("td", { class: "reason" }, procReason(p)),
          h("td", {}, cancel),
        );
      }),
    ),
  );
}

// --- mutations -------------------------------------------------------------------------------------------

async function runNow(id, action, dagId, button) {
  button.disabled = true;
  clearNotice();
  try {
    const res = await api(`/tables/${encodeURIComponent(id)}/actions/${encodeURIComponent(action)}/runs`, { method: "POST", body: {} });
    const pid = pick(res, "process_id", "process.id", "process", "id");
    notify("info", `Started ${action} on ${id}${pid !== undefined ? ` — process ${pid}` : ""}${pick(res, "dag_run_id", "run_id") ? ` (DAG run ${pick(res, "dag_run_id", "run_id")})` : ""}.`);
  } catch (err) {
    explain(err, `run ${action} on ${id} (DAG ${dagId})`);
  } finally {
    button.disabled = false;
  }
  await refresh();
}

async function cancelProcess(p, button) {
  button.disabled = true;
  clearNotice();
  try {
    const res = await api(`/processes/${encodeURIComponent(p.id)}/cancel`, { method: "POST", body: {} });
    notify("info", `Process ${p.id} (${p.action}) is ${pick(res, "status") || "being canceled"}.`);
  } catch (err) {
    explain(err, `cancel process ${p.id} (${p.action})`);
    button.disabled = false;
  }
  await refresh();
}

// --- routing ---------------------------------------------------------------------------------------------

let routeToken = 0;
let refreshTimer = null;

function scheduleRefresh(token) {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(() => { if (token === routeToken) refresh(); }, REFRESH_MS);
}
function stamp() {
  document.getElementById("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
}

async function refresh() {
  return route(true);
}

async function route(keepNotice = false) {
  const token = ++routeToken;
  clearTimeout(refreshTimer);
  if (!keepNotice) clearNotice();
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  try {
    let m;
    if ((m = path.match(/^\/tables\/(.+)$/))) {
      await renderTable(decodeURIComponent(m[1]), token);
    } else if ((m = path.match(/^\/dags?\/(.+)$/))) {
      // tms__<catalog>.<namespace>.<table>__<action>: the maintenance DAG's table page.
      const dm = decodeURIComponent(m[1]).match(/^tms__(.+)__([a-z0-9-]+)$/);
      if (!dm) {
        view().replaceChildren(h("div", { class: "empty" }, `DAG ${decodeURIComponent(m[1])} is not a table-maintenance DAG.`));
        return;
      }
      location.replace(`#/tables/${encodeURIComponent(dm[1])}`);
    } else {
      readListState(query);
      await renderTables(token);
    }
  } catch (err) {
    if (token !== routeToken) return;
    explain(err, "load this page");
    if (view().textContent.startsWith("Loading")) view().replaceChildren(h("div", { class: "empty" }, "Nothing to show."));
  }
}

window.addEventListener("hashchange", () => route());
route();
