// GPUs: every GPU with its state and readings, and one GPU in detail:
// charts of its utilisation, memory, temperature and power over the last
// hour, day or week (the node's own history, GET /gpus/{i}/history), its
// health and state history with its XIDs, and, for admins, drain and
// online. A viewer sees the buttons disabled; the node refuses them the
// change anyway, and the page shows why.

import * as api from "../api.js";
import { h, mount, badge, kv } from "../dom.js";
import { mib, pct, celsius, time, ago, shortId } from "../format.js";
import { timeChart } from "../charts.js";

const EVERY_MS = 2000;
const WINDOWS = [["1h", "Last hour"], ["1d", "Last day"], ["7d", "Last 7 days"]];

function xids(history) {
  return history.filter((e) => /\bXID\s*\d+/i.test(e.message));
}

export function render(ctx) {
  let selected = ctx.param;
  let windowKey = "1h";
  let live = true;
  let timer = null;
  let chartTimer = null;

  const table = h("tbody");
  const detail = h("div", { class: "gpu-detail", id: "gpu-detail" });
  const note = ctx.admin ? null : h("p", { class: "note", id: "viewer-note" },
    `You are signed in as ${ctx.session.name} with role ${ctx.session.role}: you may look, but draining or bringing GPUs online needs role admin.`);
  mount(ctx.main, h("h1", {}, "GPUs"), note,
    h("table", { id: "gpus" }, h("thead", {}, h("tr", {},
      ["GPU", "State", "Utilisation", "Memory", "Temperature", "Jobs", "Actions"].map((c) => h("th", {}, c)))), table),
    detail);

  async function act(index, action) {
    try {
      const g = await api.post(`/gpus/${index}/state`, { action });
      ctx.say(`GPU ${g.index} is now ${g.state}${g.state_cause ? ` (${g.state_cause})` : ""}.`, "info");
    } catch (e) {
      ctx.failed(e);
    }
    refresh();
  }

  function buttons(g) {
    const draining = g.state === "DRAINING" || g.state === "OFFLINE";
    const title = ctx.admin ? null : "needs role admin";
    return h("span", { class: "actions" },
      h("button", { class: "secondary", "data-action": "drain", "data-gpu": g.index, disabled: !ctx.admin || draining, title,
        onclick: (ev) => { ev.stopPropagation(); act(g.index, "drain"); } }, "Drain"),
      h("button", { class: "secondary", "data-action": "online", "data-gpu": g.index, disabled: !ctx.admin || !draining, title,
        onclick: (ev) => { ev.stopPropagation(); act(g.index, "online"); } }, "Online"));
  }

  function row(g) {
    const total = g.memory_total_bytes ? g.memory_total_bytes / 1048576 : null;
    const used = g.memory_used_bytes !== null && g.memory_used_bytes !== undefined ? g.memory_used_bytes / 1048576 : null;
    return h("tr", { class: "clickable", "data-gpu": g.index, "data-state": g.state, onclick: () => { location.hash = `#/gpus/${g.index}`; } },
      h("td", {}, h("a", { href: `#/gpus/${g.index}` }, `GPU ${g.index}`), h("div", { class: "note" }, g.name)),
      h("td", {}, badge(g.lost ? "LOST" : g.state), g.state_cause ? h("div", { class: "note" }, g.state_cause) : null),
      h("td", { class: "num" }, pct(g.utilization_pct)),
      h("td", { class: "num" }, `${mib(used)} / ${mib(total)}`),
      h("td", { class: "num" }, celsius(g.temperature_c)),
      h("td", {}, g.jobs.length ? g.jobs.map((j, i) => [i ? ", " : "", h("a", { href: `#/jobs/${j}`, class: "mono" }, shortId(j))]) : "–"),
      h("td", {}, buttons(g)));
  }

  // The selected GPU's charts, kept across refreshes.
  let charts = null;
  let chartsFor = null;

  function makeCharts(box) {
    const grid = h("div", { class: "charts", id: "gpu-charts" });
    box.append(grid);
    return {
      util: timeChart(grid, { title: "Utilisation", unit: "%", series: ["utilisation"], max: 100 }),
      mem: timeChart(grid, { title: "Memory used", unit: "MiB", series: ["memory used"] }),
      temp: timeChart(grid, { title: "Temperature", unit: "°C", series: ["temperature"] }),
      power: timeChart(grid, { title: "Power", unit: "W", series: ["power"], empty: "No power readings (this GPU or driver does not report power)" }),
    };
  }

  async function loadCharts() {
    if (!charts || selected === null) return;
    try {
      const hist = await api.get(`/gpus/${encodeURIComponent(selected)}/history${api.query({ window: windowKey })}`);
      if (!live || !charts) return;
      const xs = hist.points.map((p) => p.at_ms);
      charts.util.set(xs, [hist.points.map((p) => p.utilization_pct)]);
      charts.mem.set(xs, [hist.points.map((p) => p.memory_used_mb)]);
      charts.temp.set(xs, [hist.points.map((p) => p.temperature_c)]);
      const power = hist.points.map((p) => p.power_w);
      charts.power.set(power.some((v) => v !== null && v !== undefined) ? xs : [], [power]);
    } catch (e) {
      ctx.failed(e);
    }
  }

  function drawDetail(health) {
    const g = health.gpu;
    if (chartsFor !== `${g.index}`) {
      Object.values(charts || {}).forEach((c) => c.destroy());
      const winButtons = WINDOWS.map(([k, label]) => h("button", { class: k === windowKey ? "on" : null, "data-window": k, onclick: () => {
        windowKey = k;
        winButtons.forEach((b) => b.classList.toggle("on", b.dataset.window === k));
        loadCharts();
      } }, label));
      const facts = h("div", { class: "panel", id: "gpu-facts" });
      const events = h("div", { class: "panel", id: "gpu-events" });
      const chartBox = h("div");
      mount(detail, h("h2", {}, `GPU ${g.index} `, h("span", { class: "muted mono" }, g.uuid)),
        h("div", { class: "seg", id: "window" }, winButtons), chartBox,
        h("div", { class: "row" }, h("div", { class: "grow" }, h("h3", {}, "Health"), facts), h("div", { class: "grow" }, h("h3", {}, "State history and XIDs"), events)));
      charts = makeCharts(chartBox);
      chartsFor = `${g.index}`;
      loadCharts();
    }
    const facts = document.getElementById("gpu-facts");
    const events = document.getElementById("gpu-events");
    const x = xids(health.history);
    mount(facts, kv([
      ["State", badge(g.lost ? "LOST" : g.state)],
      ["Cause", g.state_cause],
      ["Since", g.state_since_ms ? `${time(g.state_since_ms)} (${ago(g.state_since_ms)})` : null],
      ["Placements", g.placement_paused ? `paused: ${g.placement_paused}` : "allowed"],
      ["PCI bus", h("span", { class: "mono" }, g.pci_bus_id)],
      ["MIG", g.mig_enabled ? "enabled" : "off"],
      ["XIDs seen", x.length ? x.length : "none"],
    ]), buttons(g));
    mount(events, health.history.length ? h("table", { id: "gpu-history" },
      h("thead", {}, h("tr", {}, ["When", "What", "Message"].map((c) => h("th", {}, c)))),
      h("tbody", {}, health.history.map((e) => h("tr", { class: xids([e]).length ? "xid" : null },
        h("td", {}, time(e.at_ms)),
        h("td", {}, e.kind === "transition" ? [badge(e.from), " → ", badge(e.to)] : e.kind),
        h("td", {}, e.message))))) : h("p", { class: "muted" }, "Nothing has happened to this GPU."));
  }

  async function refresh() {
    try {
      const st = await api.get("/gpus");
      if (!live) return;
      mount(table, st.gpus.map(row));
      if (selected === null && st.gpus.length) selected = `${st.gpus[0].index}`;
      if (selected !== null) {
        const health = await api.get(`/gpus/${encodeURIComponent(selected)}`);
        if (live) drawDetail(health);
      }
    } catch (e) {
      if (live) ctx.failed(e);
    }
  }

  const loop = async () => {
    await refresh();
    if (live) timer = setTimeout(loop, EVERY_MS);
  };
  loop();
  chartTimer = setInterval(() => loadCharts(), 5000);
  return () => {
    live = false;
    clearTimeout(timer);
    clearInterval(chartTimer);
    Object.values(charts || {}).forEach((c) => c.destroy());
  };
}
