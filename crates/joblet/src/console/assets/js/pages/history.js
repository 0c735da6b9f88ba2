// History: GPU-hours by day and by owner (the GPU audit log), queue
// waits by day and failures by kind of reason (the job records), over the
// last 7, 30 or 90 days.

import * as api from "../api.js";
import { h, mount } from "../dom.js";
import { duration, time, num } from "../format.js";
import { barChart, timeChart } from "../charts.js";

const SPANS = [7, 30, 90];
const DAY_MS = 86400000;

export function render(ctx) {
  let days = 7;
  let live = true;
  const spanButtons = SPANS.map((d) => h("button", { class: d === days ? "on" : null, "data-days": d, onclick: () => {
    days = d;
    spanButtons.forEach((b) => b.classList.toggle("on", Number(b.dataset.days) === d));
    load();
  } }, `${d} days`));
  const grid = h("div", { class: "charts", id: "history-charts" });
  const owners = h("tbody");
  const waits = h("tbody");
  const fails = h("tbody");
  mount(ctx.main, h("h1", {}, "History"),
    h("div", { class: "filters" }, h("span", { class: "seg", id: "span" }, spanButtons), h("span", { class: "note" }, "Days are UTC calendar days.")),
    grid,
    h("div", { class: "row" },
      h("div", { class: "grow" }, h("h2", {}, "GPU-hours by owner"),
        h("table", { id: "gpu-hours-owner" }, h("thead", {}, h("tr", {}, ["Owner", "GPU-hours", "Allocations"].map((c) => h("th", {}, c)))), owners)),
      h("div", { class: "grow" }, h("h2", {}, "Failures by reason"),
        h("table", { id: "failures" }, h("thead", {}, h("tr", {}, ["Reason", "Jobs", "Latest", "Example"].map((c) => h("th", {}, c)))), fails))),
    h("h2", {}, "Queue wait by day"),
    h("table", { id: "queue-wait" }, h("thead", {}, h("tr", {}, ["Day", "Jobs", "GPU jobs", "Mean", "Median", "95th percentile", "Longest"].map((c) => h("th", {}, c)))), waits));

  const byDay = barChart(grid, { title: "GPU-hours by day", unit: "h", label: "GPU-hours", empty: "No GPU allocations in this window" });
  const byOwner = barChart(grid, { title: "GPU-hours by owner", unit: "h", label: "GPU-hours", empty: "No GPU allocations in this window" });
  const wait = timeChart(grid, {
    title: "Queue wait by day (submission to start)",
    series: ["median", "95th percentile", "longest"],
    format: (v) => duration(v),
    xRange: () => [Date.now() - days * DAY_MS, Date.now()],
    points: true,
    empty: "No job started in this window",
  });
  const failChart = barChart(grid, { title: "Failures by reason", unit: "", label: "jobs", empty: "No failed jobs in this window" });

  async function load() {
    try {
      const q = api.query({ days });
      const [hoursDay, hoursOwner, qw, fl] = await Promise.all([
        api.get(`/history/gpu-hours${api.query({ by: "day", days })}`),
        api.get(`/history/gpu-hours${api.query({ by: "owner", days })}`),
        api.get(`/history/queue-wait${q}`),
        api.get(`/history/failures${q}`),
      ]);
      if (!live) return;
      byDay.set(hoursDay.map((r) => r.key.slice(5)), hoursDay.map((r) => r.gpu_hours));
      byOwner.set(hoursOwner.map((r) => r.key), hoursOwner.map((r) => r.gpu_hours));
      const dayMs = (d) => Date.parse(`${d}T00:00:00Z`) + DAY_MS / 2;
      wait.set(qw.map((d) => dayMs(d.day)), [qw.map((d) => d.p50_ms), qw.map((d) => d.p95_ms), qw.map((d) => d.max_ms)]);
      failChart.set(fl.map((f) => f.reason), fl.map((f) => f.jobs));
      mount(owners, hoursOwner.length ? hoursOwner.map((r) => h("tr", { "data-owner": r.key },
        h("td", {}, r.key), h("td", { class: "num" }, num(r.gpu_hours, 3)), h("td", { class: "num" }, r.allocations)))
        : h("tr", {}, h("td", { colspan: 3, class: "muted" }, "No GPU allocations in this window")));
      mount(fails, fl.length ? fl.map((f) => h("tr", { "data-reason": f.reason },
        h("td", {}, f.reason), h("td", { class: "num" }, f.jobs), h("td", {}, time(f.last_ms)), h("td", { class: "note" }, f.example)))
        : h("tr", {}, h("td", { colspan: 4, class: "muted" }, "No failed jobs in this window")));
      mount(waits, qw.length ? qw.map((d) => h("tr", { "data-day": d.day },
        h("td", {}, d.day), h("td", { class: "num" }, d.jobs), h("td", { class: "num" }, d.gpu_jobs),
        h("td", { class: "num" }, duration(d.mean_ms)), h("td", { class: "num" }, duration(d.p50_ms)),
        h("td", { class: "num" }, duration(d.p95_ms)), h("td", { class: "num" }, duration(d.max_ms))))
        : h("tr", {}, h("td", { colspan: 7, class: "muted" }, "No job started in this window")));
    } catch (e) {
      if (live) ctx.failed(e);
    }
  }
  load();
  const timer = setInterval(load, 10000);
  return () => {
    live = false;
    clearInterval(timer);
    [byDay, byOwner, wait, failChart].forEach((c) => c.destroy());
  };
}
