// Overview: the node (or, in cluster mode, every node of `rnx node list`)
// and its GPUs at a glance: state, utilisation, memory, temperature and
// the jobs on each. Refreshed every 2 seconds.

import * as api from "../api.js";
import { h, mount, badge, kv } from "../dom.js";
import { mib, pct, celsius, shortId, ago } from "../format.js";

const EVERY_MS = 2000;

function card(label, value, id) {
  return h("div", { class: "card", id }, h("div", { class: "value" }, value), h("div", { class: "label" }, label));
}

function gpuTile(g) {
  const totalMb = g.memory_total_bytes ? g.memory_total_bytes / 1048576 : null;
  const usedMb = g.memory_used_bytes !== null && g.memory_used_bytes !== undefined ? g.memory_used_bytes / 1048576 : null;
  const state = g.lost ? "LOST" : (g.state || "UNKNOWN");
  return h("div", { class: "gpu", "data-gpu": g.index, "data-uuid": g.uuid },
    h("div", { class: "head" }, h("a", { href: `#/gpus/${g.index}` }, h("strong", {}, `GPU ${g.index}`)), badge(state)),
    h("div", { class: "name" }, g.name),
    h("div", { class: "note" }, `Utilisation ${pct(g.utilization_pct)}`),
    h("progress", { max: 100, value: g.utilization_pct || 0, "aria-label": `GPU ${g.index} utilisation` }),
    h("div", { class: "note" }, `Memory ${mib(usedMb)} of ${mib(totalMb)}`),
    h("progress", { max: totalMb || 1, value: usedMb || 0, "aria-label": `GPU ${g.index} memory` }),
    kv([
      ["Temperature", celsius(g.temperature_c)],
      ["Jobs", g.jobs.length ? g.jobs.map((j, i) => [i ? ", " : "", h("a", { href: `#/jobs/${j}`, class: "mono" }, shortId(j))]) : "none"],
      ["Paused", g.placement_paused],
      ["Cause", g.state_cause],
    ]));
}

function nodesTable(nodes) {
  return h("table", { id: "nodes" },
    h("thead", {}, h("tr", {}, ["Node", "State", "Address", "GPUs free", "Jobs", "Models", "Up since"].map((c) => h("th", {}, c)))),
    h("tbody", {}, nodes.nodes.map((n) => h("tr", { "data-node": n.name },
      h("td", {}, n.name, n.leader ? " (leader)" : ""),
      h("td", {}, badge(n.state)),
      h("td", { class: "mono" }, n.address),
      h("td", { class: "num" }, `${n.gpus_free} / ${n.gpus_total}`),
      h("td", { class: "num" }, n.jobs),
      h("td", {}, n.gpu_models.join(", ") || "–"),
      h("td", {}, ago(n.started_ms))))));
}

export function render(ctx) {
  const cards = h("div", { class: "cards" });
  const nodes = h("div");
  const gpus = h("div", { class: "gpus", id: "gpu-tiles" });
  const gpuNote = h("p", { class: "muted" });
  mount(ctx.main, h("h1", {}, "Overview"), cards, h("h2", {}, "Nodes"), nodes, h("h2", {}, "GPUs on this node"), gpuNote, gpus);
  let timer = null;
  let live = true;

  async function refresh() {
    const [st, nl, running, queued] = await Promise.all([
      api.get("/gpus").catch((e) => ({ error: e })),
      api.get("/nodes").catch((e) => ({ error: e })),
      api.get("/jobs?state=RUNNING&limit=1000").catch(() => ({ jobs: [] })),
      api.get("/jobs?state=QUEUED,PENDING&limit=1000").catch(() => ({ jobs: [] })),
    ]);
    if (!live) return;
    const list = st.error ? [] : st.gpus;
    const by = (s) => list.filter((g) => g.state === s).length;
    mount(cards,
      card("GPUs", list.length, "card-gpus"),
      card("Available", by("AVAILABLE"), "card-available"),
      card("In use", by("ALLOCATED") + by("IN_USE"), "card-busy"),
      card("Draining / offline", by("DRAINING") + by("OFFLINE"), "card-drained"),
      card("Degraded", by("DEGRADED") + list.filter((g) => g.lost).length, "card-degraded"),
      card("Jobs running", running.jobs.length, "card-running"),
      card("Jobs waiting", queued.jobs.length, "card-waiting"));
    if (nl.error) {
      mount(nodes, h("p", { class: "error" }, ctx.explain(nl.error)));
    } else {
      mount(nodes, nl.cluster ? null : h("p", { class: "muted" }, "A single node (no cluster configured)."), nodesTable(nl));
    }
    if (st.error) {
      mount(gpus);
      mount(gpuNote, ctx.explain(st.error));
    } else {
      mount(gpuNote, `${st.simulated ? "Simulated GPUs" : "GPUs"} through ${st.backend}; driver ${st.driver_version || "unknown"}; sampled ${ago(st.sampled_at_ms)}.`);
      mount(gpus, list.map(gpuTile));
    }
  }

  const loop = async () => {
    try {
      await refresh();
    } catch (e) {
      ctx.failed(e);
    }
    if (live) timer = setTimeout(loop, EVERY_MS);
  };
  loop();
  return () => {
    live = false;
    clearTimeout(timer);
  };
}
