// One job: what it runs, the timeline of its states, its GPUs and its GPU
// memory against its quota, and its output, live (server-sent events from
// GET /api/v1/jobs/{id}/logs?follow=true) until it ends.

import * as api from "../api.js";
import { h, mount, badge, kv } from "../dom.js";
import { duration, time, mib } from "../format.js";

const EVERY_MS = 2000;

function timeline(j) {
  const ts = j.transitions || [];
  return h("ol", { class: "timeline", id: "timeline" }, ts.map((t, i) => h("li", { "data-state": t.to },
    badge(t.to),
    h("span", { class: "when" }, time(t.at_ms)),
    i > 0 ? h("span", { class: "when" }, `+${duration(t.at_ms - ts[i - 1].at_ms)}`) : null,
    t.reason ? h("div", { class: "note" }, t.reason) : null)));
}

function gpuPanel(j) {
  const g = j.gpus;
  if (!g) {
    const asks = j.resources.gpu_milli ? `${j.resources.gpu_milli / 10}% of one GPU` : `${j.resources.gpu_count} GPU(s)`;
    return h("p", { class: "muted", id: "job-gpus" }, j.resources.gpu_count ? `Asks for ${asks}; none allocated yet.` : "A CPU job: no GPUs.");
  }
  const quota = g.memory_mb_per_gpu || j.resources.gpu_memory_mb;
  const quotaAll = quota ? quota * g.indices.length : null;
  return h("div", { id: "job-gpus" },
    kv([
      ["GPUs", g.indices.map((i, n) => [n ? ", " : "", h("a", { href: `#/gpus/${i}` }, `GPU ${i}`)])],
      ["UUIDs", h("span", { class: "mono" }, g.uuids.join(", "))],
      ["Sharing", g.sharing],
      ["Share", j.resources.gpu_milli ? `${j.resources.gpu_milli / 10}% of the GPU (--gpu=${j.resources.gpu_milli / 1000})` : null],
      ["Peak GPU memory", g.peak_memory_mb === null || g.peak_memory_mb === undefined ? "not seen yet" : mib(g.peak_memory_mb)],
      ["Quota", quotaAll ? `${mib(quota)} per GPU (${mib(quotaAll)} in all)` : "whole GPUs (no quota)"],
    ]),
    quotaAll ? h("progress", { id: "quota-meter", max: quotaAll, value: g.peak_memory_mb || 0, class: (g.peak_memory_mb || 0) > quotaAll ? "hot" : null, "aria-label": "peak GPU memory against the quota" }) : null);
}

export function render(ctx) {
  const id = ctx.param;
  const head = h("div");
  const facts = h("div", { class: "panel grow" });
  const tl = h("div", { class: "panel" });
  const gpus = h("div", { class: "panel grow" });
  const status = h("span", { class: "note", id: "log-status" });
  const log = h("pre", { class: "log", id: "log" });
  mount(ctx.main, head,
    h("div", { class: "row" }, facts, gpus),
    h("div", { class: "row" },
      h("div", { class: "grow" }, h("h2", {}, "Timeline"), tl),
      h("div", { class: "grow" }, h("h2", {}, "Output ", status), log)));

  let live = true;
  let timer = null;
  let stopLog = () => {};
  let following = false;

  function draw(j) {
    mount(head, h("h1", {}, "Job ", h("span", { class: "mono", id: "job-id" }, j.id), " ", badge(j.state)));
    mount(facts, kv([
      ["Command", h("code", {}, [j.command, ...j.args].join(" "))],
      ["Owner", j.owner],
      ["Reason", j.reason],
      ["Exit code", j.exit_code],
      ["Submitted", time(j.created_ms)],
      ["Started", j.started_ms ? time(j.started_ms) : null],
      ["Ended", j.ended_ms ? time(j.ended_ms) : null],
      ["Ran for", j.started_ms ? duration((j.ended_ms || Date.now()) - j.started_ms) : null],
      ["Runtime", j.runtime],
      ["Executor", j.executor],
      ["Devices", (j.devices || []).join(", ") || null],
      ["Workflow", j.workflow_id ? h("a", { href: `#/workflows/${j.workflow_id}` }, `${j.workflow_job} in ${j.workflow_id.slice(0, 8)}`) : null],
      ["Nodes", (j.nodes || []).join(", ")],
    ]));
    mount(gpus, h("h3", {}, "GPUs"), gpuPanel(j));
    mount(tl, timeline(j));
  }

  function followLog() {
    following = true;
    mount(status, h("span", { class: "live" }, "● live"));
    stopLog = api.follow(`/jobs/${encodeURIComponent(id)}/logs?follow=true`, ["chunk", "end", "error"], (type, data) => {
      if (type === "chunk") {
        log.append(h("span", { class: data.stream, "data-seq": data.seq }, data.data));
        log.scrollTop = log.scrollHeight;
      } else if (type === "end") {
        mount(status, `ended ${data.state}${data.exit_code !== null && data.exit_code !== undefined ? ` (exit code ${data.exit_code})` : ""}, ${data.total_bytes} bytes`);
        log.dataset.ended = data.state;
        stopLog();
      } else if (type === "error") {
        mount(status, h("span", { class: "error" }, data.error ? data.error.message : String(data)));
        stopLog();
      }
    }, (closed) => {
      if (closed) mount(status, h("span", { class: "error" }, "the log stream was closed"));
    });
  }

  const loop = async () => {
    try {
      const j = await api.get(`/jobs/${encodeURIComponent(id)}`);
      if (!live) return;
      draw(j);
      if (!following) followLog();
    } catch (e) {
      if (!live) return;
      ctx.failed(e);
    }
    if (live) timer = setTimeout(loop, EVERY_MS);
  };
  loop();
  return () => {
    live = false;
    clearTimeout(timer);
    stopLog();
  };
}
