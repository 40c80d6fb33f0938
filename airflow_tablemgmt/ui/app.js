/* Table maintenance page: a hash-routed view over the /tablemgmt/v1 REST API. No framework, no build
 * (so one script of ~1000 lines: a second file would need a loader or a bundler).
 *
 * Routes (each its own URL; inside Airflow's frame the hash is mirrored to the outer page's URL, so a
 * link or a reload opens the same view, and the back button walks the views):
 *   #/                                 overview: tables, size, attention, failing and waiting work, the fleet, trends
 *   #/tables?q=&catalog=&…&sort=       the table list: search, filters, sort and paging on the server
 *   #/tables/<id>?tab=<tab>&action=<a> a table: Details, Files, Snapshots, Maintenance, History
 *   #/dynamic, #/dynamic/<id>          dynamic tables: definition, freshness lag, refreshes, suspend/resume
 *   #/dags/<dag id>                    a DAG's "Table maintenance" tab -> its table at that action
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
// A skipped run (declined, or not paying: the health gate) says why in its summary, with its figures.
const procReason = (p) => pick(p, "failure_reason", "reason", "error", "summary.reason") || "";

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
// A notice about something the user pressed (Run now, Cancel, Pause, Suspend, Refresh) is shown next to
// that control, where the user is looking (the page may be scrolled far below the top), and kept there
// across the re-render that follows; a notice about the page itself goes to the top.

let current = null; // {kind, message, anchor: a CSS selector of the control's block, or null}

function notify(kind, message, anchor = null) {
  current = { kind, message, anchor };
  showNotice();
}
function clearNotice() {
  current = null;
  showNotice();
}
function showNotice() {
  const top = document.getElementById("notice");
  for (const el of document.querySelectorAll(".notice.inline, tr.notice-row")) el.remove();
  top.hidden = true;
  if (!current) return;
  const { kind, message, anchor } = current;
  const near = anchor ? document.querySelector(anchor) : null;
  const body = [h("span", { class: "msg" }, message), h("button", { class: "close", title: "Dismiss", onclick: clearNotice }, "×")];
  if (!near) {
    top.className = `notice ${kind}`;
    top.replaceChildren(...body);
    top.hidden = false;
    return;
  }
  const box = h("div", { class: `notice inline ${kind}`, role: "alert", dataset: { for: anchor } }, ...body);
  if (near.tagName === "TR") {
    near.after(h("tr", { class: "notice-row" }, h("td", { colspan: String(near.children.length) }, box)));
  } else {
    near.after(box);
  }
  box.scrollIntoView({ block: "nearest" });
}
function explain(err, doing, anchor = null) {
  if (err instanceof ApiError && err.status === 403) {
    notify(
      "denied",
      `You are not allowed to ${doing}. Airflow's permissions decide who may run or cancel maintenance of a table; ` +
        `ask an Airflow admin for edit access to its DAG. (${err.detail})`,
      anchor,
    );
  } else if (err instanceof ApiError && err.status === 401) {
    notify("denied", "Your Airflow session has expired. Reload the page to sign in again.");
  } else if (err instanceof ApiError) {
    notify("error", `Could not ${doing}: ${err.detail} (HTTP ${err.status})`, anchor);
  } else {
    notify("error", `Could not ${doing}: ${err && err.message ? err.message : err}`, anchor);
  }
}

// --- permissions: a control the user may not use is disabled, its tooltip says why ---------------------------

/** What the user may do to each of ``dagIds`` ({dag: {run, cancel, edit}}); {} when it cannot be asked (the
 * controls then stay enabled and the API answers a 403 politely, as before). */
async function permissionsFor(dagIds) {
  const ids = [...new Set(dagIds.filter(Boolean))];
  if (!ids.length) return {};
  const q = new URLSearchParams();
  for (const d of ids) q.append("dag_id", d);
  const body = await settle(api(`/permissions?${q}`));
  return body && !body.error ? body.dags || {} : {};
}
const DENIED_WHY = {
  run: "run it", cancel: "cancel its processes", edit: "pause or resume it",
};
/** ``attrs`` for a control needing permission ``what`` on ``dagId``: disabled with a tooltip when not allowed. */
function allowed(perms, dagId, what, attrs) {
  const p = perms && perms[dagId];
  if (!p || p[what] !== false) return attrs;
  return { ...attrs, disabled: true, title: `You are not allowed to ${DENIED_WHY[what]}: ask an Airflow admin for edit access to DAG ${dagId}.`, dataset: { ...(attrs.dataset || {}), denied: "1" } };
}


const settle = (promise) => promise.then((v) => v, (e) => ({ error: e.detail || String(e), status: e.status }));

// --- small formatting helpers ----------------------------------------------------------------------------

function fmtSec(v) {
  if (typeof v !== "number") return "–";
  if (v < 90) return `${v.toFixed(v < 10 ? 1 : 0)} s`;
  if (v < 5400) return `${Math.floor(v / 60)} min ${Math.round(v % 60)} s`;
  if (v < 172800) return `${(v / 3600).toFixed(1)} h`;
  return `${(v / 86400).toFixed(1)} d`;
}
/** The item a deeper view shows, after the active top tab that names its section ("Tables › <table>"); the
 * top-level views have none (their tab says where you are: a crumb "Overview" read as a second tab). */
function setCrumb(...parts) {
  document.getElementById("crumb").replaceChildren(...parts.flatMap((p) => [h("span", { class: "sep", "aria-hidden": "true" }, "›"), p]));
}
function link(href, text, attrs = {}) {
  return h("a", { href, ...attrs }, text);
}
const tableHref = (id, tab, action) => {
  const q = new URLSearchParams();
  if (tab) q.set("tab", tab);
  if (action) q.set("action", action);
  const s = q.toString();
  return `#/tables/${encodeURIComponent(id)}${s ? "?" + s : ""}`;
};
function card(label, value, attrs = {}, sub) {
  return h("div", { class: "card", ...attrs }, h("div", { class: "k" }, label), h("div", { class: "v" }, value), sub ? h("div", { class: "muted small" }, sub) : null);
}

// --- badges and health (what the server computed: no per-row request) --------------------------------------

function badge(action, b) {
  const status = (b && b.last_status) || "NEVER";
  return h(
    "a",
    { class: `badge ${status}`, href: b && b.table ? tableHref(b.table, "maintenance", action) : undefined, dataset: { action, status }, title: (b && b.last_reason) || status },
    h("b", {}, action),
    h("span", {}, b && b.last_status ? b.last_status.toLowerCase() : "never ran"),
    h("span", {}, `last success ${ago(b && b.last_success)}`),
    b && b.failing_streak ? h("span", { class: "streak" }, `${b.failing_streak} failing in a row`) : null,
  );
}

function scorePill(health) {
  if (!health) return h("span", { class: "score unknown", title: "not measured yet" }, "–");
  const red = health.needs_attention;
  const why = (health.findings || []).map((f) => `${f.action}: ${f.reason} (−${f.points})`).join("\n");
  return h("span", { class: `score ${red ? "red" : "ok"}`, dataset: { score: String(health.score) }, title: why || "no action would help" }, String(health.score));
}

function rowHealth(health, measuring) {
  if (!health) return h("span", { class: "health muted" }, measuring ? "measuring…" : "not measured");
  return h(
    "span",
    { class: "health" },
    scorePill(health),
    h("span", {}, "small files ", h("b", {}, fmtNum(health.small_data_files))),
    h("span", {}, "data files ", h("b", {}, fmtNum(health.data_files))),
    // a format with its own health hook: its figures stand in for delete files and snapshots
    health.format ? h("span", { class: "format-badge", dataset: { format: health.format } }, `${health.format} health`) : h("span", {}, "delete files ", h("b", {}, fmtNum(health.delete_files))),
    health.format ? null : h("span", {}, "snapshots ", h("b", {}, fmtNum(health.snapshots))),
    h("span", {}, fmtBytes(health.data_bytes)),
    (health.findings || []).length ? h("span", { class: "why" }, health.findings.map((f) => f.action).join(", ") + " would help") : null,
  );
}

// --- charts: axes, units, execution time on x ------------------------------------------------------------

const DAY_MS = 86400000;
function tickTime(t, span) {
  const d = new Date(t).toISOString();
  return span < 2 * DAY_MS ? d.slice(5, 16).replace("T", " ") : d.slice(0, 10);
}

/** An SVG line/point chart. points: [{t, <key>: number}], series: [[key, label, color]].
 * Drawn at its box's own width (one SVG unit = one pixel, so text keeps its size), again when the box is
 * resized; a count (every value a whole number, in a unit other than bytes or seconds) gets whole-number ticks. */
function chart(title, unit, points, series, fmt, attrs = {}) {
  const box = h("div", { class: "chart", dataset: { chart: title }, ...attrs });
  const legend = series.map(([k, label, color]) => {
    const last = [...points].reverse().find((p) => typeof p[k] === "number");
    return h("span", { class: "legend" }, h("i", { style: `background:${color}` }), `${label} ${last ? fmt(last[k]) : "–"}`);
  });
  box.append(h("div", { class: "title" }, h("b", {}, `${title} (${unit})`), legend));
  let drawn = 0;
  const draw = (width) => {
    const W = Math.max(240, Math.round(width));
    if (Math.abs(W - drawn) < 2) return;
    drawn = W;
    const old = box.querySelector("svg");
    const s = chartSvg(W, title, unit, points, series, fmt);
    if (old) old.replaceWith(s);
    else box.append(s);
  };
  draw(640); // until the box is laid out: the points are there from the start
  if (typeof ResizeObserver === "function") {
    new ResizeObserver((entries) => { for (const e of entries) if (e.contentRect.width) draw(e.contentRect.width); }).observe(box);
  }
  return box;
}

/** Whole-number ticks [lo, mid, hi] for counts, else the range's ends and middle. */
function ticks(vmin, vmax, counts) {
  if (!counts) return [vmin, (vmin + vmax) / 2, vmax];
  const lo = Math.floor(vmin), span = Math.max(1, Math.ceil(vmax) - lo);
  if (span === 1) return [lo, lo + 1];
  const step = Math.ceil(span / 2);
  return [lo, lo + step, lo + 2 * step];
}

function chartSvg(W, title, unit, points, series, fmt) {
  const H = 170, L = 56, R = 12, T = 8, B = 28;
  const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: String(W), height: String(H), role: "img", "aria-label": `${title} in ${unit} over execution time` });
  const values = series.flatMap(([k]) => points.map((p) => p[k]).filter((v) => typeof v === "number"));
  const counts = unit !== "bytes" && unit !== "seconds" && values.every(Number.isInteger);
  const ts = points.map((p) => p.t);
  let t0 = Math.min(...ts), t1 = Math.max(...ts);
  if (t1 - t0 < 60000) { t0 -= 30 * 60000; t1 += 30 * 60000; } // one point, or several a second apart
  const yTicks = ticks(Math.min(...values, 0), Math.max(...values, 0) || 1, counts);
  const vmin = yTicks[0], vmax = yTicks[yTicks.length - 1];
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
  const y = (v) => H - B - ((v - vmin) / (vmax - vmin)) * (H - B - T);
  s.append(svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" }));
  s.append(svg("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" }));
  const text = (x0, y0, str, anchor, extra = {}) => {
    const el = svg("text", { x: x0, y: y0, "text-anchor": anchor, class: "tick", ...extra });
    el.textContent = str;
    return el;
  };
  for (const v of yTicks) {
    s.append(svg("line", { x1: L, y1: y(v), x2: W - R, y2: y(v), class: "grid" }));
    s.append(text(L - 4, y(v) + 3, fmt(v), "end", { "data-y-tick": String(v) }));
  }
  const xTicks = W >= 480 ? [0, 0.25, 0.5, 0.75, 1] : [0, 0.5, 1];
  for (const f of xTicks) s.append(text(x(t0 + f * (t1 - t0)), H - B + 14, tickTime(t0 + f * (t1 - t0), t1 - t0), f === 0 ? "start" : f === 1 ? "end" : "middle"));
  s.append(text((L + W - R) / 2, H - 2, "execution time (UTC)", "middle"));
  for (const [k, label, color] of series) {
    const pts = points.filter((p) => typeof p[k] === "number");
    if (pts.length > 1) s.append(svg("polyline", { points: pts.map((p) => `${x(p.t).toFixed(1)},${y(p[k]).toFixed(1)}`).join(" "), fill: "none", stroke: color, "stroke-width": 2 }));
    for (const p of pts) {
      const c = svg("circle", { cx: x(p.t).toFixed(1), cy: y(p[k]).toFixed(1), r: 3, fill: color, "data-series": k, "data-value": String(p[k]), "data-t": new Date(p.t).toISOString(), "data-process": String(p.id ?? "") });
      const tip = svg("title", {});
      tip.textContent = `${label} ${fmt(p[k])} at ${new Date(p.t).toISOString()}${p.id ? ` (process ${p.id})` : ""}`;
      c.append(tip);
      s.append(c);
    }
  }
  return s;
}

const sumValues = (o) => (o && typeof o === "object" ? Object.values(o).reduce((a, v) => a + (typeof v === "number" ? v : 0), 0) : undefined);

/** Each action's own figures, from its processes' summaries. */
const ACTION_CHARTS = {
  rewrite: [
    ["Data files", "files", [["before", "before", "var(--c1)"], ["after", "after", "var(--c2)"]], fmtNum, (s) => ({ before: pick(s, "before.data_files"), after: pick(s, "after.data_files") })],
    ["Bytes rewritten", "bytes", [["bytes", "rewritten", "var(--c3)"]], fmtBytes, (s) => ({ bytes: pick(s, "rewritten_bytes_count") })],
  ],
  "expire-snapshots": [
    ["Snapshots", "snapshots", [["before", "before", "var(--c1)"], ["after", "after", "var(--c2)"]], fmtNum, (s) => ({ before: pick(s, "before.snapshots"), after: pick(s, "after.snapshots") })],
    // the process's own "files removed" (REST's removed.files), the figure the overview sums for it
    ["Files deleted", "files", [["deleted", "deleted", "var(--c3)"]], fmtNum, (s, p) => ({ deleted: pick(p, "removed.files") ?? sumValues(s.deleted_files) })],
  ],
  "delete-orphans": [["Orphan files", "files", [["deleted", "deleted", "var(--c3)"], ["would", "would delete", "var(--c1)"]], fmtNum, (s) => ({ deleted: s.deleted, would: s.would_delete })]],
  "expire-data": [["Rows", "rows", [["before", "before", "var(--c1)"], ["after", "after", "var(--c2)"]], fmtNum, (s) => ({ before: pick(s, "before.live_records"), after: pick(s, "after.live_records") })]],
  refresh: [
    ["Rows written", "rows", [["rows", "rows", "var(--c1)"]], fmtNum, (s) => ({ rows: s.rows_written })],
    ["Partitions written", "partitions", [["parts", "partitions", "var(--c2)"]], fmtNum, (s) => ({ parts: s.partitions_written_count })],
  ],
};
ACTION_CHARTS["rewrite-files"] = ACTION_CHARTS["rewrite-deletes"] = ACTION_CHARTS["rewrite-manifests"] = ACTION_CHARTS.rewrite;

const execTime = (p) => new Date(p.finished_at || p.started_at || p.created_at || p.instant).getTime();

function actionCharts(action, procs) {
  const done = procs.filter((p) => p.status === "SUCCESS" && p.summary).sort((a, b) => execTime(a) - execTime(b));
  if (!done.length) return h("p", { class: "muted small" }, "No successful process yet: nothing to chart.");
  const specs = [...(ACTION_CHARTS[action] || []), ["Job time", "seconds", [["job", "job", "var(--c1)"], ["total", "total", "var(--c3)"]], (v) => fmtNum(Math.round(v * 10) / 10), (s, p) => ({ job: p.timings && p.timings.job_s, total: p.timings && p.timings.total_s })]];
  return h(
    "div",
    { class: "charts" },
    specs.map(([title, unit, series, fmt, read]) => chart(title, unit, done.map((p) => ({ t: execTime(p), id: p.id, ...read(p.summary || {}, p) })), series, fmt)),
  );
}

// --- overview ----------------------------------------------------------------------------------------------

// While the api-server measures tables the store has no health for, the overview asks again on its own,
// so its size, files and attention fill in without a visit to the table list; it stops asking when the
// measured count stops growing (a table whose catalog cannot be read stays unmeasured).
const overviewProgress = { measured: -1, idle: 0 };

// The fleet (GET /overview's `fleet`, services/fleet.py): each policy's tables, what discovery enrolled and
// retired, the runs the health gate skipped and the cost per day, over the last `days` days; the newest
// enrolment changes and skips, each linking to its table's page while the table is live.
const fmtCoreH = (v) => (typeof v !== "number" ? "–" : v === 0 ? "0" : v >= 10 ? v.toFixed(0) : v >= 0.1 ? v.toFixed(2) : v.toPrecision(2));
function skipFigures(figures) {
  return Object.entries(figures || {})
    .filter(([k, v]) => k !== "findings" && v !== null && (typeof v !== "object" || k === "thresholds"))
    .map(([k, v]) => (typeof v === "object" ? Object.entries(v).map(([t, n]) => `${t} ${fmtNum(n)}`).join(", ") : `${k.replace(/_/g, " ")} ${fmtNum(v)}`))
    .join(" · ");
}
function fleetSection(f, pending) {
  const title = h("h3", {}, f ? `Fleet: policies, last ${f.days} days` : "Fleet");
  if (!f && pending) return h("section", { id: "fleet" }, title, h("p", { class: "muted", dataset: { pending: "fleet" } }, "Computing the fleet's figures…"));
  if (!f || !(f.policies || []).length) {
    return h("section", { id: "fleet" }, title,
      h("p", { class: "muted", dataset: { empty: "fleet" } }, "No policy yet. A policy enrols every table of a catalog that it matches and maintains it, running an action only where it pays: declare one under policies: in tables.yaml or apply one with tablemgmt policies apply (docs/policies.md)."));
  }
  const tableCell = (t, live, tab, action) => (live ? link(tableHref(t, tab, action), t) : h("span", { class: "muted", title: "retired: no page" }, t));
  const days = [];
  for (let d = new Date(f.first_day + "T00:00:00Z"); days.length < f.days; d = new Date(d.getTime() + 86400000)) days.push(d.toISOString().slice(0, 10));
  const daily = new Map((f.cost_daily || []).map((c) => [`${c.policy} ${c.day}`, c]));
  return h("section", { id: "fleet" }, title,
    h("table", { class: "grid", id: "fleet-policies" },
      h("thead", {}, h("tr", {}, ["Policy", "Tables managed", "Enrolled", "Retired", "Skipped for health", "Core-hours / day", "Read / day", "Written / day"].map((c, i) => h("th", { class: i ? "num" : null }, c)))),
      h("tbody", {}, f.policies.map((p) => h("tr", { dataset: { policy: p.name } },
        h("td", { title: p.error || p.description || "" }, p.name, p.exists ? null : h("span", { class: "muted small" }, " (deleted)"), p.error ? h("span", { class: "bad small" }, " (unreadable)") : null),
        h("td", { class: "num", dataset: { figure: "tables", value: String(p.tables) } }, fmtNum(p.tables)),
        h("td", { class: "num", dataset: { figure: "enrolled", value: String(p.enrolled) } }, fmtNum(p.enrolled)),
        h("td", { class: "num", dataset: { figure: "retired", value: String(p.retired) } }, fmtNum(p.retired)),
        h("td", { class: "num", dataset: { figure: "skipped", value: String(p.skipped) } }, fmtNum(p.skipped)),
        h("td", { class: "num", dataset: { figure: "core_hours", value: String(p.per_day.core_hours) }, title: `${fmtNum(p.cost.core_seconds)} core-seconds in ${f.days} days, ${fmtNum(p.cost.measured)} of ${fmtNum(p.cost.runs)} finished runs measured` }, fmtCoreH(p.per_day.core_hours)),
        h("td", { class: "num", dataset: { figure: "bytes_read", value: String(p.per_day.bytes_read) } }, fmtBytes(p.per_day.bytes_read)),
        h("td", { class: "num", dataset: { figure: "bytes_written", value: String(p.per_day.bytes_written) } }, fmtBytes(p.per_day.bytes_written)))))),
    h("h4", {}, "Executor core-hours per day (UTC)"),
    h("table", { class: "grid", id: "fleet-cost" },
      h("thead", {}, h("tr", {}, h("th", {}, "Policy"), days.map((d) => h("th", { class: "num" }, d.slice(5))))),
      h("tbody", {}, f.policies.map((p) => h("tr", { dataset: { policy: p.name } }, h("td", {}, p.name),
        days.map((d) => {
          const c = daily.get(`${p.name} ${d}`);
          return h("td", { class: c ? "num" : "num muted", dataset: { day: d }, title: c ? `${fmtNum(c.runs)} runs · read ${fmtBytes(c.bytes_read)} · written ${fmtBytes(c.bytes_written)}` : "" }, c ? fmtCoreH(c.core_seconds / 3600) : "–");
        }))))),
    h("h4", {}, "Enrolment changes"),
    (f.enrolments || []).length
      ? h("table", { class: "grid", id: "fleet-enrolments" }, h("thead", {}, h("tr", {}, ["When", "Policy", "Table", "Change", "Why"].map((c) => h("th", {}, c)))),
          h("tbody", {}, f.enrolments.map((e) => h("tr", { dataset: { table: e.table, change: e.change } }, h("td", {}, when(e.at)), h("td", {}, e.policy), h("td", {}, tableCell(e.table, e.live)), h("td", {}, e.change), h("td", { class: "reason" }, e.reason)))))
      : h("p", { class: "muted" }, `No table enrolled or retired in the last ${f.days} days.`),
    h("h4", {}, "Skipped for health: the run would not pay"),
    (f.skips || []).length
      ? h("table", { class: "grid", id: "fleet-skips" }, h("thead", {}, h("tr", {}, ["When", "Table", "Action", "Policy", "Why", "Figures"].map((c) => h("th", {}, c)))),
          h("tbody", {}, f.skips.map((s) => h("tr", { dataset: { process: String(s.process_id), table: s.table } }, h("td", {}, when(s.finished_at)), h("td", {}, tableCell(s.table, s.live, "history", s.action)), h("td", {}, s.action), h("td", {}, s.policy || h("span", { class: "muted" }, "declared")), h("td", { class: "reason" }, s.reason), h("td", { class: "small" }, skipFigures(s.figures))))))
      : h("p", { class: "muted" }, `No run skipped for health in the last ${f.days} days.`),
    h("p", { class: "muted small" }, `${fmtNum(f.skipped)} run${f.skipped === 1 ? "" : "s"} skipped for health in ${f.days} days, every table. Cost: executor core-seconds and the bytes Spark's tasks read and wrote, of the processes that finished on the last ${f.days} UTC days (today included), per day the sum / ${f.days}; a table's cost counts for the policy managing it now.`),
  );
}

async function renderOverview(token) {
  setCrumb();
  const o = await api("/overview");
  if (token !== routeToken) return;
  if (o.measured_tables > overviewProgress.measured) overviewProgress.idle = 0;
  else overviewProgress.idle++;
  overviewProgress.measured = o.measured_tables;
  const kinds = Object.entries(o.attention_by_kind || {});
  const done = (label, d) =>
    h("div", { class: "card wide", dataset: { figure: label } },
      h("div", { class: "k" }, `Maintenance done, last ${label}`),
      h("div", { class: "v" }, `${fmtNum(d.succeeded)} succeeded`, h("span", { class: d.failed ? "bad" : "muted" }, ` · ${fmtNum(d.failed)} failed`)),
      h("div", { class: "small" }, `files removed `, h("b", { dataset: { value: String(d.files_removed) } }, fmtNum(d.files_removed)), ` · bytes removed `, h("b", {}, fmtBytes(d.bytes_removed))),
      h("div", { class: "muted small" }, Object.entries(d.per_action || {}).map(([a, v]) => `${a} ${v.succeeded}`).join(" · ")));
  const days = (o.daily_30d || []).map((d) => ({ t: Date.parse(d.day + "T12:00:00Z"), ok: d.succeeded, failed: d.failed, files: d.files_removed }));
  view().replaceChildren(
    h("div", { id: "overview" },
      h("div", { class: "cards" },
        card("Tables", fmtNum(o.tables), { dataset: { figure: "tables", value: String(o.tables) } }, `${fmtNum(o.dynamic_tables)} dynamic · ${Object.entries(o.per_catalog || {}).map(([c, n]) => `${c} ${n}`).join(", ")}`),
        card("Data size", fmtBytes(o.data_bytes), { dataset: { figure: "data_bytes", value: String(o.data_bytes), measured: String(o.measured_tables) } }, `of ${fmtNum(o.measured_tables)} measured tables${o.measuring ? `, ${fmtNum(o.measuring)} being measured` : ""}`),
        card("Data files", fmtNum(o.data_files), { dataset: { figure: "data_files", value: String(o.data_files) } }, `${fmtNum(o.removable_files)} a compaction would remove`),
        card("Need attention", h("a", { href: "#/tables?attention=1&sort=health" }, fmtNum(o.needs_attention)), { class: `card ${o.needs_attention ? "hot" : ""}`, dataset: { figure: "needs_attention", value: String(o.needs_attention) } }, o.mean_health_score != null ? `mean health score ${o.mean_health_score}` : o.measuring ? "measuring…" : "no table measured yet"),
        card("Failing", fmtNum((o.failing || []).length), { dataset: { figure: "failing", value: String((o.newest_status || {}).FAILED || 0) } }, `newest process FAILED: ${fmtNum((o.newest_status || {}).FAILED || 0)}, KILLED: ${fmtNum((o.newest_status || {}).KILLED || 0)}`),
        card("Waiting or running", fmtNum(Object.values(o.active_per_status || {}).reduce((a, b) => a + b, 0)), { dataset: { figure: "active" } }, Object.entries(o.active_per_status || {}).map(([s, n]) => `${s} ${n}`).join(" · ") || "nothing in flight"),
      ),
      h("div", { class: "cards" }, done("24 h", o.done_24h), done("7 d", o.done_7d)),
      fleetSection(o.fleet, o.fleet_pending),
      h("h3", {}, "Why tables need attention"),
      kinds.length
        ? h("table", { class: "grid", id: "attention" }, h("thead", {}, h("tr", {}, ["Finding", "Tables", "Action that helps", "For example"].map((c) => h("th", {}, c)))),
            h("tbody", {}, kinds.map(([kind, k]) => h("tr", { dataset: { kind } }, h("td", {}, kind.replace("_", " ")), h("td", { class: "num" }, fmtNum(k.tables)), h("td", {}, k.action), h("td", {}, k.examples.map((t) => link(tableHref(t, "files"), t)).flatMap((a, i) => (i ? [", ", a] : [a])))))))
        : h("p", { class: "muted" }, o.measured_tables ? "No measured table needs an action." : o.measuring ? `Measuring ${fmtNum(o.measuring)} tables from their metadata…` : "No table measured yet."),
      h("h3", {}, "Failing"),
      (o.failing || []).length
        ? h("table", { class: "grid", id: "failing" }, h("thead", {}, h("tr", {}, ["Table", "Action", "Status", "Finished", "Reason"].map((c) => h("th", {}, c)))),
            h("tbody", {}, o.failing.map((f) => h("tr", { dataset: { process: String(f.process_id) } }, h("td", {}, link(tableHref(f.table, "history", f.action), f.table)), h("td", {}, f.action), h("td", {}, h("span", { class: `status ${f.status}` }, f.status)), h("td", {}, when(f.finished_at)), h("td", { class: "reason" }, (f.reason || "").split("\n")[0])))))
        : h("p", { class: "muted" }, "Nothing is failing."),
      h("h3", {}, "Waiting and running"),
      (o.active || []).length
        ? h("table", { class: "grid", id: "active" }, h("thead", {}, h("tr", {}, ["Table", "Action", "Status", "Opened", "Waiting (queue + lease)", "Of it, lease"].map((c) => h("th", {}, c)))),
            h("tbody", {}, o.active.map((a) => h("tr", {}, h("td", {}, link(tableHref(a.table, "history", a.action), a.table)), h("td", {}, a.action), h("td", {}, h("span", { class: `status ${a.status}` }, a.status)), h("td", {}, when(a.created_at)), h("td", { class: "num" }, a.waiting_s != null ? fmtSec(a.waiting_s) : "running"), h("td", { class: "num" }, a.lease_wait_s != null ? fmtSec(a.lease_wait_s) : "–")))))
        : h("p", { class: "muted" }, "No process is waiting or running."),
      h("h3", {}, "Last 30 days"),
      days.length
        ? h("div", { class: "charts" },
            chart("Processes per day", "processes", days, [["ok", "succeeded", "var(--c2)"], ["failed", "failed", "var(--bad)"]], fmtNum),
            chart("Files removed per day", "files", days, [["files", "removed", "var(--c1)"]], fmtNum))
        : h("p", { class: "muted" }, "No process finished in the last 30 days."),
      h("p", { class: "muted small" }, `Process figures ${o.figures_age_s ? `${Math.round(o.figures_age_s)} s old` : "fresh"}; health from each table's last measurement (read again after a minute when shown). Files removed: per successful process, data files before − after plus the data, delete and manifest files an expiry deleted and the orphans a clean-up deleted (an expiry's manifest lists and statistics files are not counted) — the figure each action's chart shows.`),
    ),
  );
  stamp();
  if (o.measuring && overviewProgress.idle < 15) scheduleRefresh(token, 2000);
  else if (o.fleet_pending) scheduleRefresh(token, 1000); // the api-server computes it on a thread
}

// --- tables list ---------------------------------------------------------------------------------------------

const LIST_KEYS = ["q", "catalog", "namespace", "action", "status", "attention", "sort", "desc", "offset"];
const listState = {};

function readListState(query) {
  const p = new URLSearchParams(query || "");
  for (const k of LIST_KEYS) listState[k] = p.get(k) || "";
  listState.offset = Number(listState.offset || 0);
}
function writeListState(push = false) {
  const p = new URLSearchParams();
  for (const k of LIST_KEYS) if (listState[k]) p.set(k, String(listState[k]));
  const url = `#/tables${p.toString() ? "?" + p : ""}`;
  if (push) location.hash = url;
  else history.replaceState(null, "", url);
  syncParent();
}

async function renderTables(token) {
  setCrumb();
  const params = new URLSearchParams({ limit: String(PAGE_SIZE), offset: String(listState.offset) });
  for (const k of ["q", "catalog", "namespace", "action", "status", "sort"]) if (listState[k]) params.set(k, listState[k]);
  if (listState.attention) params.set("needs_attention", "true");
  if (listState.desc) params.set("desc", "true");
  const body = await api(`/tables?${params}`);
  if (token !== routeToken) return;
  let bar = document.getElementById("filters");
  if (!bar) {
    bar = filtersBar();
    view().replaceChildren(bar, h("div", { id: "results" }));
  }
  const items = list(body, "tables");
  document.getElementById("results").replaceChildren(tablesGrid(items, body.measuring), pager(total(body, items.length), items.length, body));
  stamp();
  // The tables of this page the server is measuring now: show their health when it is read.
  if (body.measuring) scheduleRefresh(token, 2500);
}

function filtersBar() {
  const go = () => { listState.offset = 0; writeListState(); route(); };
  const input = (name, placeholder, type = "text") =>
    h("input", { type, name, placeholder, value: listState[name], "aria-label": placeholder, onchange: (e) => { listState[name] = e.target.value; go(); } });
  const select = (name, label, options) =>
    h("select", { name, "aria-label": label, onchange: (e) => { listState[name] = e.target.value; go(); } },
      options.map(([v, text]) => h("option", { value: v, selected: v === listState[name] }, text)));
  const search = input("q", "Search tables or owners", "search");
  search.addEventListener("input", debounce((e) => { listState.q = e.target.value; go(); }, 250));
  const check = (name, label) => h("label", { class: "small" }, h("input", { type: "checkbox", name, checked: !!listState[name], onchange: (e) => { listState[name] = e.target.checked ? "1" : ""; go(); } }), ` ${label}`);
  return h(
    "div",
    { class: "filters", id: "filters" },
    search, input("catalog", "catalog"), input("namespace", "namespace"), input("action", "action"),
    select("status", "last status", ["", "SUCCESS", "FAILED", "PENDING", "SUBMITTED", "RUNNING", "CANCELING", "CANCELED", "KILLED"].map((s) => [s, s || "any last status"])),
    check("attention", "needs attention"),
    select("sort", "sort by", [["", "sort: table"], ["health", "sort: health score"], ["owner", "sort: owner"], ["catalog", "sort: catalog"], ["updated", "sort: last changed"]]),
    check("desc", "descending"),
  );
}
function debounce(fn, ms) {
  let t;
  return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
}

function tablesGrid(rows, measuring) {
  if (!rows.length) {
    const narrowed = ["q", "catalog", "namespace", "action", "status"].some((k) => listState[k]);
    let text = "No tables yet. Declare tables in dags/tables.yaml or register them with the REST API or `tablemgmt register`.";
    if (listState.attention) text = narrowed ? "No table matching these filters needs attention." : "No table needs attention: no measured table has a finding an action would fix.";
    else if (narrowed || listState.offset) text = "No table matches these filters.";
    return h("div", { class: "empty", dataset: { empty: listState.attention ? "attention" : narrowed ? "filters" : "none" } }, text);
  }
  return h(
    "table",
    { class: "grid", id: "tables" },
    h("thead", {}, h("tr", {}, h("th", {}, "Table"), h("th", {}, "Actions"), h("th", {}, "Health"), h("th", {}, "Owner"))),
    h("tbody", {}, rows.map((t) => {
      const id = tableId(t);
      const dyn = t.dynamic ? ["dynamic", t.dynamic.freshness && `freshness ${t.dynamic.freshness}`, t.dynamic.state].filter(Boolean).join(" · ") : "";
      return h(
        "tr",
        { dataset: { table: id } },
        h("td", {}, h("a", { href: tableHref(id) }, id), h("div", { class: "muted small" }, [t.format, dyn, t.managed_by && `managed by ${t.policy ? `policy ${t.policy}` : t.managed_by}`].filter(Boolean).join(" · "))),
        h("td", {}, h("div", { class: "badges" }, (t.actions || []).map((a) => badge(a, { ...(t.badges || {})[a], table: id })))),
        h("td", {}, rowHealth(t.health, measuring)),
        h("td", {}, t.owner || ""),
      );
    })),
  );
}

function pager(n, shown, body) {
  const from = n ? listState.offset + 1 : 0;
  const go = (d) => () => { listState.offset = Math.max(0, listState.offset + d); writeListState(true); };
  return h(
    "div",
    { class: "pager" },
    h("button", { disabled: listState.offset === 0, onclick: go(-PAGE_SIZE) }, "‹ Prev"),
    h("span", { class: "muted small", id: "count" }, `${from}–${listState.offset + shown} of ${n}`),
    h("button", { disabled: listState.offset + shown >= n, onclick: go(PAGE_SIZE) }, "Next ›"),
    h("span", { class: "muted small" }, `${fmtNum(body.measured)} tables measured${body.measuring ? `, ${body.measuring} being measured` : ""}`),
  );
}

// --- table page: tabs ----------------------------------------------------------------------------------------

const TABS = [["details", "Details"], ["files", "Files"], ["snapshots", "Snapshots"], ["maintenance", "Maintenance"], ["history", "History"]];

async function renderTable(id, query, token, keepScroll = false) {
  const enc = encodeURIComponent(id);
  const q = new URLSearchParams(query || "");
  const tab = TABS.some(([k]) => k === q.get("tab")) ? q.get("tab") : "details";
  const focus = q.get("action") || "";
  setCrumb(id);
  const metaTab = ["details", "files", "snapshots"].includes(tab);
  const tableP = api(`/tables/${enc}`);
  const details = tab === "details";
  const [table, health, procsBody, meta, perms, effective, cost] = await Promise.all([
    tableP,
    settle(api(`/tables/${enc}/health`)),
    api(`/processes?${new URLSearchParams({ table: id, limit: "200" })}`),
    metaTab ? settle(api(`/tables/${enc}/${tab}`)) : Promise.resolve(null),
    // the buttons of the Maintenance and History tabs: disabled where the user may not use them
    ["maintenance", "history"].includes(tab) ? tableP.then((t) => permissionsFor(list(t.actions).map((a) => a.dag_id)), () => ({})) : Promise.resolve({}),
    // Details: every effective setting with its source (a declaration, a policy, the defaults) and the cost per day
    details ? settle(api(`/tables/${enc}/explain?read_properties=false`)) : Promise.resolve(null),
    details ? settle(api(`/cost?${new URLSearchParams({ by: "day", table: id, days: "30" })}`)) : Promise.resolve(null),
  ]);
  if (token !== routeToken) return;
  const procs = list(procsBody, "processes").sort((a, b) => execTime(b) - execTime(a) || b.id - a.id);
  const actions = list(table.actions);
  const score = health && !health.error ? health.health : null;
  const tabs = h("nav", { class: "tabs", id: "tabs" }, TABS.map(([k, label]) => h("a", { href: tableHref(id, k, k === "maintenance" || k === "history" ? focus : ""), class: k === tab ? "active" : "", dataset: { tab: k } }, label)));
  const body = {
    details: () => detailsTab(table, health, meta, effective, cost),
    files: () => filesTab(health, meta),
    snapshots: () => snapshotsTab(health, procs, meta),
    maintenance: () => maintenanceTab(id, actions, procs, focus, perms),
    history: () => historyTab(procs, focus, perms),
  }[tab]();
  view().replaceChildren(
    h("div", { class: "title-row" }, h("h2", { id: "table-title" }, id),
      h("span", { class: "format-badge", id: "format-badge", dataset: { format: (table.spec || {}).format || "" } }, (table.spec || {}).format || "?"),
      score ? scorePill({ ...score }) : null,
      score && score.findings.length ? h("span", { class: "why" }, score.findings.map((f) => f.reason).join("; ")) : h("span", { class: "muted small" }, score ? "no action would help now" : "")),
    tabs,
    h("div", { id: `tab-${tab}`, class: "tab" }, body),
  );
  stamp();
  if (focus && tab === "maintenance" && !keepScroll) {
    const el = document.querySelector(`section.action[data-action="${CSS.escape(focus)}"]`);
    if (el) { el.classList.add("focus"); el.scrollIntoView({ block: "start" }); }
  } else if (focus && tab === "maintenance") {
    const el = document.querySelector(`section.action[data-action="${CSS.escape(focus)}"]`);
    if (el) el.classList.add("focus");
  }
  if (procs.some((p) => ACTIVE.has(p.status))) scheduleRefresh(token);
}

function kv(rows) {
  return h("table", { class: "kv" }, h("tbody", {}, rows.filter(([, v]) => v !== undefined).map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, v instanceof Node ? v : String(v ?? "–"))))));
}

const metaError = (meta, what) => h("p", { class: "muted", dataset: { metaError: "1" } }, `${what} unavailable${meta && meta.error ? `: ${meta.error}` : ""}`);

// The Details, Files and Snapshots tabs render what the table's format declared (docs/writing-a-format-plugin.md,
// "Table views"): one shape for every format, a key the format cannot fill being null and left out here.
function schemaBlock(meta) {
  if (!meta || meta.error) return metaError(meta, "Schema, partition spec and sort order");
  const spec = meta.partition_spec.fields, sort = meta.sort_order.fields;
  return h("div", {},
    h("h3", {}, meta.schema_id === null || meta.schema_id === undefined ? "Schema" : `Schema (id ${meta.schema_id})`),
    meta.columns ? h("table", { class: "grid", id: "schema" }, h("thead", {}, h("tr", {}, ["Id", "Column", "Type", "Required", "Doc"].map((c) => h("th", {}, c)))),
      h("tbody", {}, meta.columns.map((c) => h("tr", { dataset: { column: c.name } }, h("td", { class: "num" }, String(c.id)), h("td", {}, c.name), h("td", { class: "small" }, c.type), h("td", {}, c.required ? "yes" : "no"), h("td", { class: "small" }, c.doc || "")))))
      : h("p", { class: "muted", id: "schema" }, "The table's metadata records no schema where it is read without a JVM."),
    h("h3", {}, "Partition spec and sort order"),
    kv([
      ["Partition spec", h("span", { id: "partition-spec" }, spec.length ? spec.map((f) => `${f.transform}(${f.source}) as ${f.name}`).join(", ") : "unpartitioned")],
      ["Sort order", h("span", { id: "sort-order" }, sort.length ? sort.map((f) => `${f.transform === "identity" ? f.source : `${f.transform}(${f.source})`} ${f.direction} ${f.null_order.replace("-", " ")}`).join(", ") : "unsorted")],
      ["Location", meta.location], ["Format version", meta.format_version], ["Current snapshot", meta.current_snapshot_id || "none"], ["Last updated", when(meta.last_updated)],
      ["Catalog", `${meta.catalog.name} (${meta.catalog.type}${meta.catalog.warehouse ? `, ${meta.catalog.warehouse}` : ""}${meta.catalog.uri ? `, ${meta.catalog.uri}` : ""})`],
    ]),
    viewFiguresBlock(meta.figures),
    h("h3", {}, "Properties"),
    Object.keys(meta.properties).length
      ? h("table", { class: "kv", id: "properties" }, h("tbody", {}, Object.entries(meta.properties).map(([k, v]) => h("tr", { dataset: { property: k } }, h("th", {}, k), h("td", { class: "small" }, v)))))
      : h("p", { class: "muted" }, "No table property."));
}

// A format's own figures in its Details view (files, commits, ... by its own names).
function viewFiguresBlock(figures) {
  if (!figures || !Object.keys(figures).length) return null;
  const show = (k, v) => (k.endsWith("bytes") && typeof v === "number" ? fmtBytes(v) : typeof v === "number" ? fmtNum(v) : v === null || v === undefined ? "–" : String(v));
  return h("div", {}, h("h3", {}, "Figures"),
    h("table", { class: "kv", id: "view-figures" }, h("tbody", {}, Object.entries(figures).map(([k, v]) =>
      h("tr", { dataset: { figure: k } }, h("th", {}, k.replaceAll("_", " ")), h("td", { class: "num" }, show(k, v)))))));
}

function detailsTab(table, health, meta, effective, cost) {
  const s = table.spec || {};
  return h("div", {},
    kv([["Table", table.table], ["Catalog", s.catalog], ["Namespace", s.namespace], ["Format", s.format], ["Owner", s.owner || "–"], ["Queue", s.queue], ["Priority", s.priority], ["Managed by", table.policy ? `policy ${table.policy}` : table.managed_by]]),
    schemaBlock(meta),
    h("h3", {}, "Health score"),
    healthScoreBlock(health),
    h("h3", {}, "Effective settings"),
    effectiveBlock(effective),
    h("h3", {}, "Cost per day (last 30 days)"),
    tableCostBlock(cost),
    h("h3", {}, "Actions and options as declared"),
    h("pre", { class: "json" }, JSON.stringify(s.actions || {}, null, 2)),
  );
}

/** GET /tables/{id}/explain: each enabled action's settings, each with where it comes from (table, policy:<name>, default). */
function effectiveBlock(ex) {
  if (!ex || (ex.error && !ex.actions)) return h("p", { class: "muted", id: "effective" }, `Effective settings unavailable${ex && ex.error ? `: ${ex.error}` : ""}`);
  const show = (v) => (v !== null && typeof v === "object" ? JSON.stringify(v) : String(v ?? "–"));
  const rows = Object.entries(ex.actions || {}).flatMap(([action, keys]) => Object.entries(keys).map(([key, st]) =>
    h("tr", { dataset: { action, key, source: st.source } }, h("td", {}, action), h("td", {}, key), h("td", { class: "small" }, show(st.value)), h("td", { class: "small source" }, st.source))));
  const policies = list(ex.policies).map((p) => (p.applies ? p.name : `${p.name} (does not apply)`));
  return h("div", { id: "effective" },
    h("p", { class: "small" }, `Enabled: ${list(ex.enabled).join(", ") || "none"} · matching policies, most specific first: ${policies.join(", ") || "none"}${ex["opted-out"] ? ` · opted out: ${ex["opted-out"]}` : ""}`),
    list(ex.notes).map((n) => h("p", { class: "muted small" }, n)),
    ex.error ? h("p", { class: "muted small" }, ex.error) : null,
    rows.length ? h("table", { class: "grid" }, h("thead", {}, h("tr", {}, ["Action", "Setting", "Value", "Source"].map((c) => h("th", {}, c)))), h("tbody", {}, rows)) : null,
    h("p", { class: "muted small" }, "A table's own declaration wins over the most specific matching policy, then a catalog-wide one, then the defaults (docs/policies.md). The same as tablemgmt explain."));
}

/** GET /cost?by=day&table=…: what this table's maintenance cost per UTC day. */
function tableCostBlock(c) {
  const items = c && !c.error ? list(c, "items") : [];
  if (!items.length) return h("p", { class: "muted", id: "table-cost" }, c && c.error ? `Cost unavailable: ${c.error}` : "No process finished in the last 30 days.");
  return h("table", { class: "grid", id: "table-cost" },
    h("thead", {}, h("tr", {}, ["Day", "Runs", "Measured", "Core-s", "CPU-s", "Read", "Written", "Files removed"].map((t) => h("th", {}, t)))),
    h("tbody", {}, items.map((r) => h("tr", { dataset: { day: r.day, coreSeconds: String(r.core_seconds) } },
      h("td", {}, r.day), h("td", { class: "num" }, fmtNum(r.n)), h("td", { class: "num" }, fmtNum(r.measured)),
      h("td", { class: "num" }, fmtNum(Math.round(r.core_seconds * 10) / 10)), h("td", { class: "num" }, fmtNum(Math.round(r.cpu_seconds * 10) / 10)),
      h("td", { class: "num" }, fmtBytes(r.bytes_read)), h("td", { class: "num" }, fmtBytes(r.bytes_written)), h("td", { class: "num" }, fmtNum(r.files_removed))))));
}

function healthScoreBlock(health) {
  if (!health || health.error || !health.health) return h("p", { class: "muted", id: "health" }, `Health unavailable${health && health.error ? `: ${health.error}` : ""}`);
  const sc = health.health;
  return h("div", { id: "health" },
    h("p", {}, scorePill(sc), ` ${sc.score} / 100 — ${sc.needs_attention ? "an action would help" : "no action would help now"}`),
    sc.findings.length ? h("ul", {}, sc.findings.map((f) => h("li", { dataset: { finding: f.kind } }, h("b", {}, `−${f.points} ${f.action}: `), f.reason))) : null,
    formatFiguresBlock(health.format_health),
    h("p", { class: "muted small" }, "100 minus the points of each finding; a finding exists only when a maintenance action would fix it (docs/ui.md)."));
}

// A format with its own health hook (docs/writing-a-format-plugin.md): the figures it read, by its own names.
function formatFiguresBlock(own) {
  if (!own) return null;
  const show = (v) => (typeof v === "number" ? fmtNum(v) : v === null || v === undefined ? "–" : String(v));
  return h("div", { id: "format-health", dataset: { format: own.format } },
    h("h4", {}, `Measured from the ${own.format} table's own metadata`),
    h("table", { class: "kv", id: "format-figures" }, h("tbody", {}, Object.entries(own.figures).map(([k, v]) =>
      h("tr", { dataset: { figure: k } }, h("th", {}, k.replaceAll("_", " ")), h("td", { class: "num" }, k.endsWith("bytes") && typeof v === "number" ? fmtBytes(v) : show(v)))))));
}

function bucketLabels(meta) {
  const b = meta.buckets, fr = meta.bucket_fractions;
  return [...b.map((v, i) => `< ${fmtBytes(v)} (${Math.round(fr[i] * 100)} %)`), `≥ ${fmtBytes(b[b.length - 1])}`];
}

function histogram(counts, labels, smallBuckets) {
  const max = Math.max(...counts, 1);
  return h("div", { class: "histogram" }, counts.map((n, i) => h("div", { class: `hbar${i < smallBuckets ? " small-bucket" : ""}`, dataset: { bucket: String(i), count: String(n) } },
    h("span", { class: "label" }, labels[i]), h("span", { class: "fill", style: `width:${(100 * n) / max}%` }), h("b", {}, fmtNum(n)))));
}

function partitionsBlock(meta) {
  if (!meta || meta.error) return metaError(meta, "Per-partition files");
  const labels = bucketLabels(meta);
  const small = meta.bucket_fractions.indexOf(0.75) + 1;
  const dvs = meta.totals.deletion_vectors || 0; // a v3 table's deletion vectors, apart from its delete files
  return h("div", {},
    h("h3", {}, `Data file sizes against the target ${fmtBytes(meta.target_file_size_bytes)} (all partitions)`),
    histogram(meta.totals.histogram, labels, small),
    h("p", { class: "muted small" }, `Bars in red are small files (under 75 % of the target), what ${meta.compaction_action || "rewrite-files"} rewrites. ${fmtNum(meta.totals.data_files)} data files, ${fmtNum(meta.totals.delete_files - (meta.totals.deletion_vectors || 0))} delete files${dvs ? `, ${fmtNum(dvs)} deletion vectors (${fmtNum(meta.totals.dv_deleted_rows)} rows deleted)` : ""}.`),
    h("h3", {}, `Per partition (${fmtNum(meta.partitions_total)}${meta.partitions.length < meta.partitions_total ? `, the ${meta.partitions.length} with the most files` : ""})`),
    h("table", { class: "grid", id: "partitions" }, h("thead", {}, h("tr", {}, ["Partition", "Data files", "Small", "Size", "Records", "Delete files", ...(dvs ? ["Deletion vectors"] : []), "Sizes (histogram buckets)"].map((c) => h("th", {}, c)))),
      h("tbody", {}, meta.partitions.map((p) => h("tr", { dataset: { partition: p.partition, files: String(p.data_files) } },
        h("td", {}, p.partition || "(unpartitioned)"), h("td", { class: "num" }, fmtNum(p.data_files)), h("td", { class: "num" }, fmtNum(p.small_files)),
        h("td", { class: "num" }, fmtBytes(p.data_bytes)), h("td", { class: "num" }, fmtNum(p.records)), h("td", { class: "num" }, fmtNum(p.delete_files - (p.deletion_vectors || 0))),
        dvs ? h("td", { class: "num" }, fmtNum(p.deletion_vectors || 0)) : null,
        h("td", { class: "small", title: labels.join(" | ") }, p.histogram.join(" · ")))))),
    filesListBlock(meta));
}

// The live files themselves, when the format's Files view lists them (at most the first 200).
function filesListBlock(meta) {
  if (!meta.files) return null;
  return h("div", {},
    h("h3", {}, `Files (${fmtNum(meta.files_total)}${meta.files.length < meta.files_total ? `, the first ${meta.files.length}` : ""})`),
    h("table", { class: "grid", id: "file-list" }, h("thead", {}, h("tr", {}, ["Path", "Partition", "Size", "Records", "Kind"].map((c) => h("th", {}, c)))),
      h("tbody", {}, meta.files.map((f) => h("tr", { dataset: { path: f.path } }, h("td", { class: "small" }, f.path), h("td", {}, f.partition || "(unpartitioned)"),
        h("td", { class: "num" }, fmtBytes(f.size_bytes)), h("td", { class: "num" }, fmtNum(f.records)), h("td", {}, f.delete ? "delete" : "data"))))));
}

function filesTab(health, meta) {
  const f = health && health.files;
  if (!f) return h("div", {}, healthScoreBlock(health), partitionsBlock(meta));
  const bars = [["data files now", f.data_files], ["after a compaction to the target", f.compacted_data_files]];
  const max = Math.max(...bars.map(([, v]) => v), 1);
  return h("div", {},
    h("div", { class: "cards", id: "files" },
      card("Data files", fmtNum(f.data_files), { dataset: { figure: "data_files", value: String(f.data_files) } }, `${fmtNum(f.records)} records`),
      card("Data size", fmtBytes(f.data_bytes), {}, `${fmtNum(f.partitions)} partitions`),
      card("Target file size", fmtBytes(f.target_file_size_bytes), {}, `small: under ${fmtBytes(f.small_file_threshold_bytes)}`),
      card("Small files", fmtNum(f.small_data_files), {}, `${fmtPct(f.small_file_ratio)} of data files`),
      card("Compaction would remove", fmtNum(f.excess_data_files), { class: `card ${f.excess_data_files && f.small_data_files >= f.min_input_files ? "hot" : ""}` }, `rewrite-files acts from ${f.min_input_files} small files`),
      card("Delete files", fmtNum(f.delete_files - (f.deletion_vectors || 0)), {}, `${fmtNum(f.deleted_rows)} rows deleted (${fmtPct(f.deleted_row_ratio)})${f.deletion_vectors ? ", deletion vectors included" : ""}`),
      f.deletion_vectors ? card("Deletion vectors", fmtNum(f.deletion_vectors), { dataset: { figure: "deletion_vectors", value: String(f.deletion_vectors) } }, `${fmtNum(f.dv_deleted_rows)} rows deleted, in ${fmtNum(f.dv_files)} Puffin files`) : null,
    ),
    h("div", { class: "hbars" }, bars.map(([label, v]) => h("div", { class: "hbar" }, h("span", { class: "label" }, label), h("span", { class: "fill", style: `width:${(100 * v) / max}%` }), h("b", {}, fmtNum(v))))),
    partitionsBlock(meta),
  );
}

function timelineBlock(meta) {
  if (!meta || meta.error) return metaError(meta, "The snapshot timeline");
  const snaps = [...meta.snapshots].reverse();
  const label = meta.entry_label || "snapshots";
  const change = (a, r) => `+${fmtNum(a)} / −${fmtNum(r)}`;
  const known = (...keys) => snaps.some((s) => keys.some((k) => s[k] !== null && s[k] !== undefined));
  // [header, cell, shown]: a column no entry fills (the format does not record it) is left out
  const cols = [
    ["Committed", (s) => h("td", {}, when(s.committed_at)), true],
    [label === "snapshots" ? "Snapshot" : "Id", (s) => h("td", { class: "small" }, `${s.snapshot_id}${s.current ? " (current)" : ""}`), true],
    ["Operation", (s) => h("td", {}, s.operation || "–"), true],
    ["Data files +/−", (s) => h("td", { class: "num" }, change(s.added_data_files, s.removed_data_files)), known("added_data_files", "removed_data_files")],
    ["Delete files +/−", (s) => h("td", { class: "num" }, change(s.added_delete_files, s.removed_delete_files)), known("added_delete_files", "removed_delete_files")],
    ["Deletion vectors +/−", (s) => h("td", { class: "num" }, change(s.added_dvs, s.removed_dvs)), snaps.some((s) => s.added_dvs || s.removed_dvs)],
    ["Records +/−", (s) => h("td", { class: "num" }, change(s.added_records, s.removed_records)), known("added_records", "removed_records")],
    ["Bytes +/−", (s) => h("td", { class: "num" }, `+${fmtBytes(s.added_bytes)} / −${fmtBytes(s.removed_bytes)}`), known("added_bytes", "removed_bytes")],
    ["Net records", (s) => h("td", { class: "num" }, fmtNum(s.net_records)), known("net_records")],
    ["Total records", (s) => h("td", { class: "num" }, fmtNum(s.total_records)), !snaps.length || known("total_records")],
  ].filter(([, , shown]) => shown);
  const pending = meta.pending || [];
  return h("div", {},
    h("h3", {}, `Timeline (${fmtNum(snaps.length)} ${label}, newest first)`),
    snaps.length
      ? h("table", { class: "grid", id: "timeline" }, h("thead", {}, h("tr", {}, cols.map(([c]) => h("th", {}, c)))),
          h("tbody", {}, snaps.map((s) => h("tr", { dataset: { snapshot: s.snapshot_id, operation: s.operation || "" }, class: s.current ? "current" : "" },
            cols.map(([, cell]) => cell(s))))))
      : h("p", { class: "muted" }, `The table has no ${label === "snapshots" ? "snapshot" : label}.`),
    pending.length
      ? h("p", { class: "muted small", id: "pending" }, `Pending: ${pending.map((p) => `${p.snapshot_id} ${p.operation} (${p.state})`).join(", ")}`)
      : null);
}

function snapshotsTab(health, procs, meta) {
  const f = health && health.files;
  const changes = procs.filter((p) => p.status === "SUCCESS" && p.summary && p.summary.before && p.summary.after);
  return h("div", {},
    f ? h("div", { class: "cards", id: "snapshots" },
      card("Snapshots", fmtNum(f.snapshots), {}, `current ${f.snapshot_id || "–"}`),
      card("Expiry would drop", fmtNum(f.expirable_snapshots), {}, `older than ${fmtSec(f.snapshot_max_age_s)}`),
      card("Oldest snapshot", fmtSec(f.oldest_snapshot_age_s), {}, "age"),
      card("Current snapshot", fmtSec(f.current_snapshot_age_s), {}, "age"),
      card("Manifests", fmtNum(f.manifests), {}, fmtBytes(f.manifest_bytes)),
    ) : healthScoreBlock(health),
    timelineBlock(meta),
    h("h3", {}, "Snapshots written by maintenance"),
    changes.length
      ? h("table", { class: "grid" }, h("thead", {}, h("tr", {}, ["Finished", "Action", "Snapshot before → after", "Data files", "Records", "Snapshots"].map((c) => h("th", {}, c)))),
          h("tbody", {}, changes.map((p) => { const b = p.summary.before, a = p.summary.after; return h("tr", {}, h("td", {}, when(p.finished_at)), h("td", {}, p.action), h("td", { class: "small" }, `${b.current_snapshot_id ?? "–"} → ${a.current_snapshot_id ?? "–"}`), h("td", { class: "num" }, `${fmtNum(b.data_files)} → ${fmtNum(a.data_files)}`), h("td", { class: "num" }, `${fmtNum(b.live_records)} → ${fmtNum(a.live_records)}`), h("td", { class: "num" }, `${fmtNum(b.snapshots)} → ${fmtNum(a.snapshots)}`)); })))
      : h("p", { class: "muted" }, "No maintenance has changed this table yet."),
  );
}

function maintenanceTab(id, actions, procs, focus, perms) {
  if (!actions.length) return h("p", { class: "muted" }, "No action is enabled on this table.");
  return h("div", {}, actions.map((info) => {
    const a = info.action;
    const mine = procs.filter((p) => p.action === a);
    const last = mine[0];
    const lastOk = mine.find((p) => p.status === "SUCCESS");
    const anchor = `section.action[data-action="${a}"] h3`;
    const run = h("button", allowed(perms, info.dag_id, "run", { class: "primary", dataset: { run: a }, onclick: (e) => runNow(id, a, info.dag_id, e.target, info.paused, anchor) }), "Run now");
    const pause = info.paused == null ? null : h("button", allowed(perms, info.dag_id, "edit", { dataset: { pause: a }, onclick: (e) => setPaused(info.dag_id, !info.paused, e.target, anchor) }), info.paused ? "Resume schedule" : "Pause schedule");
    return h("section", { class: "action", dataset: { action: a } },
      h("h3", {}, a, badge(a, { last_status: last && last.status, last_success: lastOk && (lastOk.finished_at || lastOk.instant), last_reason: last && last.failure_reason }),
        h("span", { class: "spacer" }), pause, run),
      h("p", { class: "muted small" }, [info.schedule, info.paused ? "paused" : info.paused === false ? "active" : "not parsed by Airflow yet", info.next_run && `next run ${when(info.next_run)}`, link(`/dags/${encodeURIComponent(info.dag_id)}`, `DAG ${info.dag_id}`, { target: "_top" })].filter(Boolean).flatMap((x, i) => (i ? [" · ", x] : [x]))),
      actionCharts(a, mine),
    );
  }));
}

function logHref(p) {
  if (!p.dag_id || !p.run_id) return null;
  return `/dags/${encodeURIComponent(p.dag_id)}/runs/${encodeURIComponent(p.run_id)}/tasks/${encodeURIComponent(p.task_id || "maintain")}`;
}
function triggerOf(p) {
  const t = pick(p, "summary.trigger", "parameters.trigger");
  if (t) return String(t);
  const r = p.run_id || "";
  return r.startsWith("manual__") ? "manual" : r.startsWith("scheduled__") ? "schedule" : r.startsWith("asset_triggered__") ? "snapshot" : r ? r.split("__")[0] : "–";
}

function historyTab(procs, focus, perms) {
  const rows = focus ? procs.filter((p) => p.action === focus) : procs;
  return h("div", {},
    focus ? h("p", { class: "small" }, `Processes of ${focus} · `, link(location.hash.replace(/([?&])action=[^&]*/, "$1").replace(/[?&]$/, ""), "all actions")) : null,
    processTable(rows, perms),
    h("p", { class: "muted small" }, "Lease wait: opened → the table's lease taken (– : the action takes no lease). Queue wait: the lease taken → running (planning, submission, the cluster's queue). Run: running → finished. Job: the Spark job. Total: opened → finished. Cost: executor core-seconds (Spark's task run time summed) · bytes read → written by its tasks. The same figures as tablemgmt processes. Newest first."));
}

/** A process's cost (core/cost.py): executor core-seconds, with CPU seconds and bytes read and written in its title. */
function costCell(p) {
  if (p.core_seconds == null) return h("td", { class: "num", title: "not measured (no Spark job, or a run before cost was recorded)" }, "–");
  const title = `${fmtNum(p.core_seconds)} executor core-seconds (task run time summed), ${fmtNum(p.cpu_seconds)} CPU seconds; read ${fmtBytes(p.bytes_read)}, written ${fmtBytes(p.bytes_written)}`;
  return h("td", { class: "num", title, dataset: { coreSeconds: String(p.core_seconds), bytesRead: String(p.bytes_read), bytesWritten: String(p.bytes_written) } },
    `${fmtNum(Math.round(p.core_seconds * 10) / 10)} core-s · ${fmtBytes(p.bytes_read)} → ${fmtBytes(p.bytes_written)}`);
}

function processTable(procs, perms = {}) {
  if (!procs.length) return h("div", { class: "empty", id: "processes" }, "No process yet. Run now starts one.");
  return h(
    "table",
    { class: "grid", id: "processes" },
    h("thead", {}, h("tr", {}, ["Id", "Action", "Trigger", "Started", "Finished", "Status", "Lease wait", "Queue wait", "Run", "Job", "Total", "Cost", "Files", "Reason", "Log", ""].map((c) => h("th", {}, c)))),
    h("tbody", {}, procs.map((p) => {
      const t = p.timings || {};
      const s = p.summary || {};
      const cancel = ACTIVE.has(p.status) && p.status !== "CANCELING"
        ? h("button", allowed(perms, p.dag_id, "cancel", { class: "danger", dataset: { cancel: String(p.id) }, onclick: (e) => cancelProcess(p, e.target) }), "Cancel")
        : null;
      const before = pick(s, "before.data_files"), after = pick(s, "after.data_files");
      const log = logHref(p);
      return h(
        "tr",
        { dataset: { process: String(p.id), status: p.status } },
        h("td", { class: "num" }, String(p.id)),
        h("td", {}, p.action),
        h("td", {}, triggerOf(p)),
        h("td", { title: `instant ${when(p.instant)}` }, when(p.started_at || p.created_at)),
        h("td", {}, when(p.finished_at)),
        h("td", {}, h("span", { class: `status ${p.status}` }, p.status)),
        h("td", { class: "num", dataset: { leaseWait: String(t.lease_wait_s ?? "") } }, fmtSec(t.lease_wait_s)),
        h("td", { class: "num", dataset: { queueWait: String(t.queue_wait_s ?? ""), wait: String(t.wait_s ?? "") } }, fmtSec(t.queue_wait_s)),
        h("td", { class: "num" }, fmtSec(t.run_s)),
        h("td", { class: "num" }, fmtSec(t.job_s)),
        h("td", { class: "num" }, fmtSec(t.total_s)),
        costCell(p),
        h("td", { class: "num" }, before !== undefined || after !== undefined ? `${fmtNum(before)} → ${fmtNum(after)}` : "–"),
        h("td", { class: "reason" }, procReason(p)),
        h("td", {}, log ? h("a", { href: log, target: "_top", class: "log" }, "task log") : "–"),
        h("td", {}, cancel),
      );
    })),
  );
}

// --- dynamic tables ------------------------------------------------------------------------------------------

async function renderDynamicList(token) {
  setCrumb();
  const body = await api("/dynamic-tables?limit=200");
  if (token !== routeToken) return;
  const items = list(body);
  view().replaceChildren(items.length
    ? h("table", { class: "grid", id: "dynamic-tables" }, h("thead", {}, h("tr", {}, ["Dynamic table", "State", "Freshness", "Last refresh", "Finished"].map((c) => h("th", {}, c)))),
        h("tbody", {}, items.map((d) => h("tr", { dataset: { table: d.table } }, h("td", {}, link(`#/dynamic/${encodeURIComponent(d.table)}`, d.table)), h("td", {}, h("span", { class: `status ${d.state}` }, d.state)), h("td", {}, d.freshness), h("td", {}, d.last_refresh ? `${d.last_refresh.state} ${d.last_refresh.refresh_action || ""}` : "never"), h("td", {}, when(d.last_refresh && d.last_refresh.finished_at))))))
    : h("div", { class: "empty" }, "No dynamic table. Declare one under dynamic-tables: in tables.yaml or POST /tablemgmt/v1/dynamic-tables."));
  stamp();
}

/** Freshness lag: now minus the end of the last period a successful refresh completed (its schedule time),
 * or its finish when it has none. */
function freshnessLag(history) {
  const ok = history.find((r) => r.state === "SUCCESS");
  if (!ok) return null;
  const at = ok.schedule_time ? Date.parse(ok.schedule_time.replace(" ", "T") + "Z") : Date.parse(ok.finished_at);
  return isNaN(at) ? null : Math.max(0, (Date.now() - at) / 1000);
}

async function renderDynamic(id, token) {
  const enc = encodeURIComponent(id);
  setCrumb(id);
  const dagId = `tms__${id}__refresh`;
  const [dt, hist, perms] = await Promise.all([api(`/dynamic-tables/${enc}`), api(`/dynamic-tables/${enc}/history?limit=50`), permissionsFor([dagId])]);
  if (token !== routeToken) return;
  const history = list(hist);
  const def = dt.definition || {};
  const lag = freshnessLag(history);
  const suspended = dt.state === "SUSPENDED";
  const toggle = h("button", allowed(perms, dt.dag_id || dagId, "edit", { dataset: { dtAction: suspended ? "resume" : "suspend" }, onclick: (e) => dynamicAction(id, suspended ? "resume" : "suspend", e.target) }), suspended ? "Resume" : "Suspend");
  view().replaceChildren(
    h("div", { class: "title-row" }, h("h2", { id: "table-title" }, id), h("span", { class: `status ${dt.state}`, id: "dt-state" }, dt.state), h("span", { class: "spacer" }), toggle),
    h("div", { class: "cards" },
      card("Freshness", def.freshness || dt.freshness, {}, dt.cron ? `cron ${dt.cron} (UTC)` : "refreshed after its sources"),
      card("Freshness lag", lag == null ? "–" : fmtSec(lag), { id: "dt-lag" }, "now − last completed period"),
      card("Consecutive failures", fmtNum(dt.consecutive_failures), {}, dt.suspend_after_failures != null ? `suspends after ${dt.suspend_after_failures}` : ""),
      card("Next run", when(dt.next_run), {}, dt.paused ? "DAG paused" : dt.dag_id)),
    // replaceChildren, unlike h(), prints a null as the text "null": an empty string when there is no reason
    dt.suspended_reason ? h("p", { class: "notice denied" }, dt.suspended_reason) : "",
    h("h3", {}, "Definition"),
    kv([["Query", h("pre", { class: "json" }, def.query || "")], ["Sources", (history[0] && Object.keys(history[0].source_snapshots || {}).join(", ")) || "–"], ["Partitioned by", (def["partitioned-by"] || []).join(", ") || "–"],
        ["Partition formatters", formatters(def["partition-fields"])], ["Time zone", def["time-zone"] || "UTC"], ["Refresh mode", h("span", { id: "dt-refresh-mode" }, refreshModeText(dt.refresh_mode, def["refresh-mode"]))], ["Dynamic options", pairsText(dt.dynamic_options)]]),
    h("h3", {}, "Refresh (FLIP-435)"),
    refreshForm(id, allowed(perms, dt.dag_id || dagId, "run", {})),
    h("h3", {}, "Refresh history"),
    history.length
      ? h("table", { class: "grid", id: "refreshes" }, h("thead", {}, h("tr", {}, ["Id", "State", "Trigger", "Refresh", "Mode", "Schedule time", "Rows", "Partitions", "Duration", "Started", "Application", "Reason"].map((c) => h("th", {}, c)))),
          h("tbody", {}, history.map((r) => h("tr", { dataset: { process: String(r.process_id), status: r.state } },
            h("td", { class: "num" }, String(r.process_id)), h("td", {}, h("span", { class: `status ${r.state}` }, r.state)), h("td", {}, r.trigger || "–"),
            h("td", {}, r.refresh_action || "–"), h("td", {}, r.refresh_mode || "–"), h("td", {}, r.schedule_time || "–"), h("td", { class: "num" }, fmtNum(r.rows_written)),
            h("td", { class: "num" }, fmtNum((r.partitions_written || []).length)),
            h("td", { class: "num" }, r.refresh_action === "NO_DATA" ? "no data: skipped" : fmtSec(r.duration_seconds)),
            h("td", {}, when(r.started_at)), h("td", { class: "small" }, r.application_id || "–"), h("td", { class: "reason" }, r.reason || r.refresh_mode_reason || "")))))
      : h("p", { class: "muted" }, "No refresh yet."),
  );
  stamp();
}

// "AUTO → FULL: <why>": the declared refresh mode, the one its refreshes get and why (issue 41).
function refreshModeText(mode, declared) {
  if (!mode) return declared || "AUTO";
  const got = mode.mode || "refused";
  return `${got === mode.declared ? got : `${mode.declared} → ${got}`}: ${mode.reason}`;
}

// Shown as text, never as JSON: a key without a value reads "none", not a literal null.
function formatters(fields) {
  const entries = Object.entries(fields || {});
  return entries.length ? entries.map(([col, f]) => `${col}: ${(f && (f["date-formatter"] || f.date_formatter)) || "no date formatter"}`).join(", ") : "none";
}
function pairsText(options) {
  const entries = Object.entries(options || {});
  return entries.length ? entries.map(([k, v]) => `${k}=${v ?? ""}`).join(", ") : "none";
}

function pairs(text) {
  const out = {};
  for (const line of String(text || "").split(/[\n,]/)) {
    const [k, ...v] = line.split("=");
    if (k && k.trim()) out[k.trim()] = v.join("=").trim();
  }
  return out;
}

function refreshForm(id, permitted = {}) {
  const periodic = h("input", { type: "checkbox", name: "isPeriodic" });
  const time = h("input", { type: "datetime-local", name: "scheduleTime", step: "1" });
  const parts = h("textarea", { name: "staticPartitions", rows: "2", placeholder: "day=2026-11-25" });
  const opts = h("textarea", { name: "dynamicOptions", rows: "2", placeholder: "spark.sql.shuffle.partitions=8" });
  const submit = h("button", { class: "primary", type: "submit", ...permitted }, "Refresh");
  return h("form", {
    class: "refresh", id: "refresh-form", onsubmit: async (e) => {
      e.preventDefault();
      submit.disabled = true;
      clearNotice();
      const body = { isPeriodic: periodic.checked, staticPartitions: pairs(parts.value), dynamicOptions: pairs(opts.value) };
      if (time.value) body.scheduleTime = time.value.replace("T", " ") + (time.value.length === 16 ? ":00" : "");
      try {
        const res = await api(`/dynamic-tables/${encodeURIComponent(id)}/refresh`, { method: "POST", body });
        notify("info", `Refresh of ${id} submitted — process ${res.jobId}${res.dagRunId ? ` (DAG run ${res.dagRunId})` : ""}.`, "#refresh-form");
      } catch (err) {
        explain(err, `refresh ${id}`, "#refresh-form");
      } finally {
        submit.disabled = !!permitted.disabled;
      }
      await refresh();
    },
  },
  h("label", {}, periodic, " periodic (refresh scheduleTime's period)"),
  h("label", {}, "schedule time ", time, h("span", { class: "muted small" }, " in the table's time zone")),
  h("label", {}, "static partitions ", parts),
  h("label", {}, "options ", opts),
  submit);
}

async function dynamicAction(id, what, button) {
  button.disabled = true;
  clearNotice();
  try {
    const res = await api(`/dynamic-tables/${encodeURIComponent(id)}/${what}`, { method: "POST", body: {} });
    notify("info", `${id} is ${res.state}.`, ".title-row");
  } catch (err) {
    explain(err, `${what} ${id}`, ".title-row");
  } finally {
    button.disabled = false;
  }
  await refresh();
}

// --- mutations -------------------------------------------------------------------------------------------

async function runNow(id, action, dagId, button, paused, anchor) {
  button.disabled = true;
  clearNotice();
  try {
    const res = await api(`/tables/${encodeURIComponent(id)}/actions/${encodeURIComponent(action)}/runs`, { method: "POST", body: {} });
    const pid = pick(res, "process_id", "process.id", "process", "id");
    const run = pick(res, "dag_run_id", "run_id");
    // Airflow starts no run of a paused DAG: say so where the user pressed, beside the Resume button.
    const waits = paused ? ` Its schedule is paused: Airflow starts the run once you resume it (Resume schedule).` : "";
    notify("info", `${paused ? "Queued" : "Started"} ${action} on ${id}${pid !== undefined ? ` — process ${pid}` : ""}${run ? ` (DAG run ${run})` : ""}.${waits}`, anchor);
  } catch (err) {
    explain(err, `run ${action} on ${id} (DAG ${dagId})`, anchor);
  } finally {
    button.disabled = false;
  }
  await refresh();
}

async function setPaused(dagId, paused, button, anchor = null) {
  button.disabled = true;
  clearNotice();
  try {
    // Airflow's own API: pausing is Airflow's decision, under Airflow's permissions.
    const res = await fetch(`/api/v2/dags/${encodeURIComponent(dagId)}`, {
      method: "PATCH", credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ is_paused: paused }),
    });
    if (!res.ok) throw new ApiError(res.status, detailText(await res.json().catch(() => null)) || res.statusText, dagId);
    notify("info", `${dagId} is ${paused ? "paused" : "active"}.`, anchor);
  } catch (err) {
    explain(err, `${paused ? "pause" : "resume"} ${dagId}`, anchor);
  } finally {
    button.disabled = false;
  }
  await refresh();
}

async function cancelProcess(p, button) {
  button.disabled = true;
  clearNotice();
  const anchor = `#processes tr[data-process="${p.id}"]`;
  try {
    const res = await api(`/processes/${encodeURIComponent(p.id)}/cancel`, { method: "POST", body: {} });
    notify("info", `Process ${p.id} (${p.action}) is ${pick(res, "status") || "being canceled"}.`, anchor);
  } catch (err) {
    explain(err, `cancel process ${p.id} (${p.action})`, anchor);
    button.disabled = false;
  }
  await refresh();
}

// --- routing, and the outer page's URL -------------------------------------------------------------------

let routeToken = 0;
let refreshTimer = null;

function scheduleRefresh(token, ms = REFRESH_MS) {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(() => { if (token === routeToken) refresh(); }, ms);
}
function stamp() {
  // UTC and 24-hour, as every other time on the page
  document.getElementById("updated").textContent = `updated ${new Date().toISOString().slice(11, 19)} UTC`;
}
async function refresh() {
  return route(true);
}

/** Inside Airflow's frame: mirror this view's hash onto the outer page's URL (same origin), so the
 * address bar names the view and a reload or a shared link opens it. */
function syncParent() {
  try {
    if (window.parent === window) return;
    const outer = window.parent.location;
    const want = location.hash && location.hash !== "#" ? location.hash : "#/";
    if (outer.hash !== want) window.parent.history.replaceState(window.parent.history.state, "", outer.pathname + outer.search + want);
  } catch (_) {
    /* another origin: nothing to mirror */
  }
}
/** Opened through a deep link: the outer page's hash names the view this frame should show; and when
 * the outer hash changes (edited in the address bar), the frame follows it. */
function adoptParent() {
  try {
    if (window.parent === window) return;
    const outer = () => window.parent.location.hash;
    if ((!location.hash || location.hash === "#/") && outer().startsWith("#/")) history.replaceState(null, "", outer());
    window.parent.addEventListener("hashchange", () => {
      if (outer().startsWith("#/") && outer() !== location.hash) location.hash = outer();
    });
  } catch (_) {
    /* another origin */
  }
}

async function route(keepNotice = false) {
  const token = ++routeToken;
  clearTimeout(refreshTimer);
  if (!keepNotice) {
    clearNotice();
    Object.assign(overviewProgress, { measured: -1, idle: 0 }); // a new visit: measure (and wait) again
  }
  syncParent();
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", path.startsWith(a.dataset.route) && (a.dataset.route !== "/" || path === "/"));
  try {
    let m;
    if ((m = path.match(/^\/tables\/(.+)$/))) {
      await renderTable(decodeURIComponent(m[1]), query, token, keepNotice);
    } else if (path === "/tables") {
      if (!document.getElementById("filters")) view().replaceChildren(h("p", { class: "muted" }, "Loading…"));
      readListState(query);
      await renderTables(token);
    } else if ((m = path.match(/^\/dynamic\/(.+)$/))) {
      await renderDynamic(decodeURIComponent(m[1]), token);
    } else if (path === "/dynamic") {
      await renderDynamicList(token);
    } else if ((m = path.match(/^\/dags?\/(.+)$/))) {
      // tms__<catalog>.<namespace>.<table>__<action>: the maintenance DAG's table page, at that action.
      const dagId = decodeURIComponent(m[1]);
      const dm = dagId.match(/^tms__(.+)__([a-z0-9-]+)$/);
      if (!dm) {
        setCrumb("DAG");
        view().replaceChildren(h("div", { class: "empty", id: "not-maintenance" }, `DAG ${dagId} is not a table-maintenance DAG: it has no table page. `, link("#/", "Open the overview")));
        return;
      }
      location.replace(dm[2] === "refresh" ? `#/dynamic/${encodeURIComponent(dm[1])}` : tableHref(dm[1], "maintenance", dm[2]));
    } else {
      await renderOverview(token);
    }
    if (token === routeToken) showNotice(); // the re-rendered view: the notice beside its control again
  } catch (err) {
    if (token !== routeToken) return;
    explain(err, "load this page");
    if (view().textContent.startsWith("Loading")) view().replaceChildren(h("div", { class: "empty" }, "Nothing to show."));
  }
}

window.addEventListener("hashchange", () => { if (!location.hash.startsWith("#/tables?") || !document.getElementById("filters")) view().replaceChildren(h("p", { class: "muted" }, "Loading…")); route(); });
adoptParent();
route();
