// A workflow's jobs and their requirements as a layered diagram (a
// drawing, not a chart: plain SVG). Layers are the longest path from a
// job without requirements, left to right; within a layer jobs are
// ordered by the mean position of their neighbours (barycentre sweeps),
// which keeps edges from crossing in the usual pipelines and fans.

import { s } from "./dom.js";

const W = 180;
const H = 46;
const GAP_X = 70;
const GAP_Y = 22;
const PAD = 16;

/**
 * jobs: [{name, requires: [{job, state}]}] in file order.
 * Returns {nodes: Map name -> {x, y, layer, order}, edges: [{from, to, state}], width, height}.
 */
export function layout(jobs) {
  const byName = new Map(jobs.map((j, i) => [j.name, { job: j, index: i }]));
  const layer = new Map();
  const layerOf = (name, seen = new Set()) => {
    if (layer.has(name)) return layer.get(name);
    if (seen.has(name)) return 0; // a cycle is refused by the node; never loop here
    seen.add(name);
    const reqs = (byName.get(name)?.job.requires || []).filter((r) => byName.has(r.job));
    const l = reqs.length ? 1 + Math.max(...reqs.map((r) => layerOf(r.job, seen))) : 0;
    layer.set(name, l);
    return l;
  };
  jobs.forEach((j) => layerOf(j.name));
  const layers = [];
  for (const j of jobs) {
    const l = layer.get(j.name);
    (layers[l] ||= []).push(j.name);
  }
  const edges = [];
  const parents = new Map(jobs.map((j) => [j.name, []]));
  const children = new Map(jobs.map((j) => [j.name, []]));
  for (const j of jobs) {
    for (const r of j.requires || []) {
      if (!byName.has(r.job)) continue;
      edges.push({ from: r.job, to: j.name, state: r.state });
      parents.get(j.name).push(r.job);
      children.get(r.job).push(j.name);
    }
  }
  const pos = new Map();
  const place = () => layers.forEach((names) => names.forEach((n, i) => pos.set(n, i)));
  place();
  const bary = (n, nbrs) => {
    const ps = nbrs.get(n).map((p) => pos.get(p));
    return ps.length ? ps.reduce((a, b) => a + b, 0) / ps.length : pos.get(n);
  };
  const sweep = (order, nbrs) => {
    for (const l of order) {
      const names = layers[l];
      if (!names) continue;
      const keyed = names.map((n) => [bary(n, nbrs), byName.get(n).index, n]);
      keyed.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
      layers[l] = keyed.map((k) => k[2]);
      layers[l].forEach((n, i) => pos.set(n, i));
    }
  };
  const down = layers.map((_, i) => i).slice(1);
  const up = layers.map((_, i) => i).reverse().slice(1);
  for (let k = 0; k < 2; k++) {
    sweep(down, parents);
    sweep(up, children);
  }
  sweep(down, parents);
  const tallest = Math.max(1, ...layers.map((l) => (l ? l.length : 0)));
  const height = PAD * 2 + tallest * H + (tallest - 1) * GAP_Y;
  const nodes = new Map();
  layers.forEach((names, l) => {
    const colH = names.length * H + (names.length - 1) * GAP_Y;
    const top = PAD + (height - PAD * 2 - colH) / 2;
    names.forEach((n, i) => nodes.set(n, { x: PAD + l * (W + GAP_X), y: top + i * (H + GAP_Y), layer: l, order: i }));
  });
  const width = PAD * 2 + layers.length * W + Math.max(0, layers.length - 1) * GAP_X;
  return { nodes, edges, width, height };
}

/**
 * Draws the DAG of jobs ([{name, state, requires, detail}]) into el.
 * onClick(job) when a job is clicked. Returns the SVG.
 */
export function drawDag(el, jobs, onClick) {
  const { nodes, edges, width, height } = layout(jobs);
  const svg = s("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "workflow jobs and their requirements" });
  svg.append(s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
    s("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#8a93a3" }))));
  for (const e of edges) {
    const a = nodes.get(e.from);
    const b = nodes.get(e.to);
    const x1 = a.x + W;
    const y1 = a.y + H / 2;
    const x2 = b.x;
    const y2 = b.y + H / 2;
    const mx = (x1 + x2) / 2;
    svg.append(s("path", { class: "edge", d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`, "marker-end": "url(#arrow)", "data-from": e.from, "data-to": e.to }));
    if (e.state && e.state !== "COMPLETED") {
      svg.append(s("text", { class: "edge-label", x: mx, y: (y1 + y2) / 2 - 4, "text-anchor": "middle" }, e.state));
    }
  }
  const byName = new Map(jobs.map((j) => [j.name, j]));
  for (const [name, p] of nodes) {
    const job = byName.get(name);
    const state = String(job.state || "UNKNOWN").toUpperCase();
    const g = s("g", { class: "node", transform: `translate(${p.x},${p.y})`, "data-job": name, "data-state": state, tabindex: 0 },
      s("rect", { width: W, height: H, rx: 7, class: `fill-${state}` }),
      s("text", { x: 10, y: 19 }, name.length > 24 ? name.slice(0, 23) + "…" : name),
      s("text", { x: 10, y: 36, class: "sub" }, job.detail ? `${state} · ${job.detail}` : state),
      s("title", {}, `${name}: ${state}${job.detail ? " (" + job.detail + ")" : ""}`));
    if (onClick) g.addEventListener("click", () => onClick(job));
    svg.append(g);
  }
  el.replaceChildren(svg);
  return svg;
}
