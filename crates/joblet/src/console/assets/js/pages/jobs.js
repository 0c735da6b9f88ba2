// Jobs: every job of the node, newest first, filtered by state, owner and
// text, sorted by any column; a row opens the job. Refreshed every 2 s.

import * as api from "../api.js";
import { h, mount, badge } from "../dom.js";
import { duration, time, shortId } from "../format.js";

const EVERY_MS = 2000;
const STATES = ["", "PENDING", "QUEUED", "RUNNING", "COMPLETED", "FAILED", "STOPPED", "PREEMPTED"];

const COLUMNS = [
  { key: "id", label: "Job", value: (j) => j.id },
  { key: "state", label: "State", value: (j) => j.state },
  { key: "owner", label: "Owner", value: (j) => j.owner },
  { key: "command", label: "Command", value: (j) => [j.command, ...j.args].join(" ") },
  { key: "gpus", label: "GPUs", value: (j) => j.resources.gpu_count, num: true },
  { key: "created", label: "Submitted", value: (j) => j.created_ms, num: true },
  { key: "took", label: "Ran for", value: (j) => (j.started_ms ? (j.ended_ms || Date.now()) - j.started_ms : -1), num: true },
];

export function render(ctx) {
  const state = h("select", { id: "filter-state", "aria-label": "State" }, STATES.map((s) => h("option", { value: s }, s || "any state")));
  const owner = h("input", { type: "text", id: "filter-owner", placeholder: "owner", "aria-label": "Owner" });
  const text = h("input", { type: "search", id: "filter-text", placeholder: "id or command", "aria-label": "Id or command" });
  const count = h("span", { class: "muted", id: "job-count" });
  const body = h("tbody");
  let sort = { key: "created", dir: -1 };
  const heads = COLUMNS.map((c) => h("th", { class: ["sortable", c.num && "num"], "data-sort": c.key, onclick: () => {
    sort = sort.key === c.key ? { key: c.key, dir: -sort.dir } : { key: c.key, dir: c.num ? -1 : 1 };
    draw();
  } }, c.label));
  mount(ctx.main, h("h1", {}, "Jobs"),
    h("div", { class: "filters" }, state, owner, text, count),
    h("table", { id: "jobs" }, h("thead", {}, h("tr", {}, heads)), body));

  let jobs = [];
  let timer = null;
  let live = true;

  function draw() {
    const needle = text.value.trim().toLowerCase();
    const col = COLUMNS.find((c) => c.key === sort.key);
    const shown = jobs
      .filter((j) => !needle || j.id.startsWith(needle) || [j.command, ...j.args].join(" ").toLowerCase().includes(needle))
      .sort((a, b) => {
        const x = col.value(a);
        const y = col.value(b);
        return (x < y ? -1 : x > y ? 1 : 0) * sort.dir;
      });
    heads.forEach((th, i) => {
      th.classList.toggle("sorted-asc", COLUMNS[i].key === sort.key && sort.dir > 0);
      th.classList.toggle("sorted-desc", COLUMNS[i].key === sort.key && sort.dir < 0);
    });
    mount(count, `${shown.length} of ${jobs.length} jobs`);
    mount(body, shown.map((j) => h("tr", { class: "clickable", "data-job": j.id, "data-state": j.state, onclick: () => { location.hash = `#/jobs/${j.id}`; } },
      h("td", { class: "mono" }, h("a", { href: `#/jobs/${j.id}` }, shortId(j.id))),
      h("td", {}, badge(j.state)),
      h("td", {}, j.owner),
      h("td", { class: "mono" }, [j.command, ...j.args].join(" ")),
      h("td", { class: "num" }, j.gpus ? j.gpus.indices.join(",") || j.resources.gpu_count : j.resources.gpu_count || "–"),
      h("td", { class: "num" }, time(j.created_ms)),
      h("td", { class: "num" }, j.started_ms ? duration((j.ended_ms || Date.now()) - j.started_ms) : "–"))));
  }

  async function refresh() {
    const q = api.query({ state: state.value, owner: owner.value.trim(), limit: 1000 });
    const page = await api.get(`/jobs${q}`);
    if (!live) return;
    jobs = page.jobs;
    draw();
  }

  const loop = async () => {
    try {
      await refresh();
    } catch (e) {
      ctx.failed(e);
    }
    if (live) timer = setTimeout(loop, EVERY_MS);
  };
  const now = () => {
    clearTimeout(timer);
    loop();
  };
  state.addEventListener("change", now);
  owner.addEventListener("change", now);
  text.addEventListener("input", draw);
  loop();
  return () => {
    live = false;
    clearTimeout(timer);
  };
}
