// fasttune dashboard: fills the page from the read-only JSON API (no build step).
"use strict";
const Q = new URLSearchParams(location.search);
const EXP = Q.get("exp");
const $ = (sel) => document.querySelector(sel);
const esc = (v) => String(v ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const fmt = (v) => v === null || v === undefined ? "" : typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toPrecision(6).replace(/\.?0+$/, "")) : typeof v === "object" ? JSON.stringify(v) : String(v);
const when = (t) => t ? new Date(t * 1000).toLocaleString() : "";
const expUrl = (e) => "/experiment?exp=" + encodeURIComponent(e);
// plotly.js is fetched after the first data is drawn (loadPlotly), never before it
let plotlyLoaded = null;
const plotlyReady = new Promise((resolve) => { plotlyLoaded = resolve; });
function loadPlotly() {
  if (document.getElementById("plotly-js")) return;
  const tag = document.createElement("script");
  tag.id = "plotly-js"; tag.src = "/static/plotly.min.js";
  tag.addEventListener("load", () => plotlyLoaded());
  document.head.appendChild(tag);
}
const trialUrl = (e, id) => "/trial?exp=" + encodeURIComponent(e) + "&id=" + encodeURIComponent(id);

async function api(path, params) {
  const url = path + "?" + new URLSearchParams(params || {});
  const response = await fetch(url, {credentials: "same-origin"});
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function showError(where, error) {
  where.innerHTML = '<p class="ERROR">' + esc(error.message || error) + "</p>";
}

// ------------------------------------------------------------------ experiments
const compared = new Set();
async function experimentsPage() {
  const main = $("#main");
  main.innerHTML = '<div id="list"></div><h3>Compare (tick 2 or more experiments with the same metric)</h3><div id="compare" class="chart"></div>';
  const list = $("#list");
  const draw = async () => {
    let data;
    try { data = await api("/api/experiments"); } catch (e) { showError(list, e); return; }
    const rows = data.experiments.map((x) =>
      `<tr data-exp="${esc(x.id)}"><td><input type="checkbox" ${compared.has(x.id) ? "checked" : ""}></td><td><a href="${expUrl(x.id)}">${esc(x.name)}</a></td>` +
      `<td data-col="total">${x.total}</td><td data-col="running" class="RUNNING">${x.counts.RUNNING || ""}</td>` +
      `<td data-col="terminated">${x.counts.TERMINATED}</td><td data-col="error" class="ERROR">${x.counts.ERROR || ""}</td>` +
      `<td data-col="pending">${x.counts.PENDING + x.counts.PAUSED}</td>` +
      `<td>${esc(x.metric || "")} ${esc(x.mode || "")}</td><td data-col="best">${fmt(x.best)}</td>` +
      `<td>${when(x.start_time)}</td><td>${when(x.last_update)}</td></tr>`).join("");
    list.innerHTML = `<p class="muted">${esc(data.root)}</p>` + (data.experiments.length ?
      `<table id="experiments"><tr><th></th><th>experiment</th><th>trials</th><th>running</th><th>terminated</th>` +
      `<th>error</th><th>pending/paused</th><th>metric</th><th>best</th><th>started</th><th>last result</th></tr>${rows}</table>`
      : "<p>No experiments in this folder yet.</p>");
    list.querySelectorAll("tr[data-exp] input").forEach((box) => box.addEventListener("change", () => {
      const id = box.closest("tr").dataset.exp;
      if (box.checked) compared.add(id); else compared.delete(id);
      drawCompare();
    }));
  };
  await draw();
  setInterval(() => { if (!document.hidden) draw(); }, 2000);
}

async function drawCompare() {
  const where = $("#compare");
  if (compared.size < 2) { where.innerHTML = ""; return; }
  loadPlotly();
  try {
    const figure = await api("/api/compare", {exps: [...compared].join(",")});
    await plotlyReady;
    where.innerHTML = "";
    Plotly.react(where, figure.data, Object.assign(figure.layout || {}, {margin: {t: 40}}));
  } catch (e) { where.innerHTML = `<p class="muted">${esc(e.message)}</p>`; }
}

// ------------------------------------------------------------------ one experiment
const state = {offset: 0, limit: 50, sort: "", desc: false, q: "", status: "", metric: "", selected: new Set(), x: "training_iteration", log: false, smooth: 0};

async function experimentPage() {
  const main = $("#main");
  let info;
  try { info = await api("/api/experiment", {exp: EXP}); } catch (e) { showError(main, e); return; }
  $("#title").textContent = info.name;
  document.title = "fasttune · " + info.name;
  state.metric = info.metric || info.metrics[0] || "";
  if (info.metric) { state.sort = "metric"; state.desc = info.mode === "max"; }
  const options = info.metrics.map((m) => `<option ${m === state.metric ? "selected" : ""}>${esc(m)}</option>`).join("");
  main.innerHTML = `<div id="summary"></div>
  <div class="bar"><input id="filter" size="32" placeholder="filter: text, or metric < 0.5">
  <select id="status"><option value="">any status</option>${["RUNNING", "PENDING", "PAUSED", "TERMINATED", "ERROR"].map((s) => `<option>${s}</option>`).join("")}</select>
  metric <select id="metric">${options}</select>
  <button id="prev">◀</button><span id="range"></span><button id="next">▶</button></div>
  <table id="trials"></table>
  <div class="bar">x <select id="x"><option>training_iteration</option><option>time_total_s</option></select>
  <label><input type="checkbox" id="log"> log y</label>
  smoothing <input type="range" id="smooth" min="0" max="0.95" step="0.05" value="0"></div>
  <div class="charts"><div id="curves" class="chart"></div><div id="history" class="chart"></div>
  <div id="parallel" class="chart"></div><div id="importance" class="chart"><button id="importance-go">Compute hyperparameter importance</button></div>
  </div><h3 id="scheduler">Scheduler: where trials stopped${info.pbt ? ", PBT's exploits" : ""}</h3>
  <div class="charts"><div id="stops" class="chart"></div>${info.pbt ? '<div id="pbt" class="chart"></div>' : ""}</div>`;
  const reload = () => { state.offset = 0; drawTrials(); };
  $("#filter").addEventListener("change", (e) => { state.q = e.target.value; reload(); });
  $("#status").addEventListener("change", (e) => { state.status = e.target.value; reload(); });
  $("#metric").addEventListener("change", (e) => { state.metric = e.target.value; reload(); drawFigures(); });
  $("#prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - state.limit); drawTrials(); });
  $("#next").addEventListener("click", () => { state.offset += state.limit; drawTrials(); });
  $("#x").addEventListener("change", (e) => { state.x = e.target.value; drawCurves(); });
  $("#log").addEventListener("change", (e) => { state.log = e.target.checked; drawCurves(); });
  $("#smooth").addEventListener("input", (e) => { state.smooth = Number(e.target.value); drawCurves(); });
  $("#importance-go").addEventListener("click", () => drawFigure("importance"));
  await drawTrials();
  drawFigures();
  // live: the table every 1.5 s; the charts (costly to draw) every 5 s; nothing while hidden
  let chartsAt = Date.now();
  setInterval(async () => {
    if (document.hidden) return;
    const running = await drawTrials();
    if (running && Date.now() - chartsAt >= 5000) { chartsAt = Date.now(); drawCurves(); }
  }, 1500);
}

let lastPage = null;
async function drawTrials() {
  let page;
  const params = {exp: EXP, offset: state.offset, limit: state.limit, sort: state.sort, desc: state.desc ? 1 : 0, q: state.q, status: state.status, metric: state.metric};
  try { page = await api("/api/trials", params); } catch (e) { $("#range").textContent = " " + e.message + " "; return false; }
  if (page.total && state.offset >= page.total) { state.offset = Math.max(0, page.total - state.limit); return drawTrials(); }
  const first = !lastPage;
  lastPage = page;
  const head = page.columns.map((c) => `<th data-sort="${esc(c)}">${esc(c === "metric" ? page.metric || "metric" : c)}${state.sort === c ? (state.desc ? " ▼" : " ▲") : ""}</th>`).join("");
  const body = page.rows.map((r) => `<tr data-trial="${esc(r.trial_id)}" class="${state.selected.has(r.trial_id) ? "sel" : ""}"><td><input type="checkbox" ${state.selected.has(r.trial_id) ? "checked" : ""}></td>` +
    page.columns.map((c) => c === "trial_id" ? `<td data-col="trial_id"><a href="${trialUrl(EXP, r.trial_id)}">${esc(r.trial_id)}</a></td>` : `<td data-col="${esc(c)}" class="${c === "status" ? esc(r.status) : ""}">${esc(fmt(r[c]))}</td>`).join("") + "</tr>").join("");
  $("#trials").innerHTML = `<tr><th></th>${head}</tr>${body}`;
  $("#range").textContent = ` ${page.total ? page.offset + 1 : 0}–${Math.min(page.offset + state.limit, page.total)} of ${page.total} `;
  $("#trials").querySelectorAll("th[data-sort]").forEach((th) => th.addEventListener("click", () => {
    const c = th.dataset.sort;
    state.desc = state.sort === c ? !state.desc : false; state.sort = c; drawTrials();
  }));
  $("#trials").querySelectorAll("tr[data-trial] input").forEach((box) => box.addEventListener("change", () => {
    const id = box.closest("tr").dataset.trial;
    if (box.checked) state.selected.add(id); else state.selected.delete(id);
    box.closest("tr").classList.toggle("sel", box.checked);
    drawCurves();
  }));
  const info = page.summary;
  if (info) {
    const counts = Object.entries(info.counts).filter(([, n]) => n).map(([s, n]) => `<span class="${s}">${s} ${n}</span>`).join(", ");
    $("#summary").innerHTML = `${info.total} trials: ${counts}` + (info.metric ? ` · best ${esc(info.metric)} (${esc(info.mode)}): <b id="best">${fmt(info.best)}</b> (${esc(info.best_trial)})` : "");
    $("#live").textContent = info.counts.RUNNING ? " · live" : "";
  }
  if (first) { performance.mark("fasttune:table"); loadPlotly(); drawCurves(); }
  return Boolean(info && info.counts.RUNNING);
}

function smooth(ys) {
  if (!state.smooth) return ys;
  let avg = null;
  return ys.map((y) => (avg = avg === null ? y : state.smooth * avg + (1 - state.smooth) * y));
}

async function drawCurves() {
  await plotlyReady;
  if (!state.metric || !window.Plotly) return;
  let ids = [...state.selected];
  if (!ids.length && lastPage) ids = lastPage.rows.slice(0, 5).map((r) => r.trial_id);
  let data;
  try { data = await api("/api/curves", {exp: EXP, ids: ids.join(","), metric: state.metric, x: state.x}); } catch (e) { return; }
  const traces = data.traces.map((t) => ({x: t.x, y: smooth(t.y), name: t.id, mode: "lines+markers", marker: {size: 4}}));
  Plotly.react("curves", traces, {title: {text: "Learning curves: " + state.metric}, xaxis: {title: {text: state.x}},
    yaxis: {title: {text: state.metric}, type: state.log ? "log" : "linear"}, margin: {t: 40}});
}

async function drawFigure(kind) {
  const where = document.getElementById(kind);
  try {
    const figure = await api("/api/figure", {exp: EXP, kind: kind, metric: state.metric});
    await plotlyReady;
    where.innerHTML = "";
    Plotly.react(where, figure.data, Object.assign(figure.layout || {}, {margin: {t: 40}}));
  } catch (e) { where.innerHTML = `<p class="muted">${esc(kind)}: ${esc(e.message)}</p>`; }
}

// the scheduler's view: where trials stopped (ASHA/HyperBand rungs); PBT's exploits if any
function drawFigures() {
  ["history", "parallel", "stops", "pbt"].filter((kind) => document.getElementById(kind)).forEach(drawFigure);
}

// ------------------------------------------------------------------ one trial
async function trialPage() {
  const main = $("#main");
  const id = Q.get("id");
  const load = async () => api("/api/trial", {exp: EXP, id: id});
  let t;
  loadPlotly();
  try { t = await load(); } catch (e) { showError(main, e); return; }
  $("#title").innerHTML = `<a href="${expUrl(EXP)}">${esc(EXP)}</a> · ${esc(t.trial_id)}`;
  const metric = t.metric && t.metrics.includes(t.metric) ? t.metric : t.metrics[0];
  const keyValue = (o) => Object.entries(o).map(([k, v]) => `<tr><td>${esc(k)}</td><td>${esc(fmt(v))}</td></tr>`).join("");
  const columns = [...new Set(t.history.flatMap((r) => Object.keys(r)))].filter((k) => typeof t.last_result[k] === "number");
  const rows = t.history.slice(-200).map((r) => "<tr>" + columns.map((c) => `<td>${esc(fmt(r[c]))}</td>`).join("") + "</tr>").join("");
  main.innerHTML = `<p>Status: <b class="${esc(t.status)}" id="status">${esc(t.status)}</b> · ${esc(t.path)}</p>
  <div class="charts"><div><h3>Config</h3><table id="config">${keyValue(t.config)}</table>
  <h3>Checkpoints</h3><ul id="checkpoints">${t.checkpoints.map((c) => `<li>${esc(c)}</li>`).join("") || "<li class=muted>none</li>"}</ul></div>
  <div id="trial-curve" class="chart"></div></div>
  ${t.error ? `<h3 class="ERROR">Error</h3><pre id="error">${esc(t.error)}</pre>` : ""}
  ${t.pbt.length ? `<h3>PBT: exploits</h3><table id="pbt-history"><tr><th>at iteration</th><th>weights</th><th>from iteration</th><th>new config</th></tr>${t.pbt.map((e) => e.target === t.trial_id
    ? `<tr class="took"><td>${esc(e.target_iteration)}</td><td>taken from <a href="${trialUrl(EXP, e.donor)}">${esc(e.donor)}</a></td><td>${esc(e.donor_iteration)}</td><td>${esc(JSON.stringify(e.new_config))}</td></tr>`
    : `<tr class="gave"><td>${esc(e.target_iteration)}</td><td>given to <a href="${trialUrl(EXP, e.target)}">${esc(e.target)}</a></td><td>${esc(e.donor_iteration)}</td><td></td></tr>`).join("")}</table>` : ""}
  <h3>Metrics (last 200 results)</h3><div style="overflow:auto;max-height:400px"><table id="metrics"><tr>${columns.map((c) => `<th>${esc(c)}</th>`).join("")}</tr>${rows}</table></div>
  <h3>stdout</h3><pre id="stdout">${esc(t.logs.stdout ?? "(no stdout file)")}</pre>
  <h3>stderr</h3><pre id="stderr">${esc(t.logs.stderr ?? "(no stderr file)")}</pre>`;
  await plotlyReady;
  if (metric && window.Plotly) {
    const xs = t.history.map((r) => r.training_iteration), ys = t.history.map((r) => r[metric]);
    Plotly.react("trial-curve", [{x: xs, y: ys, mode: "lines+markers", name: metric}], {title: {text: metric}, xaxis: {title: {text: "training_iteration"}}, margin: {t: 40}});
  }
}

const PAGES = {experiments: experimentsPage, experiment: experimentPage, trial: trialPage};
PAGES[document.body.dataset.page]();
