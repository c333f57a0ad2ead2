// meshemu view: draws the frames the server streams (frames.py describes
// them) on an SVG map and in uPlot sparklines; dragging a node POSTs a move.
// The same page plays a recorded run back (replay.py): a slider and a play
// button then move the server's cursor.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const TOKEN = document.querySelector('meta[name="meshemu-token"]').content;
const HISTORY = 120;        // samples kept per node (30 s at 4 frames/s)
const PAD_PX = 30;          // map margin
const LABELS_UP_TO = 64;    // node names on the map for labs up to this size
const DAEMONS_EVERY_MS = 1000;  // the daemons rewrite their counters every second
const AIR = { busy: 0, queue: 1, retries: 2, retryDrops: 3, queueDrops: 4, linkDrops: 5 };
const HEAT_CELL_PX = 16;    // the heat map's resolution (the browser smooths it when it scales it up)
const HEAT_ALPHA = 110;     // of 255: the links and nodes stay readable on top
const JUMP_S = 2;           // a frame this far from the previous one (a replay's seek) starts the history again
const CHANGED_S = 5;        // a changed route stays highlighted this long
const LOG_ENTRIES = 6;      // route changes listed per flow
const FLOW_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#e377c2", "#8c564b"];
// scale: from the frame's unit to the shown one; least: the y axis's top when the values stay below it.
const FLOW_CHARTS = [
  { title: "goodput", unit: "kbit/s", colour: "#1f5fa8", scale: 1e-3, least: 1, digits: 0 },
  { title: "delay", unit: "ms", colour: "#8e44ad", scale: 1, least: 1, digits: 0 },
  { title: "loss", unit: "%", colour: "#c0392b", scale: 100, least: 10, digits: 1 },
];

const state = {
  meta: null,
  frame: null,           // the newest frame
  pending: null,         // a frame not drawn yet
  selected: null,        // node index
  drag: null,            // {index, pointerId, moved, x, y}
  view: null,            // world box on screen {x0, y0, x1, y1}
  scale: 1,              // px per metre
  history: [],           // per node: {t: [], series: [[] x 6]}
  nodeEls: [], linkEls: [], rowEls: [], sparks: [], visibleRows: new Set(),
  detailCharts: [],
  // per flow: samples, the route seen last ("n0 n1 n2", ✕ when it ends short), its changes
  flowHistory: [], lastRoutes: [], changedAt: [], routeLog: [], pathEls: [], flowEls: [],
  sliding: false,        // the replay's slider is held: frames do not move it
  lastCapture: null,     // the file of the last capture stopped from this page
  // Draw times (ms) and animation-frame ticks, read by the benchmark (meshemu.bench.view).
  perf: { draws: 0, drawMs: 0, maxMs: 0, samples: [], ticks: 0, fps: 0 },
};
window.meshemuView = state;  // read by the browser tests and the benchmark

const $ = (id) => document.getElementById(id);

function el(name, attrs, parent) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

// The server's JSON answer; a refusal is an error with the server's reason.
async function request(path, options) {
  const response = await fetch(path, options);
  if (!response.ok) throw new Error(`${path}: ${response.status} ${(await response.text()).trim()}`);
  return response.json();
}

// --- start ---

async function start() {
  state.meta = await request("/api/meta");
  $("lab").textContent = state.meta.lab;
  document.title = `meshemu view: ${state.meta.lab}`;
  buildNodes();
  buildAirTable();
  buildFlows();
  setUpActions();
  const source = new EventSource("/api/frames");
  source.onmessage = (event) => {
    const frame = JSON.parse(event.data);
    if (frame.error) { setStatus(frame.error, true); return; }
    setStatus(state.meta.replay ? "replay" : "live", false);
    state.pending = frame;
    requestAnimationFrame(drawPending);
  };
  source.onerror = () => setStatus("disconnected from the server (retrying)", true);
  new ResizeObserver(() => { state.view = null; if (state.frame) draw(state.frame); }).observe($("map"));
  countFrames();
  setInterval(refreshDaemons, DAEMONS_EVERY_MS);
}

function setStatus(text, error) {
  $("status").textContent = text;
  $("status").classList.toggle("error", error);
}

function drawPending() {
  if (!state.pending) return;
  const frame = state.pending;
  state.pending = null;
  const started = performance.now();
  record(frame);
  draw(frame);
  const ms = performance.now() - started;
  const perf = state.perf;
  perf.draws += 1; perf.drawMs += ms; perf.maxMs = Math.max(perf.maxMs, ms);
  if (perf.samples.length < 10000) perf.samples.push(ms);
}

function countFrames() {
  let last = performance.now(), count = 0;
  const tick = (now) => {
    count += 1;
    state.perf.ticks += 1;
    if (now - last >= 1000) {
      state.perf.fps = count * 1000 / (now - last);
      const p = state.perf;
      $("perf").textContent = `update ${(p.drawMs / Math.max(p.draws, 1)).toFixed(1)} ms (max ${p.maxMs.toFixed(1)}), ${p.fps.toFixed(0)} fps`;
      last = now; count = 0;
    }
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
}

// --- the map ---

function buildNodes() {
  const layer = $("nodes");
  const labels = state.meta.nodes.length <= LABELS_UP_TO;
  state.meta.nodes.forEach((node, index) => {
    const group = el("g", { class: "node", "data-node": node.name }, layer);
    el("circle", { r: 6 }, group);
    if (labels) el("text", { dx: 8, dy: -8 }, group).textContent = node.name;
    group.addEventListener("pointerdown", (event) => beginDrag(event, index, group));
    state.nodeEls.push(group);
    state.history.push({ t: [], series: Object.keys(AIR).map(() => []) });
  });
}

function fitView(positions) {
  // Refit only when a node left the box or the nodes fill much less of it.
  let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
  for (const [x, y] of positions) {
    x0 = Math.min(x0, x); y0 = Math.min(y0, y); x1 = Math.max(x1, x); y1 = Math.max(y1, y);
  }
  const v = state.view;
  const inside = v && x0 >= v.x0 && y0 >= v.y0 && x1 <= v.x1 && y1 <= v.y1;
  const snug = v && (x1 - x0) >= 0.6 * (v.x1 - v.x0) || v && (y1 - y0) >= 0.6 * (v.y1 - v.y0);
  if (inside && snug) return;
  const margin = Math.max(x1 - x0, y1 - y0, 100) * 0.05;
  state.view = { x0: x0 - margin, y0: y0 - margin, x1: x1 + margin, y1: y1 + margin };
  const box = $("map").getBoundingClientRect();
  const w = Math.max(box.width - 2 * PAD_PX, 10), h = Math.max(box.height - 2 * PAD_PX, 10);
  const v2 = state.view;
  state.scale = Math.min(w / (v2.x1 - v2.x0), h / (v2.y1 - v2.y0));
  // Centre the box on the canvas.
  state.offsetX = PAD_PX + (w - (v2.x1 - v2.x0) * state.scale) / 2;
  state.offsetY = PAD_PX + (h - (v2.y1 - v2.y0) * state.scale) / 2;
  drawScaleBar(box);
}

const sx = (x) => state.offsetX + (x - state.view.x0) * state.scale;
const sy = (y) => state.offsetY + (state.view.y1 - y) * state.scale;  // north up
const wx = (px) => state.view.x0 + (px - state.offsetX) / state.scale;
const wy = (py) => state.view.y1 - (py - state.offsetY) / state.scale;

function drawScaleBar(box) {
  // The largest 1, 2 or 5 x 10^k metres that fits in 150 px.
  const target = 150 / state.scale;
  const power = Math.pow(10, Math.floor(Math.log10(target)));
  const metres = [5, 2, 1].map((m) => m * power).find((m) => m <= target);
  const px = metres * state.scale, y = box.height - 14;
  const line = $("scale-line");
  line.setAttribute("x1", 12); line.setAttribute("x2", 12 + px);
  line.setAttribute("y1", y); line.setAttribute("y2", y);
  const text = $("scale-text");
  text.setAttribute("x", 12); text.setAttribute("y", y - 5);
  text.textContent = metres >= 1000 ? `${metres / 1000} km` : `${metres} m`;
  text.dataset.metres = metres;
  text.dataset.px = px.toFixed(1);
}

function heatRgb(busy) {
  // #e8eef5 (idle) to #d7301f (always busy)
  const f = Math.min(Math.max(busy, 0), 1);
  const mix = (a, b) => Math.round(a + (b - a) * f);
  return [mix(232, 215), mix(238, 48), mix(245, 31)];
}

const heat = (busy) => `rgb(${heatRgb(busy).join(",")})`;

function drawHeat(frame, positions) {
  // Each cell: the busy fraction of the nodes whose carrier-sense range
  // covers it, weighted by 1/distance² (what a node there would roughly
  // sense); nothing where no node senses.
  const canvas = $("heat");
  canvas.hidden = !$("heat-on").checked;
  if (canvas.hidden) return;
  const box = $("map").getBoundingClientRect();
  const cols = Math.ceil(box.width / HEAT_CELL_PX), rows = Math.ceil(box.height / HEAT_CELL_PX);
  if (canvas.width !== cols || canvas.height !== rows) {
    canvas.width = cols; canvas.height = rows;
    canvas.style.width = `${cols * HEAT_CELL_PX}px`; canvas.style.height = `${rows * HEAT_CELL_PX}px`;
  }
  const reach2 = state.meta.ranges.map((r) => (r.cs_m ?? r.rx_m ?? 0) ** 2);
  const busy = frame.air.map((row) => row[AIR.busy]);
  const context = canvas.getContext("2d");
  const image = context.createImageData(cols, rows);
  for (let r = 0; r < rows; r++) {
    const y = wy((r + 0.5) * HEAT_CELL_PX);
    for (let c = 0; c < cols; c++) {
      const x = wx((c + 0.5) * HEAT_CELL_PX);
      let weights = 0, sum = 0;
      for (let i = 0; i < positions.length; i++) {
        const dx = positions[i][0] - x, dy = positions[i][1] - y, d2 = dx * dx + dy * dy;
        if (d2 > reach2[i]) continue;
        const w = 1 / (d2 + 1);
        weights += w; sum += w * busy[i];
      }
      if (weights === 0) continue;
      const [red, green, blue] = heatRgb(sum / weights), k = 4 * (r * cols + c);
      image.data[k] = red; image.data[k + 1] = green; image.data[k + 2] = blue; image.data[k + 3] = HEAT_ALPHA;
    }
  }
  context.putImageData(image, 0, 0);
}

function linkColour(ratio) {
  return ratio === null ? "#9aa5b1" : `hsl(${Math.round(120 * ratio)},70%,38%)`;
}

function linkWidth(signalDbm, a, b) {
  const threshold = Math.max(rxThreshold(a), rxThreshold(b));
  const margin = signalDbm - threshold;
  return margin < 3 ? 1 : margin < 10 ? 2.5 : 4;
}

function rxThreshold(index) {
  return state.meta.ranges[index].rx_threshold_dbm;
}

function draw(frame) {
  state.frame = frame;
  $("clock").textContent = `t = ${frame.t.toFixed(1)} s`;
  const positions = frame.pos.slice();
  if (state.drag && state.drag.moved) positions[state.drag.index] = [state.drag.x, state.drag.y];
  if (!state.drag) fitView(positions);
  positions.forEach(([x, y], i) => {
    const group = state.nodeEls[i];
    group.setAttribute("transform", `translate(${sx(x).toFixed(1)},${sy(y).toFixed(1)})`);
    group.firstChild.setAttribute("fill", heat(frame.air[i][AIR.busy]));
  });
  drawHeat(frame, positions);
  drawLinks(frame, positions);
  drawPaths(frame, positions);
  drawSelection(frame, positions);
  drawFlows(frame);
  drawAirTable();
  drawActions(frame);
}

function drawLinks(frame, positions) {
  const layer = $("links");
  while (state.linkEls.length < frame.links.length) state.linkEls.push(el("line", {}, layer));
  state.linkEls.forEach((line, k) => {
    const link = frame.links[k];
    if (!link) { line.setAttribute("visibility", "hidden"); return; }
    const [a, b, ratio, signal, bothWays] = link;
    line.setAttribute("visibility", "visible");
    line.setAttribute("x1", sx(positions[a][0]).toFixed(1)); line.setAttribute("y1", sy(positions[a][1]).toFixed(1));
    line.setAttribute("x2", sx(positions[b][0]).toFixed(1)); line.setAttribute("y2", sy(positions[b][1]).toFixed(1));
    line.setAttribute("stroke", linkColour(ratio));
    line.setAttribute("stroke-width", linkWidth(signal, a, b));
    line.setAttribute("stroke-dasharray", bothWays ? "none" : "6 4");
    line.dataset.pair = `${state.meta.nodes[a].name} ${state.meta.nodes[b].name}`;
  });
}

function neighboursOf(index, frame, positions) {
  const rx = frame.links.filter(([a, b]) => a === index || b === index)
    .map(([a, b, ratio, signal, bothWays]) => ({ index: a === index ? b : a, ratio, signal, bothWays }));
  const linked = new Set(rx.map((n) => n.index));
  const cs = state.meta.ranges[index].cs_m;
  const [x, y] = positions[index];
  const csOnly = [];
  positions.forEach(([px, py], j) => {
    if (j !== index && !linked.has(j) && cs !== null && Math.hypot(px - x, py - y) <= cs) csOnly.push(j);
  });
  return { rx, csOnly };
}

function drawSelection(frame, positions) {
  const layer = $("ranges");
  layer.replaceChildren();
  state.nodeEls.forEach((g) => g.classList.remove("selected", "rx-neighbour", "cs-neighbour"));
  $("detail").hidden = state.selected === null;
  if (state.selected === null) return;
  const index = state.selected, node = state.meta.nodes[index], range = state.meta.ranges[index];
  const [x, y] = positions[index];
  for (const [kind, metres] of [["cs", range.cs_m], ["rx", range.rx_m]]) {
    if (metres !== null) el("circle", { class: `range ${kind}`, cx: sx(x), cy: sy(y), r: metres * state.scale }, layer);
  }
  const { rx, csOnly } = neighboursOf(index, frame, positions);
  state.nodeEls[index].classList.add("selected");
  rx.forEach((n) => state.nodeEls[n.index].classList.add("rx-neighbour"));
  csOnly.forEach((j) => state.nodeEls[j].classList.add("cs-neighbour"));
  $("detail-title").textContent = `${node.name} (${node.ip})`;
  const fmt = (m) => (m === null ? "?" : `${m.toFixed(0)} m`);
  $("detail-text").textContent = `at (${x.toFixed(1)}, ${y.toFixed(1)}) m; receive range ${fmt(range.rx_m)}, ` +
    `carrier-sense range ${fmt(range.cs_m)} (blue and orange circles)`;
  const rows = rx.map((n) => {
    const tr = document.createElement("tr");
    tr.dataset.node = state.meta.nodes[n.index].name;
    for (const text of [state.meta.nodes[n.index].name,
      n.ratio === null ? "–" : `${(100 * n.ratio).toFixed(0)} %`, `${n.signal.toFixed(1)} dBm`,
      n.bothWays ? "both" : "one"]) {
      tr.appendChild(document.createElement("td")).textContent = text;
    }
    return tr;
  });
  $("neighbours").tBodies[0].replaceChildren(...rows);
  $("cs-only").textContent = csOnly.length
    ? `in carrier-sense range only: ${csOnly.map((j) => state.meta.nodes[j].name).join(", ")}` : "";
  updateDetailCharts();
}

// --- the daemons of the selected node (aodvd, copasd, bpd) ---

async function refreshDaemons() {
  if (state.selected === null) return;
  const node = state.meta.nodes[state.selected].name;
  let daemons;
  try {
    daemons = await request(`/api/daemons?node=${encodeURIComponent(node)}`);
  } catch {
    return;  // the frames' stream says when the server is gone
  }
  if (state.selected === null || state.meta.nodes[state.selected].name !== node) return;
  const parts = [];
  for (const [program, counters] of Object.entries(daemons)) {
    const title = document.createElement("h3");
    title.textContent = `${program} counters`;
    const table = document.createElement("table");
    table.dataset.daemon = program;
    for (const [key, value] of flatten(counters, "")) {
      const row = table.insertRow();
      row.dataset.key = key;
      row.insertCell().textContent = key;
      row.insertCell().textContent = value;
    }
    parts.push(title, table);
  }
  $("daemons").replaceChildren(...parts);
}

function flatten(value, prefix) {
  // Nested objects as dotted keys; a list by its length.
  if (Array.isArray(value)) return [[prefix, `${value.length} entries`]];
  if (value === null || typeof value !== "object") return [[prefix, String(value)]];
  return Object.entries(value).flatMap(([k, v]) => flatten(v, prefix ? `${prefix}.${k}` : k));
}

function select(index) {
  state.selected = state.selected === index ? null : index;
  $("daemons").replaceChildren();
  refreshDaemons();
  state.rowEls.forEach((row, i) => row.classList.toggle("selected", i === state.selected));
  buildDetailCharts();
  if (state.frame) draw(state.frame);
}

// --- dragging a node: the same as `meshemu move NODE X Y` ---

function beginDrag(event, index, group) {
  event.preventDefault();
  group.setPointerCapture(event.pointerId);
  state.drag = { index, pointerId: event.pointerId, moved: false, x: 0, y: 0, startX: event.clientX, startY: event.clientY };
  group.classList.add("dragging");
  const svgBox = () => $("map").getBoundingClientRect();
  const onMove = (e) => {
    if (e.pointerId !== state.drag.pointerId) return;
    if (!state.drag.moved && Math.hypot(e.clientX - state.drag.startX, e.clientY - state.drag.startY) < 4) return;
    if (state.meta.replay) return;  // a recording cannot be changed
    const box = svgBox();
    state.drag.moved = true;
    state.drag.x = wx(e.clientX - box.left);
    state.drag.y = wy(e.clientY - box.top);
    if (state.frame) draw(state.frame);
  };
  const onUp = async (e) => {
    if (e.pointerId !== state.drag.pointerId) return;
    group.removeEventListener("pointermove", onMove);
    group.removeEventListener("pointerup", onUp);
    group.removeEventListener("pointercancel", onUp);
    group.classList.remove("dragging");
    const drag = state.drag;
    if (!drag.moved) { state.drag = null; select(index); return; }
    await act("/api/move", { node: state.meta.nodes[index].name, x: drag.x, y: drag.y });
    state.drag = null;
  };
  group.addEventListener("pointermove", onMove);
  group.addEventListener("pointerup", onUp);
  group.addEventListener("pointercancel", onUp);
}

// --- the air: sparklines per node (uPlot) ---

function record(frame) {
  const last = state.frame;
  if (last && frame.t === last.t) return;  // a replay's cursor moved within one recorded frame
  if (last && (frame.t < last.t || frame.t - last.t > JUMP_S)) forgetHistory();
  recordFlows(frame);
  frame.air.forEach((row, i) => {
    const h = state.history[i];
    h.t.push(frame.t);
    row.forEach((value, k) => h.series[k].push(value));
    if (h.t.length > HISTORY) { h.t.shift(); h.series.forEach((s) => s.shift()); }
  });
}

const CHARTS = [
  { title: "busy", series: [[AIR.busy, "#1f5fa8", "busy fraction"]], range: [0, 1] },
  { title: "queue", series: [[AIR.queue, "#8e44ad", "queue length"]] },
  { title: "retries/s", series: [[AIR.retries, "#2e7d32", "retries/s"]] },
  { title: "drops/s", series: [[AIR.retryDrops, "#c0392b", "retry drops/s"], [AIR.queueDrops, "#8e44ad", "queue drops/s"],
    [AIR.linkDrops, "#d68910", "link drops/s"]] },
];

function chartData(index, chart) {
  const h = state.history[index];
  return [h.t, ...chart.series.map(([k]) => h.series[k])];
}

function makeChart(parent, index, chart, big) {
  const y = chart.range ? { range: chart.range } : { range: (u, min, max) => [0, Math.max(max, 1)] };
  const options = {
    width: big ? 440 : 90, height: big ? 90 : 26, pxAlign: false,
    scales: { x: { time: false }, y },
    legend: { show: big }, cursor: { show: big, points: { show: false } }, select: { show: false },
    axes: big ? [{ size: 24 }, { size: 40 }] : [{ show: false }, { show: false }],
    series: [{ label: "t (s)" }, ...chart.series.map(([, stroke, label]) => ({ label, stroke, width: 1, points: { show: false } }))],
  };
  if (!big) options.padding = [2, 0, 2, 0];
  return new uPlot(options, chartData(index, chart), parent);
}

function buildAirTable() {
  const body = $("air-table").tBodies[0];
  const visibility = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      const i = Number(entry.target.dataset.index);
      if (entry.isIntersecting) state.visibleRows.add(i); else state.visibleRows.delete(i);
    }
  }, { root: document.querySelector("aside") });
  state.meta.nodes.forEach((node, i) => {
    const row = body.insertRow();
    row.dataset.index = i;
    row.dataset.node = node.name;
    row.insertCell().textContent = node.name;
    CHARTS.forEach(() => { row.insertCell().className = "spark"; });
    row.addEventListener("click", () => select(i));
    visibility.observe(row);
    state.rowEls.push(row);
    state.sparks.push(null);
  });
}

function drawAirTable() {
  for (const i of state.visibleRows) {
    if (!state.sparks[i]) {
      const cells = state.rowEls[i].cells;
      state.sparks[i] = CHARTS.map((chart, k) => makeChart(cells[k + 1], i, chart, false));
    } else {
      state.sparks[i].forEach((plot, k) => plot.setData(chartData(i, CHARTS[k])));
    }
  }
}

function buildDetailCharts() {
  state.detailCharts.forEach((plot) => plot.destroy());
  state.detailCharts = [];
  const box = $("detail-charts");
  box.replaceChildren();
  if (state.selected === null) return;
  for (const chart of CHARTS) {
    const title = document.createElement("div");
    title.className = "chart-title";
    title.textContent = chart.title;
    box.appendChild(title);
    const holder = document.createElement("div");
    box.appendChild(holder);
    state.detailCharts.push(makeChart(holder, state.selected, chart, true));
  }
}

function updateDetailCharts() {
  state.detailCharts.forEach((plot, k) => plot.setData(chartData(state.selected, CHARTS[k])));
}

// --- flows along their routes ---

const nodeName = (index) => state.meta.nodes[index].name;

function routeText(path, reached) {
  return path.map(nodeName).join(" → ") + (reached ? "" : " ✕");
}

function buildFlows() {
  const flows = state.meta.flows || [];
  $("flows").hidden = flows.length === 0;
  flows.forEach((flow, k) => {
    state.flowHistory.push({ t: [], series: FLOW_CHARTS.map(() => []) });
    state.lastRoutes.push(null); state.changedAt.push(null); state.routeLog.push([]);
    const colour = FLOW_COLOURS[k % FLOW_COLOURS.length];
    const line = el("polyline", { stroke: colour, "stroke-width": Math.max(10 - 3 * k, 3), "data-flow": flow.name },
      $("paths"));
    const mark = el("text", { fill: colour, "data-flow": flow.name }, $("paths"));
    state.pathEls.push({ line, mark });
    const box = document.createElement("div");
    box.className = "flow";
    box.dataset.flow = flow.name;
    box.style.borderColor = colour;
    const title = document.createElement("h3");
    title.textContent = `${flow.name}: ${flow.src} → ${flow.dst}` + (flow.kind === "named" ? "" : ` (${flow.kind})`);
    const route = document.createElement("p");
    route.className = "route";
    const charts = document.createElement("div");
    charts.className = "charts";
    const plots = FLOW_CHARTS.map((chart, c) => {
      const cell = charts.appendChild(document.createElement("div"));
      const caption = cell.appendChild(document.createElement("div"));
      caption.className = "chart-title";
      caption.dataset.chart = chart.title;
      const holder = cell.appendChild(document.createElement("div"));
      return { caption, plot: makeFlowChart(holder, k, c) };
    });
    const log = document.createElement("ol");
    box.append(title, route, charts, log);
    $("flow-list").appendChild(box);
    state.flowEls.push({ route, plots, log });
  });
}

function makeFlowChart(holder, k, c) {
  const chart = FLOW_CHARTS[c];
  const h = state.flowHistory[k];
  return new uPlot({
    width: 140, height: 40, pxAlign: false, padding: [2, 0, 2, 0],
    scales: { x: { time: false }, y: { range: (u, min, max) => [0, Math.max(max || 0, chart.least)] } },
    legend: { show: false }, cursor: { show: false }, select: { show: false },
    axes: [{ show: false }, { show: false }],
    series: [{}, { stroke: chart.colour, width: 1, points: { show: false }, spanGaps: false }],
  }, [h.t, h.series[c]], holder);
}

function recordFlows(frame) {
  (frame.flows || []).forEach(([path, reached, since, ...values], k) => {
    const h = state.flowHistory[k];
    h.t.push(frame.t);
    values.forEach((v, c) => h.series[c].push(v === null ? null : v * FLOW_CHARTS[c].scale));
    if (h.t.length > HISTORY) { h.t.shift(); h.series.forEach((series) => series.shift()); }
    const route = routeText(path, reached);
    const previous = state.lastRoutes[k];
    if (previous !== null && previous !== route) {
      state.changedAt[k] = since;
      state.routeLog[k].unshift({ t: since, from: previous, to: route });
      state.routeLog[k].length = Math.min(state.routeLog[k].length, LOG_ENTRIES);
    }
    state.lastRoutes[k] = route;
  });
}

function forgetHistory() {
  for (const h of [...state.history, ...state.flowHistory]) {
    h.t.length = 0;
    h.series.forEach((series) => { series.length = 0; });
  }
  state.lastRoutes.fill(null); state.changedAt.fill(null);
  state.routeLog.forEach((log) => { log.length = 0; });
}

const recentlyChanged = (frame, k) => state.changedAt[k] !== null && frame.t - state.changedAt[k] < CHANGED_S;

function drawPaths(frame, positions) {
  (frame.flows || []).forEach(([path, reached], k) => {
    const { line, mark } = state.pathEls[k];
    line.setAttribute("points", path.map((i) => `${sx(positions[i][0]).toFixed(1)},${sy(positions[i][1]).toFixed(1)}`).join(" "));
    line.classList.toggle("broken", !reached);
    line.classList.toggle("changed", recentlyChanged(frame, k));
    line.dataset.route = path.map(nodeName).join(" ");
    line.dataset.reached = reached;
    const [x, y] = positions[path[path.length - 1]];
    mark.setAttribute("x", (sx(x) + 8).toFixed(1)); mark.setAttribute("y", (sy(y) + 16 + 12 * k).toFixed(1));
    mark.textContent = reached ? "" : `✕ ${state.meta.flows[k].name}: no route on`;
  });
}

function drawFlows(frame) {
  (frame.flows || []).forEach(([path, reached, since, ...values], k) => {
    const { route, plots, log } = state.flowEls[k];
    route.textContent = reached
      ? `route ${routeText(path, reached)} (${path.length - 1} hops, since t = ${since.toFixed(1)} s)`
      : `no route beyond ${nodeName(path[path.length - 1])}: ${routeText(path, reached)}`;
    route.classList.toggle("changed", recentlyChanged(frame, k));
    route.classList.toggle("broken", !reached);
    plots.forEach(({ caption, plot }, c) => {
      const chart = FLOW_CHARTS[c], v = values[c];
      caption.textContent = `${chart.title} ${v === null ? "–" : (v * chart.scale).toFixed(chart.digits)} ${chart.unit}`;
      caption.dataset.value = v === null ? "" : v;
      plot.setData([state.flowHistory[k].t, state.flowHistory[k].series[c]]);
    });
    log.replaceChildren(...state.routeLog[k].map((change) => {
      const item = document.createElement("li");
      item.textContent = `t = ${change.t.toFixed(1)} s: ${change.from} ⇒ ${change.to}`;
      return item;
    }));
  });
}

// --- actions: air capture (live), the replay's slider and play button ---

function setUpActions() {
  $("heat-on").addEventListener("change", () => { if (state.frame) draw(state.frame); });
  if (state.meta.capture) {
    $("capture").hidden = false;
    $("capture").addEventListener("click", toggleCapture);
  }
  if (state.meta.replay) {
    $("replay").hidden = false;
    const slider = $("slider");
    slider.min = state.meta.replay.start;
    slider.max = state.meta.replay.end;
    slider.addEventListener("pointerdown", () => { state.sliding = true; });
    window.addEventListener("pointerup", () => { state.sliding = false; });  // also when let go off the slider
    slider.addEventListener("input", () => act("/api/replay", { t: Number(slider.value) }));
    $("play").addEventListener("click", () => act("/api/replay", { playing: !(state.frame && state.frame.replay.playing) }));
  }
}

// An action of the user's (every POST carries the secret). Its error stays
// on the page until an action succeeds: the status is the frames', renewed
// four times a second.
async function act(path, body) {
  try {
    const answer = await request(path, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Meshemu-Token": TOKEN },
      body: JSON.stringify(body),
    });
    $("action-error").textContent = "";
    return answer;
  } catch (error) {
    $("action-error").textContent = String(error);
    return null;
  }
}

async function toggleCapture() {
  const answer = await act("/api/capture", { run: !(state.frame && state.frame.capture) });
  if (answer && !answer.capturing) state.lastCapture = answer.path;
}

function drawActions(frame) {
  if (state.meta.capture) {
    $("capture").textContent = frame.capture ? "stop air capture" : "start air capture";
    $("capture-file").textContent = frame.capture ? `capturing into ${frame.capture}`
      : state.lastCapture ? `captured into ${state.lastCapture}` : "";
  }
  if (frame.replay) {
    if (!state.sliding) $("slider").value = frame.replay.t;
    $("play").textContent = frame.replay.playing ? "pause" : "play";
    $("replay-time").textContent = `${frame.replay.t.toFixed(1)} / ${state.meta.replay.end.toFixed(1)} s`;
  }
}

start().catch((error) => setStatus(String(error), true));
