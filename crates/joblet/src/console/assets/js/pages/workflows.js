// Workflows: the node's runs, and one run's jobs drawn as their DAG
// (layered, left to right), each job coloured by its state and refreshed
// every 2 seconds while the run goes on. A job opens its job page.

import * as api from "../api.js";
import { h, mount, badge, kv } from "../dom.js";
import { duration, time, shortId } from "../format.js";
import { drawDag } from "../dag.js";

const EVERY_MS = 2000;
const LEGEND = ["WAITING", "QUEUED", "RUNNING", "COMPLETED", "FAILED", "STOPPED", "CANCELED"];

function progress(w) {
  const done = w.jobs.filter((j) => ["COMPLETED", "FAILED", "STOPPED", "CANCELED"].includes(j.state)).length;
  return `${done} / ${w.jobs.length}`;
}

export function render(ctx) {
  let selected = ctx.param;
  let live = true;
  let timer = null;
  const list = h("tbody");
  const detail = h("div", { id: "workflow-detail" });
  mount(ctx.main, h("h1", {}, "Workflows"),
    h("table", { id: "workflows" }, h("thead", {}, h("tr", {},
      ["Run", "Name", "State", "Jobs done", "Owner", "Started", "Took"].map((c) => h("th", {}, c)))), list),
    detail);

  function drawList(runs) {
    mount(list, runs.length ? runs.map((w) => h("tr", { class: "clickable", "data-workflow": w.id, "data-state": w.state, onclick: () => { location.hash = `#/workflows/${w.id}`; } },
      h("td", { class: "mono" }, h("a", { href: `#/workflows/${w.id}` }, shortId(w.id))),
      h("td", {}, w.name || w.file),
      h("td", {}, badge(w.state)),
      h("td", { class: "num" }, progress(w)),
      h("td", {}, w.owner),
      h("td", {}, time(w.created_ms)),
      h("td", {}, duration((w.ended_ms || Date.now()) - w.created_ms)))) : h("tr", {}, h("td", { colspan: 7, class: "muted" }, "No workflow runs yet: rnx workflow run FILE")));
  }

  function jobDetail(j) {
    if (j.state === "RUNNING" && j.started_ms) return duration(Date.now() - j.started_ms);
    if (j.ended_ms && j.started_ms) return duration(j.ended_ms - j.started_ms);
    if (j.gpu_count) return `${j.gpu_count} GPU${j.gpu_count > 1 ? "s" : ""}`;
    return "";
  }

  function drawRun(w) {
    const dag = h("div", { class: "dag", id: "dag", "data-workflow": w.id, "data-state": w.state });
    mount(detail,
      h("h2", {}, `${w.name || w.file} `, h("span", { class: "mono muted" }, w.id), " ", badge(w.state)),
      h("div", { class: "row" },
        h("div", { class: "grow" }, kv([
          ["File", w.file],
          ["Owner", w.owner],
          ["Outcome", w.outcome],
          ["Stopping", w.stopping ? "yes" : null],
          ["Started", time(w.created_ms)],
          ["Ended", w.ended_ms ? time(w.ended_ms) : null],
          ["Shared volume", w.shared_volume],
        ]))),
      h("div", { class: "legend" }, LEGEND.map((s) => badge(s))),
      dag,
      h("table", { id: "workflow-jobs" },
        h("thead", {}, h("tr", {}, ["Job", "State", "Requires", "Attempt", "Command", "Reason"].map((c) => h("th", {}, c)))),
        h("tbody", {}, w.jobs.map((j) => h("tr", { "data-job": j.name, "data-state": j.state },
          h("td", {}, j.job_id ? h("a", { href: `#/jobs/${j.job_id}` }, j.name) : j.name),
          h("td", {}, badge(j.state)),
          h("td", {}, j.requires.map((r) => `${r.job}: ${r.state}${r.holds ? " ✓" : ""}`).join(", ") || "–"),
          h("td", { class: "num" }, `${j.attempt} / ${j.max_attempts}`),
          h("td", { class: "mono" }, [j.command, ...j.args].join(" ")),
          h("td", {}, j.reason))))));
    drawDag(dag, w.jobs.map((j) => ({ ...j, detail: jobDetail(j) })), (j) => {
      if (j.job_id) location.hash = `#/jobs/${j.job_id}`;
    });
  }

  async function refresh() {
    const runs = await api.get("/workflows?limit=50");
    if (!live) return;
    drawList(runs);
    if (selected === null && runs.length) selected = runs[0].id;
    if (selected !== null) {
      const w = await api.get(`/workflows/${encodeURIComponent(selected)}`);
      if (live) drawRun(w);
    }
  }

  const loop = async () => {
    try {
      await refresh();
    } catch (e) {
      if (live) ctx.failed(e);
    }
    if (live) timer = setTimeout(loop, EVERY_MS);
  };
  loop();
  return () => {
    live = false;
    clearTimeout(timer);
  };
}
