// recfn's interactive timeline (anywidget ESM). The kernel keeps the trace; this view draws the
// level-of-detail response it is given (`view`: ranges >= 1 px, density buckets, memory levels)
// and asks for a new one after each zoom or pan with `model.send({type: "query", ...})`. The
// summary pane's table (`summary`) is the kernel's too, for the whole trace or a time window.
// Names come with their short form and their colour (the PNG's and the flame graph's): this
// file only draws them.

const GUTTER = 150; // px of lane labels on the left
const AXIS_H = 22;
const ROW_H = 16;
const LANE_GAP = 18; // lane title band
const MEMORY_H = 44;
const PERFETTO_ORIGIN = "https://ui.perfetto.dev";
const PERFETTO_MAX_PINGS = 100; // one per 100 ms: the UI has 10 s to answer PONG
const TREE_ROW_H = 18;
const MIN_SPAN_NS = 50;
const TICK_GAP_PX = 16; // free space between two axis labels
const MIN_TICK_PX = 60; // ticks no closer than this
const HINT_MS = 1800;

const UNITS = [
  ["s", 1e9],
  ["ms", 1e6],
  ["µs", 1e3],
  ["ns", 1],
];

function trimZeros(text) {
  return text.includes(".") ? text.replace(/\.?0+$/, "") : text;
}

// A duration with a unit and at most 4 significant digits, no needless zeros ("1 s", "12.5 ms").
export function formatNs(ns) {
  const a = Math.abs(ns);
  for (const [unit, size] of UNITS) {
    if (a >= size || size === 1) {
      const digits = size === 1 ? String(Math.round(ns)) : trimZeros((ns / size).toPrecision(4));
      return `${digits} ${unit}`;
    }
  }
  return `${ns} ns`;
}

// A time window [t0, t1] (ns from the trace start) in one unit, the larger end's, with the
// decimals its length needs: "0 s – 1.355 s", "200.8012 ms – 200.8031 ms".
export function formatWindow(t0, t1) {
  const largest = Math.max(Math.abs(t0), Math.abs(t1), 1);
  const [unit, size] = UNITS.find(([, s]) => largest >= s) || UNITS[UNITS.length - 1];
  const span = Math.max(t1 - t0, 1);
  const decimals = Math.min(9, Math.max(0, 3 - Math.floor(Math.log10(span / size))));
  const show = (t) => trimZeros((t / size).toFixed(size === 1 ? 0 : decimals));
  return `${show(t0)} ${unit} – ${show(t1)} ${unit}`;
}

// The ticks of a time axis over [t0, t1] (ns from the trace start) on `widthPx` pixels: the
// densest 1-2-5 step (ticks MIN_TICK_PX apart at least) whose widest label fits between two
// ticks (`measure` gives a label's width in px); labels in one unit (the largest that the
// axis's largest value holds) with as many decimals as the step needs and no trailing zeros,
// so that every label differs at any zoom.
// Returns [{t, label}], t an integer multiple of the step.
export function axisTicks(t0, t1, widthPx, measure = (text) => 6.5 * text.length) {
  const span = t1 - t0;
  if (!(span > 0) || !(widthPx > 0)) return [];
  const largest = Math.max(Math.abs(t0), Math.abs(t1), 1);
  const [unit, size] = UNITS.find(([, s]) => largest >= s) || UNITS[UNITS.length - 1];
  const ticksOf = (step) => {
    const decimals = Math.max(0, -Math.floor(Math.log10(step / size) + 1e-9));
    const ticks = [];
    for (let k = Math.ceil(t0 / step); k * step <= t1; k++) {
      ticks.push({ t: k * step, label: `${trimZeros((k * step / size).toFixed(decimals))} ${unit}` });
    }
    return ticks;
  };
  let step = niceStep((span * MIN_TICK_PX) / widthPx);
  for (;;) {
    const ticks = ticksOf(step);
    const widest = Math.max(0, ...ticks.map((tick) => measure(tick.label)));
    const next = nextStep(step);
    if ((step / span) * widthPx >= widest + TICK_GAP_PX || ticksOf(next).length < 2) return ticks;
    step = next;
  }
}

function niceStep(raw) {
  if (raw <= 1) return 1; // whole nanoseconds
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw * (1 - 1e-12)) return m * p;
  return 10 * p;
}

function nextStep(step) {
  const p = 10 ** Math.floor(Math.log10(step) + 1e-9);
  const m = Math.round(step / p);
  return m === 1 ? 2 * p : m === 2 ? 5 * p : 10 * p;
}

function formatBytes(b) {
  const a = Math.abs(b);
  if (a >= 2 ** 30) return `${trimZeros((b / 2 ** 30).toFixed(2))} GiB`;
  if (a >= 2 ** 20) return `${trimZeros((b / 2 ** 20).toFixed(2))} MiB`;
  if (a >= 2 ** 10) return `${trimZeros((b / 2 ** 10).toFixed(1))} KiB`;
  return `${b} B`;
}

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

// Dark text on light bars, light text on dark ones.
function textOn(hex) {
  const n = parseInt(hex.slice(1), 16);
  const luminance = 0.299 * (n >> 16) + 0.587 * ((n >> 8) & 255) + 0.114 * (n & 255);
  return luminance > 140 ? "#111" : "#fff";
}

// The kernel sends the state as JSON text (notebook_ext/widget/view.py says why).
function state(model, name) {
  const text = model.get(name);
  return text ? JSON.parse(text) : {};
}

function render({ model, el: host }) {
  const info = state(model, "info_json");
  const renders = (window.__recfnRenders = window.__recfnRenders || {});
  renders[info.uid] = (renders[info.uid] || 0) + 1;
  const names = new Map(); // name id -> full name, filled from every response
  const shorts = new Map(); // name id -> short name, where it differs
  const colors = new Map(); // name id -> "#rrggbb"
  let view = state(model, "view_json");
  let t0 = 0;
  let t1 = info.span_ns;
  let mode = "timeline";
  let tree = null;
  let highlight = new Set();
  let matches = 0;
  let selected = null; // the name id a click or a table row chose
  let windowSel = null; // [a, b]: the time window the table shows, null for the whole trace
  let summary = state(model, "summary_json");
  let active = false; // the wheel zooms only after a click into the widget (or with Ctrl/⌘)
  let seq = 0;
  let applied = 0;
  let painted = false;
  const pending = new Map(); // request id -> callback
  const details = new Map(); // row -> detail
  let hoverRow = -1;
  let drag = null; // a pan in progress
  let dragSelect = null; // {a, b}: a time window being chosen (Shift+drag or a drag on the axis)
  let dragged = false; // the click that ends a drag does not highlight

  const root = el("div", "recfn-tl");
  root.tabIndex = 0;
  root.dataset.uid = info.uid;
  root.dataset.originNs = String(info.origin_ns); // epoch ns (to a microsecond as a double)
  root.dataset.spanNs = String(info.span_ns);
  root.dataset.renders = String(renders[info.uid]);
  root.dataset.wheel = "page";
  root.dataset.pending = "0";
  const bar = el("div", "recfn-tl-bar");
  const search = el("input", "recfn-tl-search");
  search.type = "search";
  search.placeholder = "highlight names…";
  const found = el("span", "recfn-tl-matches");
  const toggle = el("button", "recfn-tl-toggle", "Call tree");
  const reset = el("button", "recfn-tl-reset", "Reset zoom");
  const download = el("button", "recfn-tl-download", "Download trace");
  const perfetto = el("button", "recfn-tl-perfetto", "Open in Perfetto");
  const status = el("span", "recfn-tl-status");
  const where = el("span", "recfn-tl-where");
  download.title = "the trace as Chrome/Perfetto JSON (.json.gz)";
  perfetto.title = "open the trace in the Perfetto UI (a new tab)";
  bar.append(search, found, toggle, reset, download, perfetto, status, where);
  const scroller = el("div", "recfn-tl-scroll");
  const canvas = el("canvas", "recfn-tl-canvas");
  const tip = el("div", "recfn-tl-tip");
  tip.style.display = "none";
  const hint = el("div", "recfn-tl-hint", "Click the timeline to zoom with the wheel, or hold Ctrl (⌘)");
  hint.style.display = "none";
  scroller.append(canvas);
  const pane = el("div", "recfn-tl-pane");
  const caption = el("div", "recfn-tl-caption");
  const captionText = el("span");
  const whole = el("button", "recfn-tl-whole", "Whole trace");
  whole.title = "the table of the whole trace again";
  caption.append(captionText, whole);
  const table = el("table", "recfn-tl-table");
  const head = el("thead");
  const headRow = el("tr");
  const columns = [
    ["name", "name", "the short name; the full name is its tooltip"],
    ["calls", "calls", "ranges of this name (in the window: that overlap it)"],
    ["self", "self", "time in the range itself, not in the ranges it contains"],
    ["total", "total", "time in the name's outermost ranges (recursion counted once)"],
    ["mean", "mean", "time per call"],
    ["location", "file:line", "where the function is defined"],
  ];
  for (const [key, title, help] of columns) {
    const th = el("th", null, title);
    th.dataset.key = key;
    th.title = `${help}; click to sort`;
    headRow.append(th);
  }
  head.append(headRow);
  const body = el("tbody");
  table.append(head, body);
  const tableBox = el("div", "recfn-tl-tablebox");
  tableBox.append(table);
  pane.append(caption, tableBox);
  root.append(bar, scroller, tip, hint, pane);
  host.append(root);

  // CSS colours as [r, g, b], read back from a 1x1 canvas (any syntax the theme uses).
  const rgbCache = new Map();
  const probe = document.createElement("canvas");
  probe.width = probe.height = 1;
  function rgbOf(color) {
    let rgb = rgbCache.get(color);
    if (!rgb) {
      const c = probe.getContext("2d", { willReadFrequently: true });
      c.clearRect(0, 0, 1, 1);
      c.fillStyle = color;
      c.fillRect(0, 0, 1, 1);
      rgb = Array.from(c.getImageData(0, 0, 1, 1).data.slice(0, 3));
      rgbCache.set(color, rgb);
    }
    return rgb;
  }

  // A response's density buckets as images, one pixel per bucket and row: how busy (the
  // theme's density colour, its opacity the busy share) and, with a highlight, where matches
  // are. Made once per response and theme.
  const densityCache = new WeakMap();
  function densityImages(response) {
    const key = `${theme.density}|${theme.mark}|${highlight.size}`;
    const cached = densityCache.get(response);
    if (cached && cached.key === key) return cached;
    const d = response.density;
    const width = Math.max(1, Math.ceil(response.width_px / d.bucket_px));
    const rows = Math.max(1, d.lane.length);
    const busy = new ImageData(width, rows);
    const lit = d.match && highlight.size ? new ImageData(width, rows) : null;
    const [r, g, b] = rgbOf(theme.density);
    const [mr, mg, mb] = rgbOf(theme.mark);
    let merged = 0;
    for (let i = 0; i < d.lane.length; i++) {
      const pxs = d.px[i];
      for (let j = 0; j < pxs.length; j++) {
        const at = 4 * (i * width + Math.floor(pxs[j] / d.bucket_px));
        busy.data[at] = r;
        busy.data[at + 1] = g;
        busy.data[at + 2] = b;
        busy.data[at + 3] = Math.round(255 * (0.15 + (0.75 * d.busy[i][j]) / 255));
        if (lit && d.match[i][j] > 0) {
          merged += d.match[i][j];
          lit.data[at] = mr;
          lit.data[at + 1] = mg;
          lit.data[at + 2] = mb;
          lit.data[at + 3] = 255;
        }
      }
    }
    const canvasOf = (data) => {
      const off = document.createElement("canvas");
      off.width = width;
      off.height = rows;
      off.getContext("2d").putImageData(data, 0, 0);
      return off;
    };
    const made = { key, width, busy: canvasOf(busy), match: lit ? canvasOf(lit) : null, merged };
    densityCache.set(response, made);
    return made;
  }

  // Label widths per name id (the font never changes): measured once, not per frame.
  const labelWidths = new Map();
  function labelWidth(ctx, id) {
    let width = labelWidths.get(id);
    if (width === undefined) {
      width = ctx.measureText(shortName(id)).width;
      labelWidths.set(id, width);
    }
    return width;
  }

  // Lane geometry: a title band, then one row per depth (or the memory strip).
  const lanes = [];
  let y = AXIS_H;
  for (const lane of info.lanes) {
    const top = y + LANE_GAP;
    const height = lane.kind === "memory" ? MEMORY_H : lane.depth * ROW_H;
    lanes.push({ ...lane, title: y, top, height });
    y = top + height + 6;
  }
  const timelineHeight = y + 4;
  const memoryLane = lanes.find((lane) => lane.kind === "memory");
  if (memoryLane) root.dataset.memoryTop = String(memoryLane.top + memoryLane.height / 2);

  function learn(response) {
    for (const [id, name] of Object.entries(response.names || {})) names.set(Number(id), name);
    for (const [id, name] of Object.entries(response.short || {})) shorts.set(Number(id), name);
    for (const [id, hex] of Object.entries(response.colors || {})) colors.set(Number(id), hex);
  }
  learn(view);
  if (summary) learn(summary);
  const fullName = (id) => names.get(id) || "?";
  const shortName = (id) => shorts.get(id) || names.get(id) || "?";
  const colorOf = (id) => colors.get(id) || "#9e9e9e";

  // Colours of the page's theme (JupyterLab's variables, with light defaults), read as each
  // frame is drawn.
  let theme = {};
  function readTheme() {
    const style = getComputedStyle(root);
    const get = (name, fallback) => style.getPropertyValue(name).trim() || fallback;
    theme = {
      bg: get("--recfn-bg", "#fff"),
      fg: get("--recfn-fg", "#222"),
      muted: get("--recfn-muted", "#555"),
      band: get("--recfn-band", "#f3f3f3"),
      axis: get("--recfn-axis-bg", "#fafafa"),
      density: get("--recfn-density", "#5a6478"),
      mark: get("--recfn-mark", "#d00"),
      memory: get("--recfn-memory", "#2e7d32"),
    };
  }

  // Requests in flight or waiting on a timer, as `data-pending` (the browser tests wait for 0).
  let queryTimer = null;
  let searchTimer = null;
  function markPending() {
    const timers = (queryTimer === null ? 0 : 1) + (searchTimer === null ? 0 : 1);
    root.dataset.pending = String(pending.size + timers);
  }

  function send(message, callback) {
    const id = ++seq;
    pending.set(id, callback);
    markPending();
    model.send({ ...message, id });
    return id;
  }

  function onMessage(msg, buffers) {
    const callback = pending.get(msg.id);
    pending.delete(msg.id);
    markPending();
    if (msg.error) {
      status.textContent = `recfn: ${msg.error}`;
      return;
    }
    if (callback) callback(msg.result, msg.id, buffers || []);
  }
  model.on("msg:custom", onMessage);

  function requestView() {
    clearTimeout(queryTimer);
    queryTimer = setTimeout(() => {
      queryTimer = null;
      const width = Math.max(1, Math.round(plotWidth()));
      const asked = performance.now();
      const message = { type: "query", t0, t1, width, highlight: [...highlight] };
      send(message, (result, id) => {
        if (id < applied) return; // an older answer arriving late
        applied = id;
        learn(result);
        view = result;
        matches = result.matches || 0;
        root.dataset.roundTripMs = String(Math.round(performance.now() - asked));
        root.dataset.queries = String(Number(root.dataset.queries || 0) + 1);
        draw();
      });
    }, 40);
    markPending();
  }

  // Layout is read once per frame (`measure`), never between the canvas calls: a read after a
  // DOM write forces the page's layout, which in JupyterLab costs milliseconds each time.
  let viewWidth = 0;
  let plotW = 100;
  function measure() {
    viewWidth = scroller.clientWidth;
    plotW = Math.max(100, viewWidth - GUTTER - 2);
    return viewWidth;
  }
  const shown = {}; // dataset values of this frame, written at its end

  function plotWidth() {
    return plotW;
  }

  function xOf(t) {
    return GUTTER + ((t - t0) / (t1 - t0)) * plotWidth();
  }

  function tOf(x) {
    return t0 + ((x - GUTTER) / plotWidth()) * (t1 - t0);
  }

  function sizeCanvas(height) {
    const ratio = window.devicePixelRatio || 1;
    const width = viewWidth;
    if (canvas.width !== Math.round(width * ratio) || canvas.height !== Math.round(height * ratio)) {
      canvas.width = Math.round(width * ratio); // a new backing store: only when the size changes
      canvas.height = Math.round(height * ratio);
      canvas.style.width = `${width}px`;
      canvas.style.height = `${height}px`;
    }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    return ctx;
  }

  function drawAxis(ctx, width) {
    ctx.fillStyle = theme.axis;
    ctx.fillRect(0, 0, width, AXIS_H);
    ctx.fillStyle = theme.fg;
    ctx.textAlign = "left";
    ctx.fillText("from trace start", 6, AXIS_H / 2);
    ctx.fillStyle = theme.muted;
    const ticks = axisTicks(t0, t1, plotWidth(), (text) => ctx.measureText(text).width);
    const drawn = [];
    let lastRight = GUTTER - 4; // the first label may start at the gutter's edge
    shown.tickRight = "0";
    for (const tick of ticks) {
      const x = xOf(tick.t);
      const w = ctx.measureText(tick.label).width;
      ctx.fillRect(x, AXIS_H - 6, 1, 6);
      // The label right of its tick, or left of it where it would run past the edge.
      let left = x + 3;
      if (left + w > width - 2) left = x - 3 - w;
      if (left < lastRight + 4) continue;
      ctx.fillText(tick.label, left, AXIS_H / 2);
      lastRight = left + w;
      shown.tickRight = String(Math.ceil(lastRight));
      drawn.push(tick.label);
    }
    shown.ticks = JSON.stringify(drawn);
  }

  function drawTimeline() {
    const began = performance.now();
    const ctx = sizeCanvas(timelineHeight);
    const width = viewWidth;
    ctx.fillStyle = theme.bg;
    ctx.fillRect(0, 0, width, timelineHeight);
    drawAxis(ctx, width);
    for (const lane of lanes) {
      ctx.fillStyle = theme.band;
      ctx.fillRect(0, lane.title, width, LANE_GAP - 2);
      ctx.fillStyle = theme.fg;
      ctx.textAlign = "left";
      ctx.fillText(lane.label, 6, lane.title + LANE_GAP / 2 - 1);
    }
    ctx.save();
    ctx.beginPath();
    ctx.rect(GUTTER, AXIS_H, width - GUTTER, timelineHeight - AXIS_H);
    ctx.clip();
    // Density: ranges shorter than a pixel, merged per bucket (darker = busier); buckets that
    // hold highlighted ranges get the highlight's colour at their top and bottom. Each is an
    // image of one pixel per bucket and row, drawn scaled: a few draws per row, not one per
    // bucket.
    const d = view.density;
    const images = densityImages(view);
    const bucketNs = ((view.t1 - view.t0) / view.width_px) * d.bucket_px;
    const left = xOf(view.t0);
    const across = xOf(view.t0 + images.width * bucketNs) - left;
    ctx.imageSmoothingEnabled = false;
    for (let i = 0; i < d.lane.length; i++) {
      const top = lanes[d.lane[i]].top + d.depth[i] * ROW_H + 1;
      ctx.drawImage(images.busy, 0, i, images.width, 1, left, top, across, ROW_H - 2);
      if (images.match) {
        ctx.drawImage(images.match, 0, i, images.width, 1, left, top, across, 3);
        ctx.drawImage(images.match, 0, i, images.width, 1, left, top + ROW_H - 5, across, 3);
      }
    }
    const merged = images.merged;
    // Ranges of a pixel or more, coloured by name; short names drawn where they fit.
    const r = view.ranges;
    let lit = 0;
    const dim = highlight.size > 0;
    for (let i = 0; i < r.row.length; i++) {
      const lane = lanes[r.lane[i]];
      const top = lane.top + r.depth[i] * ROW_H + 1;
      const x0 = Math.max(xOf(r.start[i]), GUTTER - 2);
      const x1 = Math.min(xOf(r.end[i]), width + 2);
      if (x1 < GUTTER || x0 > width) continue;
      const id = r.name[i];
      const on = highlight.has(id);
      if (on) lit++;
      const fill = colorOf(id);
      ctx.globalAlpha = dim && !on ? 0.25 : 1;
      ctx.fillStyle = fill;
      ctx.fillRect(x0, top, Math.max(x1 - x0, 1), ROW_H - 2);
      ctx.globalAlpha = 1;
      if (on) {
        ctx.strokeStyle = theme.mark;
        ctx.lineWidth = 2;
        ctx.strokeRect(x0 + 1, top + 1, Math.max(x1 - x0 - 2, 1), ROW_H - 4);
      } else if (r.row[i] === hoverRow) {
        ctx.strokeStyle = theme.fg;
        ctx.lineWidth = 1;
        ctx.strokeRect(x0 + 0.5, top + 0.5, Math.max(x1 - x0 - 1, 1), ROW_H - 3);
      }
      if (x1 - x0 > 30) {
        ctx.globalAlpha = dim && !on ? 0.4 : 1;
        ctx.fillStyle = textOn(fill);
        ctx.textAlign = "left";
        const room = x1 - Math.max(x0, GUTTER) - 6;
        let label = shortName(id);
        const full = labelWidth(ctx, id);
        if (full > room) {
          const fit = Math.max(0, Math.floor((room / full) * label.length) - 1);
          label = fit > 1 ? `${label.slice(0, fit)}…` : "";
        }
        if (label) ctx.fillText(label, Math.max(x0, GUTTER) + 3, top + (ROW_H - 2) / 2);
        ctx.globalAlpha = 1;
      }
    }
    // Memory lanes: the level's low-high band per pixel of the response.
    for (const memory of view.memory) {
      const lane = lanes[memory.lane];
      // Scaled to the levels in view, so a small change on a large base still shows.
      const top = Math.max(...memory.high);
      const floor = Math.min(...memory.low, top - 1);
      const scale = (lane.height - 6) / (top - floor);
      const yOf = (v) => lane.top + lane.height - 2 - (v - floor) * scale;
      const pxNs = (view.t1 - view.t0) / memory.high.length;
      for (let j = 0; j < memory.high.length; j++) {
        const x0 = xOf(view.t0 + j * pxNs);
        const x1 = Math.max(xOf(view.t0 + (j + 1) * pxNs), x0 + 1);
        const hi = yOf(memory.high[j]);
        ctx.fillStyle = theme.memory;
        ctx.globalAlpha = 0.35;
        ctx.fillRect(x0, hi, x1 - x0, lane.top + lane.height - hi);
        ctx.globalAlpha = 1;
        ctx.fillRect(x0, hi, x1 - x0, Math.max(yOf(memory.low[j]) - hi, 1.5));
      }
      ctx.fillStyle = theme.memory;
      ctx.textAlign = "right";
      ctx.fillText(`${formatBytes(floor)} – ${formatBytes(top)}`, width - 6, lane.top + 8);
    }
    // The time window the table shows.
    const band = dragSelect ? [dragSelect.a, dragSelect.b] : windowSel;
    if (band) {
      const a = xOf(Math.min(...band));
      const b = xOf(Math.max(...band));
      ctx.fillStyle = theme.mark;
      ctx.globalAlpha = 0.12;
      ctx.fillRect(a, AXIS_H, Math.max(b - a, 1), timelineHeight - AXIS_H);
      ctx.globalAlpha = 1;
      ctx.fillRect(a, AXIS_H, 1, timelineHeight - AXIS_H);
      ctx.fillRect(b, AXIS_H, 1, timelineHeight - AXIS_H);
    }
    ctx.restore();
    shown.highlighted = String(lit);
    shown.densityMatches = String(merged);
    shown.ranges = String(r.row.length);
    shown.memoryLanes = String(view.memory.length);
    const took = performance.now() - began;
    shown.drawMs = took.toFixed(2);
    shown.drawMaxMs = Math.max(took, Number(root.dataset.drawMaxMs || 0)).toFixed(2);
  }

  // -- call tree (icicle): x = share of the total, y = depth ---------------------------------
  let treeBoxes = [];
  function layoutTree() {
    const children = tree.name.map(() => []);
    const roots = [];
    tree.parent.forEach((p, i) => (p < 0 ? roots : children[p]).push(i));
    const total = roots.reduce((sum, i) => sum + tree.total[i], 0) || 1;
    const boxes = [];
    let depthMax = 0;
    const place = (nodes, x, scale, depth) => {
      nodes.sort((a, b) => tree.total[b] - tree.total[a]);
      for (const i of nodes) {
        const w = tree.total[i] * scale;
        boxes.push({ node: i, x, w, depth });
        depthMax = Math.max(depthMax, depth);
        place(children[i], x, scale, depth + 1);
        x += w;
      }
    };
    place(roots, 0, 1 / total, 0);
    return { boxes, depthMax, total };
  }

  function drawTree() {
    if (!tree) return;
    const { boxes, depthMax, total } = layoutTree();
    const height = AXIS_H + (depthMax + 1) * TREE_ROW_H + 8;
    const ctx = sizeCanvas(height);
    const width = viewWidth;
    ctx.fillStyle = theme.bg;
    ctx.fillRect(0, 0, width, height);
    ctx.fillStyle = theme.fg;
    ctx.textAlign = "left";
    ctx.fillText(
      `call tree · ${formatNs(total)} total · ${tree.name.length} of ${tree.nodes} nodes · threads merged`,
      6,
      AXIS_H / 2,
    );
    const dim = highlight.size > 0;
    treeBoxes = [];
    let lit = 0;
    for (const box of boxes) {
      const x = 4 + box.x * (width - 8);
      const w = box.w * (width - 8);
      if (w < 0.5) continue;
      const top = AXIS_H + box.depth * TREE_ROW_H;
      const id = tree.name[box.node];
      const on = highlight.has(id);
      if (on) lit++;
      const fill = colorOf(id);
      ctx.globalAlpha = dim && !on ? 0.25 : 1;
      ctx.fillStyle = fill;
      ctx.fillRect(x, top, Math.max(w - 1, 0.5), TREE_ROW_H - 1);
      ctx.globalAlpha = 1;
      if (on) {
        ctx.strokeStyle = theme.mark;
        ctx.lineWidth = 2;
        ctx.strokeRect(x + 1, top + 1, Math.max(w - 3, 1), TREE_ROW_H - 3);
      }
      if (w > 40) {
        ctx.fillStyle = textOn(fill);
        const text = `${shortName(id)} ${formatNs(tree.total[box.node])}`;
        const fit = Math.floor(((w - 6) / ctx.measureText(text).width) * text.length);
        ctx.fillText(fit >= text.length ? text : `${text.slice(0, Math.max(fit - 1, 0))}…`, x + 3, top + TREE_ROW_H / 2);
      }
      treeBoxes.push({ ...box, x, w, top });
    }
    shown.highlighted = String(lit);
    shown.treeNodes = String(treeBoxes.length);
  }

  let themeDirty = true;
  let drawnTheme = "";
  const themeKey = () => JSON.stringify(theme);
  function draw() {
    // Not laid out (not yet attached, or hidden while JupyterLab loads a theme): the resize
    // observer draws once there is room.
    if (!measure()) return;
    if (themeDirty) {
      readTheme();
      themeDirty = false;
    }
    drawnTheme = themeKey();
    if (mode === "timeline") drawTimeline();
    else drawTree();
    // Then the page: text and data attributes (for tests and benchmarks), after the canvas.
    where.textContent =
      mode === "timeline"
        ? `${formatWindow(t0, t1)} of ${formatNs(info.span_ns)} · ${info.ranges.toLocaleString()} range${info.ranges === 1 ? "" : "s"}`
        : "";
    found.textContent = highlight.size ? `${matches.toLocaleString()} match${matches === 1 ? "" : "es"}` : "";
    shown.view = mode;
    shown.t0 = String(Math.round(t0));
    shown.t1 = String(Math.round(t1));
    shown.matches = String(highlight.size ? matches : 0);
    if (!painted) {
      painted = true;
      shown.firstPaint = String(Date.now()); // epoch ms, as the trace's clock
    }
    Object.assign(root.dataset, shown);
  }

  // -- summary pane ------------------------------------------------------------------------------
  function showSummary(result) {
    if (!result || !result.rows) {
      captionText.textContent = "Summary · being computed…"; // the kernel sends it next
      whole.style.display = "none";
      pane.dataset.rows = "0";
      return;
    }
    summary = result;
    learn(result);
    const rows = result.rows;
    body.replaceChildren();
    for (let i = 0; i < rows.name.length; i++) {
      const id = rows.name[i];
      const tr = el("tr");
      tr.dataset.name = String(id);
      const nameCell = el("td", "recfn-tl-name");
      const swatch = el("span", "recfn-tl-swatch");
      swatch.style.background = colorOf(id);
      nameCell.append(swatch, document.createTextNode(shortName(id)));
      nameCell.title = fullName(id);
      tr.append(
        nameCell,
        el("td", null, rows.calls[i].toLocaleString()),
        el("td", null, formatNs(rows.self[i])),
        el("td", null, formatNs(rows.total[i])),
        el("td", null, formatNs(rows.mean[i])),
        el("td", "recfn-tl-loc", rows.location[i]),
      );
      if (id === selected) tr.classList.add("recfn-selected");
      body.append(tr);
    }
    for (const th of headRow.children) {
      th.classList.toggle("recfn-sorted", th.dataset.key === result.sort);
      th.dataset.dir = th.dataset.key === result.sort ? (result.descending ? "desc" : "asc") : "";
    }
    const scope =
      result.t0 === null ? "whole trace" : `window ${formatWindow(result.t0, result.t1)}`;
    const more = result.groups - rows.name.length;
    captionText.textContent =
      `Summary · ${scope} · ${result.groups.toLocaleString()} name${result.groups === 1 ? "" : "s"}` +
      (more > 0 ? ` (${rows.name.length} shown)` : "");
    whole.style.display = result.t0 === null ? "none" : "";
    pane.dataset.window = result.t0 === null ? "" : `${Math.round(result.t0)}-${Math.round(result.t1)}`;
    pane.dataset.rows = String(rows.name.length);
    pane.dataset.sort = `${result.sort}:${result.descending ? "desc" : "asc"}`;
    const chosen = body.querySelector("tr.recfn-selected");
    if (chosen) chosen.scrollIntoView({ block: "nearest" });
  }

  function askSummary(changes = {}) {
    const message = {
      type: "summary",
      sort: summary && summary.sort ? summary.sort : "total",
      descending: summary && summary.rows ? summary.descending : true,
      focus: selected,
      ...(windowSel ? { t0: Math.min(...windowSel), t1: Math.max(...windowSel) } : {}),
      ...changes,
    };
    send(message, (result) => showSummary(result));
  }

  head.addEventListener("click", (event) => {
    const th = event.target.closest("th");
    if (!th) return;
    const key = th.dataset.key;
    const current = summary && summary.rows ? summary : { sort: "total", descending: true };
    const descending = key === current.sort ? !current.descending : key !== "name" && key !== "location";
    askSummary({ sort: key, descending });
  });

  body.addEventListener("click", (event) => {
    const tr = event.target.closest("tr");
    if (!tr) return;
    const id = Number(tr.dataset.name);
    select(id, false);
    if (mode !== "timeline") return;
    send({ type: "longest", name: id }, (range) => {
      const length = Math.max(range.end - range.start, MIN_SPAN_NS);
      setWindow(range.start - length * 0.25, range.end + length * 0.25);
      root.dataset.focusRow = String(range.row);
    });
  });

  whole.addEventListener("click", () => {
    windowSel = null;
    askSummary();
    draw();
  });

  // Highlight one name (or none) everywhere: timeline, tree, table, search box.
  function select(id, fromCanvas) {
    const same = id === null ? highlight.size === 0 : highlight.size === 1 && highlight.has(id);
    selected = id;
    highlight = id === null ? new Set() : new Set([id]);
    search.value = id === null ? "" : fullName(id);
    for (const tr of body.children) tr.classList.toggle("recfn-selected", Number(tr.dataset.name) === id);
    const row = id === null ? null : body.querySelector(`tr[data-name="${id}"]`);
    if (row) row.scrollIntoView({ block: "nearest" });
    else if (id !== null && fromCanvas) askSummary(); // brings the row into the table
    draw();
    if (!same) requestView(); // the density buckets count the new name's matches
  }

  // -- hit testing and the tooltip ------------------------------------------------------------
  function hit(x, yPos) {
    if (mode === "tree") {
      const box = treeBoxes.find((b) => x >= b.x && x < b.x + b.w && yPos >= b.top && yPos < b.top + TREE_ROW_H);
      return box ? { kind: "node", node: box.node } : null;
    }
    if (x < GUTTER) return null;
    const lane = lanes.findIndex((l) => yPos >= l.top && yPos < l.top + l.height);
    if (lane < 0) return null;
    const t = tOf(x);
    if (lanes[lane].kind === "memory") {
      const memory = view.memory.find((m) => m.lane === lane);
      if (!memory) return null;
      const j = Math.floor(((t - view.t0) / (view.t1 - view.t0)) * memory.high.length);
      if (j < 0 || j >= memory.high.length) return null;
      return { kind: "memory", low: memory.low[j], high: memory.high[j] };
    }
    const depth = Math.floor((yPos - lanes[lane].top) / ROW_H);
    const slack = (t1 - t0) / plotWidth(); // one pixel
    const r = view.ranges;
    let best = -1;
    for (let i = 0; i < r.row.length; i++) {
      if (r.lane[i] === lane && r.depth[i] === depth && r.start[i] - slack <= t && t < r.end[i] + slack) {
        if (best < 0 || r.end[i] - r.start[i] < r.end[best] - r.start[best]) best = i;
      }
    }
    if (best >= 0) return { kind: "range", i: best };
    const d = view.density;
    const bucketNs = ((view.t1 - view.t0) / view.width_px) * d.bucket_px;
    for (let i = 0; i < d.lane.length; i++) {
      if (d.lane[i] !== lane || d.depth[i] !== depth) continue;
      const j = d.px[i].indexOf(Math.floor((t - view.t0) / bucketNs) * d.bucket_px);
      if (j >= 0) {
        return { kind: "density", count: d.count[i][j], busy: d.busy[i][j], match: d.match ? d.match[i][j] : 0 };
      }
    }
    return null;
  }

  // The tooltip beside the mouse, flipped left or above where it would leave the widget.
  function showTip(lines, x, yPos) {
    tip.replaceChildren(...lines.map(([label, value]) => {
      const line = el("div");
      if (label) line.append(el("b", null, `${label} `));
      line.append(document.createTextNode(value));
      return line;
    }));
    tip.style.display = "block";
    const width = root.clientWidth;
    const height = root.clientHeight;
    const atY = yPos + bar.offsetHeight - scroller.scrollTop;
    let left = x + 14;
    if (left + tip.offsetWidth > width - 4) left = x - 14 - tip.offsetWidth;
    let top = atY + 14;
    if (top + tip.offsetHeight > height - 4) top = atY - 14 - tip.offsetHeight;
    tip.style.left = `${Math.max(left, 0)}px`;
    tip.style.top = `${Math.max(top, 0)}px`;
  }

  function rangeLines(i) {
    const r = view.ranges;
    const id = r.name[i];
    const lines = [["", fullName(id)]];
    const more = details.get(r.row[i]);
    if (more && more.location) lines.push(["at", more.location]);
    lines.push(
      ["duration", formatNs(r.end[i] - r.start[i])],
      ["self", formatNs(r.self[i])],
      ["depth", String(r.depth[i])],
      ["start", formatNs(r.start[i])],
    );
    if (more) {
      if (more.args) lines.push(["args", String(more.args)]);
      if (more.input_shapes) lines.push(["shapes", JSON.stringify(more.input_shapes)]);
      if (more.input_dtypes) lines.push(["dtypes", more.input_dtypes.join(", ")]);
    }
    return lines;
  }

  let lastMouse = null;
  function onHover(x, yPos) {
    lastMouse = [x, yPos];
    const spot = hit(x, yPos);
    const previous = hoverRow;
    hoverRow = -1;
    if (!spot) {
      tip.style.display = "none";
    } else if (spot.kind === "range") {
      const row = view.ranges.row[spot.i];
      hoverRow = row;
      showTip(rangeLines(spot.i), x, yPos);
      if (!details.has(row)) {
        details.set(row, null);
        send({ type: "detail", row }, (result) => {
          details.set(row, result);
          if (hoverRow === row && lastMouse) onHover(...lastMouse);
        });
      }
    } else if (spot.kind === "density") {
      const lines = [["", `${spot.count.toLocaleString()} short ranges merged`]];
      if (spot.match > 0) lines.push(["", `${spot.match.toLocaleString()} match${spot.match === 1 ? "" : "es"}`]);
      lines.push(["busy", `${Math.round((spot.busy / 255) * 100)}%`], ["", "zoom in to see them"]);
      showTip(lines, x, yPos);
    } else if (spot.kind === "memory") {
      showTip([["memory", `${formatBytes(spot.low)} – ${formatBytes(spot.high)}`]], x, yPos);
    } else {
      const n = spot.node;
      showTip([
        ["", fullName(tree.name[n])],
        ["total", formatNs(tree.total[n])],
        ["self", formatNs(tree.self[n])],
        ["calls", tree.count[n].toLocaleString()],
      ], x, yPos);
    }
    if (mode === "timeline" && previous !== hoverRow) drawTimeline();
  }

  // -- interaction ------------------------------------------------------------------------------
  // The window stays inside the trace: zoom-out stops at the whole trace.
  function setWindow(a, b) {
    const span = Math.min(Math.max(b - a, MIN_SPAN_NS), info.span_ns);
    a = Math.min(Math.max(a, 0), info.span_ns - span);
    t0 = a;
    t1 = a + span;
    draw();
    requestView();
  }

  function local(event) {
    const box = canvas.getBoundingClientRect();
    return [event.clientX - box.left, event.clientY - box.top];
  }

  let hintTimer = null;
  function showHint() {
    hint.style.display = "block";
    clearTimeout(hintTimer);
    hintTimer = setTimeout(() => (hint.style.display = "none"), HINT_MS);
  }

  function setActive(on) {
    active = on;
    root.dataset.wheel = on ? "zoom" : "page";
    root.classList.toggle("recfn-active", on);
    if (on) hint.style.display = "none";
  }

  // The wheel scrolls the page until the user clicks into the timeline (or holds Ctrl/⌘).
  canvas.addEventListener(
    "wheel",
    (event) => {
      if (mode !== "timeline") return;
      if (!(active || event.ctrlKey || event.metaKey)) {
        showHint();
        return; // not prevented: the page scrolls
      }
      event.preventDefault();
      const [x] = local(event);
      if (Math.abs(event.deltaX) > Math.abs(event.deltaY)) {
        const shift = (event.deltaX / plotWidth()) * (t1 - t0);
        setWindow(t0 + shift, t1 + shift);
        return;
      }
      const at = tOf(Math.max(x, GUTTER));
      const factor = Math.exp(event.deltaY * 0.0015);
      setWindow(at - (at - t0) * factor, at + (t1 - at) * factor);
    },
    { passive: false },
  );
  root.addEventListener("pointerdown", () => setActive(true));
  root.addEventListener("mouseleave", () => setActive(false));
  function outside(event) {
    if (!root.contains(event.target)) setActive(false);
  }
  document.addEventListener("pointerdown", outside, true);

  canvas.addEventListener("mousedown", (event) => {
    if (mode !== "timeline") return;
    const [x, yPos] = local(event);
    dragged = false;
    if ((event.shiftKey || yPos < AXIS_H) && x >= GUTTER) {
      // Not the notebook's: a Shift+drag there selects cells.
      event.stopPropagation();
      event.preventDefault();
      dragSelect = { a: tOf(x), b: tOf(x) };
      return;
    }
    drag = { x: event.clientX, t0, t1, moved: false };
  });
  function endDrag() {
    if (dragSelect) {
      const a = Math.max(Math.min(dragSelect.a, dragSelect.b), 0);
      const b = Math.min(Math.max(dragSelect.a, dragSelect.b), info.span_ns);
      dragSelect = null;
      dragged = true;
      if ((b - a) / (t1 - t0) * plotWidth() >= 3) {
        windowSel = [a, b];
        askSummary();
      }
      draw();
      return;
    }
    dragged = Boolean(drag && drag.moved);
    drag = null;
  }
  window.addEventListener("mouseup", endDrag);
  canvas.addEventListener("mousemove", (event) => {
    const [x, yPos] = local(event);
    if (dragSelect && (event.buttons & 1)) {
      dragSelect.b = tOf(Math.max(x, GUTTER));
      drawTimeline();
      return;
    }
    if (drag && (event.buttons & 1)) {
      const dx = event.clientX - drag.x;
      if (Math.abs(dx) > 2) drag.moved = true;
      if (drag.moved) {
        const shift = (dx / plotWidth()) * (drag.t1 - drag.t0);
        setWindow(drag.t0 - shift, drag.t1 - shift);
        return;
      }
    }
    onHover(x, yPos);
  });
  canvas.addEventListener("mouseleave", () => {
    tip.style.display = "none";
    hoverRow = -1;
  });
  canvas.addEventListener("click", (event) => {
    if (dragged) return;
    const spot = hit(...local(event));
    let id = null;
    if (spot && spot.kind === "range") id = view.ranges.name[spot.i];
    if (spot && spot.kind === "node") id = tree.name[spot.node];
    select(id === null || highlight.has(id) ? null : id, true);
  });
  canvas.addEventListener("dblclick", () => setWindow(0, info.span_ns));
  reset.addEventListener("click", () => setWindow(0, info.span_ns));

  search.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      searchTimer = null;
      const text = search.value.trim();
      selected = null;
      if (!text) {
        highlight = new Set();
        draw();
        requestView();
        return;
      }
      send({ type: "search", text }, (result) => {
        if (search.value.trim() !== text) return;
        highlight = new Set(result.ids);
        matches = result.matches;
        draw();
        requestView(); // the density buckets then say how many of theirs match
      });
    }, 120);
    markPending();
  });

  // The trace as .json.gz, from the kernel, as a download or handed to the Perfetto UI with its
  // postMessage protocol (PING until PONG, then the buffer).
  const PREPARING = "recfn: preparing the trace…";
  function exportTrace(then) {
    status.textContent = PREPARING;
    send({ type: "export" }, (result, _id, buffers) => {
      const buf = buffers[0];
      const bytes =
        buf instanceof DataView
          ? new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength)
          : new Uint8Array(buf);
      root.dataset.exportBytes = String(bytes.length);
      if (status.textContent === PREPARING) status.textContent = "";
      then(result.file, bytes.slice());
    });
  }
  download.addEventListener("click", () => {
    exportTrace((file, bytes) => {
      const url = URL.createObjectURL(new Blob([bytes], { type: "application/gzip" }));
      const link = document.createElement("a");
      link.href = url;
      link.download = file;
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
    });
  });
  let perfettoTimer = null;
  function perfettoState(state, text) {
    root.dataset.perfetto = state;
    status.textContent = text;
  }
  perfetto.addEventListener("click", () => {
    const ui = window.open("about:blank"); // now, while the click still allows a new tab
    if (!ui) {
      perfettoState("blocked", "recfn: the browser blocked the new tab; use Download trace");
      return;
    }
    clearInterval(perfettoTimer);
    perfettoState("opening", PREPARING);
    // Offline, the UI's address does not answer: say so instead of leaving an error tab open.
    const reachable = fetch(`${PERFETTO_ORIGIN}/`, { mode: "no-cors", cache: "no-store" }).then(
      () => true,
      () => false,
    );
    reachable.then((ok) => {
      if (ok) {
        ui.location.href = PERFETTO_ORIGIN;
        return;
      }
      ui.close();
      perfettoState(
        "offline",
        `recfn: the Perfetto UI (${PERFETTO_ORIGIN}) cannot be reached (offline?); use Download trace and open the file there later`,
      );
    });
    exportTrace((file, bytes) => {
      reachable.then((ok) => {
        if (!ok) return;
        let pings = 0;
        function answer(event) {
          if (event.source !== ui || event.data !== "PONG") return;
          clearInterval(perfettoTimer);
          window.removeEventListener("message", answer);
          const message = { perfetto: { buffer: bytes.buffer, title: file, fileName: file } };
          ui.postMessage(message, PERFETTO_ORIGIN);
          perfettoState("sent", "");
        }
        window.addEventListener("message", answer);
        perfettoTimer = setInterval(() => {
          pings += 1;
          if (pings > PERFETTO_MAX_PINGS || ui.closed) {
            clearInterval(perfettoTimer);
            window.removeEventListener("message", answer);
            perfettoState("silent", "recfn: the Perfetto UI did not answer; use Download trace and open the file there");
            return;
          }
          ui.postMessage("PING", PERFETTO_ORIGIN);
        }, 100);
      });
    });
  });

  toggle.addEventListener("click", () => {
    mode = mode === "timeline" ? "tree" : "timeline";
    toggle.textContent = mode === "timeline" ? "Call tree" : "Timeline";
    reset.disabled = mode !== "timeline";
    tip.style.display = "none";
    if (mode === "tree" && !tree) {
      send({ type: "tree" }, (result) => {
        tree = result;
        learn(tree);
        draw();
      });
    }
    draw();
  });

  // JupyterLab switches themes by changing its body's attributes, then its variables once the
  // theme's stylesheet has loaded: from the attributes' change on, the view checks the
  // variables each frame for a few seconds and draws again whenever they differ.
  let themeFrames = 0;
  function watchTheme() {
    const again = themeFrames === 0;
    themeFrames = 180;
    if (!again) return;
    const step = () => {
      readTheme();
      if (themeKey() !== drawnTheme) draw(); // draw() keeps the theme just read
      themeFrames -= 1;
      if (themeFrames > 0) requestAnimationFrame(step);
    };
    requestAnimationFrame(step);
  }
  const themeWatch = new MutationObserver(watchTheme);
  themeWatch.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light", "data-jp-theme-name"] });
  const resize = new ResizeObserver(() => draw());
  resize.observe(scroller);
  showSummary(summary);
  function onSummary() {
    if (!summary || !summary.rows) showSummary(state(model, "summary_json")); // the first, sent after
  }
  model.on("change:summary_json", onSummary);
  draw();
  return () => {
    resize.disconnect();
    themeWatch.disconnect();
    clearInterval(perfettoTimer);
    model.off("msg:custom", onMessage);
    model.off("change:summary_json", onSummary);
    window.removeEventListener("mouseup", endDrag);
    document.removeEventListener("pointerdown", outside, true);
  };
}

export default { render };
