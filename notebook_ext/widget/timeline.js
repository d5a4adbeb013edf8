// recfn's interactive timeline (anywidget ESM). The kernel keeps the trace; this view draws the
// level-of-detail response it is given (`view`: ranges >= 1 px, density buckets, memory levels)
// and asks for a new one after each zoom or pan with `model.send({type: "query", ...})`.
// Without a kernel (the HTML fallback) the same code rescales the embedded response.

const GUTTER = 150; // px of lane labels on the left
const AXIS_H = 22;
const ROW_H = 16;
const LANE_GAP = 18; // lane title band
const MEMORY_H = 44;
const PERFETTO_ORIGIN = "https://ui.perfetto.dev";
const TREE_ROW_H = 18;
const MIN_SPAN_NS = 50;

function hashName(name) {
  // FNV-1a: the same name gets the same colour in every cell and every view.
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) {
    h ^= name.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

function colour(name, alpha = 1) {
  const h = hashName(name);
  return `hsla(${h % 360}, ${55 + ((h >> 9) % 20)}%, ${58 + ((h >> 17) % 12)}%, ${alpha})`;
}

export function formatNs(ns) {
  const a = Math.abs(ns);
  if (a >= 1e9) return `${(ns / 1e9).toPrecision(4)} s`;
  if (a >= 1e6) return `${(ns / 1e6).toPrecision(4)} ms`;
  if (a >= 1e3) return `${(ns / 1e3).toPrecision(4)} µs`;
  return `${Math.round(ns)} ns`;
}

function formatBytes(b) {
  const a = Math.abs(b);
  if (a >= 2 ** 30) return `${(b / 2 ** 30).toFixed(2)} GiB`;
  if (a >= 2 ** 20) return `${(b / 2 ** 20).toFixed(2)} MiB`;
  if (a >= 2 ** 10) return `${(b / 2 ** 10).toFixed(1)} KiB`;
  return `${b} B`;
}

function niceStep(span, ticks) {
  const raw = span / ticks;
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function render({ model, el: host }) {
  const info = model.get("info");
  const names = new Map(); // name id -> name, filled from every response
  let view = model.get("view");
  let t0 = view.t0;
  let t1 = view.t1;
  let mode = "timeline";
  let tree = null;
  let highlight = new Set();
  let seq = 0;
  let applied = 0;
  const pending = new Map(); // request id -> callback
  const details = new Map(); // row -> detail
  let hoverRow = -1;

  const root = el("div", "recfn-tl");
  const bar = el("div", "recfn-tl-bar");
  const search = el("input", "recfn-tl-search");
  search.type = "search";
  search.placeholder = "highlight names…";
  const toggle = el("button", "recfn-tl-toggle", "Call tree");
  const reset = el("button", "recfn-tl-reset", "Reset zoom");
  const where = el("span", "recfn-tl-where");
  const download = el("button", "recfn-tl-download", "Download trace");
  const perfetto = el("button", "recfn-tl-perfetto", "Open in Perfetto");
  download.title = "the trace as Chrome/Perfetto JSON (.json.gz)";
  perfetto.title = "open the trace in the Perfetto UI (a new tab)";
  bar.append(search, toggle, reset, download, perfetto, where);
  const scroller = el("div", "recfn-tl-scroll");
  const canvas = el("canvas", "recfn-tl-canvas");
  const tip = el("div", "recfn-tl-tip");
  tip.style.display = "none";
  scroller.append(canvas);
  root.append(bar, scroller, tip);
  host.append(root);

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
  }
  learn(view);

  function send(message, callback) {
    const id = ++seq;
    pending.set(id, callback);
    model.send({ ...message, id });
    return id;
  }

  model.on("msg:custom", (msg, buffers) => {
    const callback = pending.get(msg.id);
    pending.delete(msg.id);
    if (msg.error) {
      where.textContent = `recfn: ${msg.error}`;
      return;
    }
    if (callback) callback(msg.result, msg.id, buffers || []);
  });

  let queryTimer = null;
  function requestView() {
    clearTimeout(queryTimer);
    queryTimer = setTimeout(() => {
      const width = Math.max(1, Math.round(plotWidth()));
      const asked = performance.now();
      send({ type: "query", t0, t1, width }, (result, id) => {
        if (id < applied) return; // an older answer arriving late
        applied = id;
        learn(result);
        view = result;
        root.dataset.roundTripMs = String(Math.round(performance.now() - asked));
        root.dataset.queries = String(Number(root.dataset.queries || 0) + 1);
        draw();
      });
    }, 40);
  }

  function plotWidth() {
    return Math.max(100, scroller.clientWidth - GUTTER - 2);
  }

  function xOf(t) {
    return GUTTER + ((t - t0) / (t1 - t0)) * plotWidth();
  }

  function tOf(x) {
    return t0 + ((x - GUTTER) / plotWidth()) * (t1 - t0);
  }

  function sizeCanvas(height) {
    const ratio = window.devicePixelRatio || 1;
    const width = scroller.clientWidth || 800;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    return ctx;
  }

  function drawAxis(ctx, width) {
    ctx.fillStyle = "#fafafa";
    ctx.fillRect(0, 0, width, AXIS_H);
    ctx.fillStyle = "#555";
    ctx.textAlign = "left";
    const step = niceStep(t1 - t0, Math.max(2, plotWidth() / 110));
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
      const x = xOf(t);
      ctx.fillRect(x, AXIS_H - 6, 1, 6);
      ctx.fillText(formatNs(t), x + 3, AXIS_H / 2);
    }
    ctx.fillStyle = "#333";
    ctx.fillText("from trace start", 6, AXIS_H / 2);
  }

  function drawTimeline() {
    const ctx = sizeCanvas(timelineHeight);
    const width = canvas.clientWidth;
    ctx.clearRect(0, 0, width, timelineHeight);
    drawAxis(ctx, width);
    for (const lane of lanes) {
      ctx.fillStyle = "#f3f3f3";
      ctx.fillRect(0, lane.title, width, LANE_GAP - 2);
      ctx.fillStyle = "#222";
      ctx.textAlign = "left";
      ctx.fillText(lane.label, 6, lane.title + LANE_GAP / 2 - 1);
    }
    ctx.save();
    ctx.beginPath();
    ctx.rect(GUTTER, AXIS_H, width - GUTTER, timelineHeight - AXIS_H);
    ctx.clip();
    // Density: ranges shorter than a pixel, merged per bucket (grey, darker = busier).
    const d = view.density;
    const bucketNs = ((view.t1 - view.t0) / view.width_px) * d.bucket_px;
    for (let i = 0; i < d.lane.length; i++) {
      const lane = lanes[d.lane[i]];
      const top = lane.top + d.depth[i] * ROW_H + 1;
      const pxs = d.px[i];
      const busy = d.busy[i];
      for (let j = 0; j < pxs.length; j++) {
        const start = view.t0 + (pxs[j] / d.bucket_px) * bucketNs;
        const x0 = xOf(start);
        const x1 = Math.max(xOf(start + bucketNs), x0 + 1);
        ctx.fillStyle = `rgba(90, 100, 120, ${0.15 + (0.75 * busy[j]) / 255})`;
        ctx.fillRect(x0, top, x1 - x0, ROW_H - 2);
      }
    }
    // Ranges of a pixel or more, coloured by name; names drawn where they fit.
    const r = view.ranges;
    let lit = 0;
    const dim = highlight.size > 0;
    for (let i = 0; i < r.row.length; i++) {
      const lane = lanes[r.lane[i]];
      const top = lane.top + r.depth[i] * ROW_H + 1;
      const x0 = Math.max(xOf(r.start[i]), GUTTER - 2);
      const x1 = Math.min(xOf(r.end[i]), width + 2);
      if (x1 < GUTTER || x0 > width) continue;
      const name = names.get(r.name[i]) || "?";
      const on = highlight.has(r.name[i]);
      if (on) lit++;
      ctx.fillStyle = colour(name, dim && !on ? 0.25 : 1);
      ctx.fillRect(x0, top, Math.max(x1 - x0, 1), ROW_H - 2);
      if (on) {
        ctx.strokeStyle = "#d00";
        ctx.lineWidth = 2;
        ctx.strokeRect(x0 + 1, top + 1, Math.max(x1 - x0 - 2, 1), ROW_H - 4);
      } else if (r.row[i] === hoverRow) {
        ctx.strokeStyle = "#000";
        ctx.lineWidth = 1;
        ctx.strokeRect(x0 + 0.5, top + 0.5, Math.max(x1 - x0 - 1, 1), ROW_H - 3);
      }
      if (x1 - x0 > 30) {
        ctx.fillStyle = dim && !on ? "rgba(0,0,0,0.35)" : "#111";
        ctx.textAlign = "left";
        const room = x1 - Math.max(x0, GUTTER) - 6;
        let label = name;
        if (ctx.measureText(label).width > room) {
          const fit = Math.max(0, Math.floor((room / ctx.measureText(label).width) * label.length) - 1);
          label = fit > 1 ? `${label.slice(0, fit)}…` : "";
        }
        if (label) ctx.fillText(label, Math.max(x0, GUTTER) + 3, top + (ROW_H - 2) / 2);
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
      ctx.fillStyle = "rgba(46, 125, 50, 0.35)";
      ctx.strokeStyle = "#2e7d32";
      ctx.lineWidth = 1;
      for (let j = 0; j < memory.high.length; j++) {
        const x0 = xOf(view.t0 + j * pxNs);
        const x1 = Math.max(xOf(view.t0 + (j + 1) * pxNs), x0 + 1);
        const hi = yOf(memory.high[j]);
        ctx.fillRect(x0, hi, x1 - x0, lane.top + lane.height - hi);
        ctx.fillStyle = "#2e7d32";
        ctx.fillRect(x0, hi, x1 - x0, Math.max(yOf(memory.low[j]) - hi, 1.5));
        ctx.fillStyle = "rgba(46, 125, 50, 0.35)";
      }
      ctx.fillStyle = "#2e7d32";
      ctx.textAlign = "right";
      ctx.fillText(`${formatBytes(floor)} – ${formatBytes(top)}`, width - 6, lane.top + 8);
    }
    ctx.restore();
    root.dataset.highlighted = String(lit);
    root.dataset.ranges = String(r.row.length);
    root.dataset.memoryLanes = String(view.memory.length);
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
    const width = canvas.clientWidth;
    ctx.clearRect(0, 0, width, height);
    ctx.fillStyle = "#333";
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
      const nameId = tree.name[box.node];
      const name = names.get(nameId) || "?";
      const on = highlight.has(nameId);
      if (on) lit++;
      ctx.fillStyle = colour(name, dim && !on ? 0.25 : 1);
      ctx.fillRect(x, top, Math.max(w - 1, 0.5), TREE_ROW_H - 1);
      if (on) {
        ctx.strokeStyle = "#d00";
        ctx.lineWidth = 2;
        ctx.strokeRect(x + 1, top + 1, Math.max(w - 3, 1), TREE_ROW_H - 3);
      }
      if (w > 40) {
        ctx.fillStyle = "#111";
        const text = `${name} ${formatNs(tree.total[box.node])}`;
        const fit = Math.floor(((w - 6) / ctx.measureText(text).width) * text.length);
        ctx.fillText(fit >= text.length ? text : `${text.slice(0, Math.max(fit - 1, 0))}…`, x + 3, top + TREE_ROW_H / 2);
      }
      treeBoxes.push({ ...box, x, w, top });
    }
    root.dataset.highlighted = String(lit);
    root.dataset.treeNodes = String(treeBoxes.length);
  }

  function draw() {
    root.dataset.view = mode;
    root.dataset.t0 = String(Math.round(t0));
    root.dataset.t1 = String(Math.round(t1));
    where.textContent =
      mode === "timeline"
        ? `${formatNs(t0)} – ${formatNs(t1)} of ${formatNs(info.span_ns)} · ${info.ranges.toLocaleString()} ranges`
        : "";
    if (mode === "timeline") drawTimeline();
    else drawTree();
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
      if (j >= 0) return { kind: "density", count: d.count[i][j], busy: d.busy[i][j] };
    }
    return null;
  }

  function showTip(lines, x, yPos) {
    tip.replaceChildren(...lines.map(([label, value]) => {
      const line = el("div");
      if (label) line.append(el("b", null, `${label} `));
      line.append(document.createTextNode(value));
      return line;
    }));
    tip.style.display = "block";
    const box = root.getBoundingClientRect();
    const left = Math.min(x + 14, box.width - tip.offsetWidth - 4);
    tip.style.left = `${Math.max(left, 0)}px`;
    tip.style.top = `${yPos + 14 + bar.offsetHeight - scroller.scrollTop}px`;
  }

  function rangeLines(i) {
    const r = view.ranges;
    const lines = [
      ["", names.get(r.name[i]) || "?"],
      ["duration", formatNs(r.end[i] - r.start[i])],
      ["self", formatNs(r.self[i])],
      ["depth", String(r.depth[i])],
      ["start", formatNs(r.start[i])],
    ];
    const more = details.get(r.row[i]);
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
    const found = hit(x, yPos);
    const previous = hoverRow;
    hoverRow = -1;
    if (!found) {
      tip.style.display = "none";
    } else if (found.kind === "range") {
      const row = view.ranges.row[found.i];
      hoverRow = row;
      showTip(rangeLines(found.i), x, yPos);
      if (!details.has(row) && info.kernel !== false) {
        details.set(row, null);
        send({ type: "detail", row }, (result) => {
          details.set(row, result);
          if (hoverRow === row && lastMouse) onHover(...lastMouse);
        });
      }
    } else if (found.kind === "density") {
      showTip([["", `${found.count.toLocaleString()} short ranges merged`], ["busy", `${Math.round((found.busy / 255) * 100)}%`], ["", "zoom in to see them"]], x, yPos);
    } else if (found.kind === "memory") {
      showTip([["memory", `${formatBytes(found.low)} – ${formatBytes(found.high)}`]], x, yPos);
    } else {
      const n = found.node;
      showTip([
        ["", names.get(tree.name[n]) || "?"],
        ["total", formatNs(tree.total[n])],
        ["self", formatNs(tree.self[n])],
        ["calls", tree.count[n].toLocaleString()],
      ], x, yPos);
    }
    if (mode === "timeline" && previous !== hoverRow) drawTimeline();
  }

  // -- interaction ------------------------------------------------------------------------------
  function setWindow(a, b) {
    const pad = info.span_ns * 0.05;
    let span = Math.max(b - a, MIN_SPAN_NS);
    span = Math.min(span, info.span_ns + 2 * pad);
    a = Math.min(Math.max(a, -pad), info.span_ns + pad - span);
    t0 = a;
    t1 = a + span;
    draw();
    requestView();
  }

  function local(event) {
    const box = canvas.getBoundingClientRect();
    return [event.clientX - box.left, event.clientY - box.top];
  }

  canvas.addEventListener(
    "wheel",
    (event) => {
      if (mode !== "timeline") return;
      event.preventDefault();
      const [x] = local(event);
      const at = tOf(Math.max(x, GUTTER));
      const factor = Math.exp(event.deltaY * 0.0015);
      setWindow(at - (at - t0) * factor, at + (t1 - at) * factor);
    },
    { passive: false },
  );

  let drag = null;
  let dragged = false; // the click that ends a drag does not highlight
  canvas.addEventListener("mousedown", (event) => {
    if (mode !== "timeline") return;
    drag = { x: event.clientX, t0, t1, moved: false };
    dragged = false;
  });
  const endDrag = () => {
    dragged = Boolean(drag && drag.moved);
    drag = null;
  };
  window.addEventListener("mouseup", endDrag);
  canvas.addEventListener("mousemove", (event) => {
    const [x, yPos] = local(event);
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
    const found = hit(...local(event));
    let nameId = null;
    if (found && found.kind === "range") nameId = view.ranges.name[found.i];
    if (found && found.kind === "node") nameId = tree.name[found.node];
    highlight = nameId === null || highlight.has(nameId) ? new Set() : new Set([nameId]);
    search.value = nameId === null ? "" : names.get(nameId) || "";
    draw();
  });
  canvas.addEventListener("dblclick", () => setWindow(0, info.span_ns));
  reset.addEventListener("click", () => setWindow(0, info.span_ns));

  let searchTimer = null;
  search.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      const text = search.value.trim();
      if (!text) {
        highlight = new Set();
        draw();
        return;
      }
      if (info.kernel === false) {
        const needle = text.toLowerCase();
        highlight = new Set([...names].filter(([, n]) => n.toLowerCase().includes(needle)).map(([id]) => id));
        draw();
        return;
      }
      send({ type: "search", text }, (result) => {
        if (search.value.trim() !== text) return;
        highlight = new Set(result);
        draw();
      });
    }, 120);
  });

  // The trace as .json.gz, from the kernel, as a download or handed to the Perfetto UI with its
  // postMessage protocol (PING until PONG, then the buffer).
  function exportTrace(then) {
    where.textContent = "recfn: preparing the trace…";
    send({ type: "export" }, (result, _id, buffers) => {
      const buf = buffers[0];
      const bytes =
        buf instanceof DataView
          ? new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength)
          : new Uint8Array(buf);
      root.dataset.exportBytes = String(bytes.length);
      where.textContent = "";
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
  perfetto.addEventListener("click", () => {
    const ui = window.open(PERFETTO_ORIGIN); // now, while the click still allows a new tab
    if (!ui) return;
    exportTrace((file, bytes) => {
      const timer = setInterval(() => ui.postMessage("PING", PERFETTO_ORIGIN), 100);
      window.addEventListener("message", function answer(event) {
        if (event.source !== ui || event.data !== "PONG") return;
        clearInterval(timer);
        window.removeEventListener("message", answer);
        const message = { perfetto: { buffer: bytes.buffer, title: file, fileName: file } };
        ui.postMessage(message, PERFETTO_ORIGIN);
      });
    });
  });

  toggle.addEventListener("click", () => {
    mode = mode === "timeline" ? "tree" : "timeline";
    toggle.textContent = mode === "timeline" ? "Call tree" : "Timeline";
    reset.disabled = mode !== "timeline";
    tip.style.display = "none";
    if (mode === "tree" && !tree) {
      const embedded = model.get("tree");
      if (embedded && embedded.name) {
        tree = embedded;
        learn(tree);
      } else {
        send({ type: "tree" }, (result) => {
          tree = result;
          learn(tree);
          draw();
        });
      }
    }
    draw();
  });

  const resize = new ResizeObserver(() => draw());
  resize.observe(scroller);
  draw();
  return () => {
    resize.disconnect();
    window.removeEventListener("mouseup", endDrag);
  };
}

export default { render };
