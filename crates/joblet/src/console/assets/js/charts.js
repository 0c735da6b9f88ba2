// Charts, drawn by the vendored uPlot (assets/vendor/uplot): time series
// for the GPUs' readings and the queue waits, bars for the GPU-hours and
// failures. Each chart fits its container's width and follows its resizes.

import uPlot from "../vendor/uplot/uPlot.esm.js";
import { h, mount } from "./dom.js";

const COLORS = ["#2f6fde", "#d48a00", "#1f9d55", "#d0353f", "#8a4fd8", "#0f8b8d"];
const HEIGHT = 180;

/** A reading as an axis or legend shows it: two significant digits for
 * small values, whole numbers from 10 up. */
export function short(v, unit) {
  if (v === null || v === undefined) return "–";
  const a = Math.abs(v);
  const text = a === 0 ? "0" : a >= 10 ? Math.round(v).toString() : String(Number(v.toPrecision(2)));
  return unit ? `${text} ${unit}` : text;
}

function width(el) {
  return Math.max(280, (el.clientWidth || 420) - 16);
}

/** Follows the container's width; returns the observer's disconnect. */
function fit(el, plot) {
  const ro = new ResizeObserver(() => plot.setSize({ width: width(el), height: HEIGHT }));
  ro.observe(el);
  return () => ro.disconnect();
}

/**
 * A time-series chart in a new panel appended to parent.
 * opts: {title, unit, series: [label...], max (fixed y max, optional),
 *        empty (text when there are no points), format (value -> text),
 *        xRange (() -> [fromMs, toMs]), points (show point markers)}.
 * Returns {set(xsMs, ys[][]), destroy()}: xs in Unix ms, one ys array per
 * series, null for a gap.
 */
export function timeChart(parent, opts) {
  const box = h("div", { class: "chart", "data-chart": opts.title });
  const body = h("div");
  box.append(h("div", { class: "title" }, opts.title), body);
  parent.append(box);
  let plot = null;
  let unfit = () => {};
  const fmt = opts.format || ((v) => short(v, opts.unit));
  function make(data) {
    plot = new uPlot({
      width: width(box),
      height: HEIGHT,
      scales: { x: opts.xRange ? { time: true, range: () => opts.xRange().map((ms) => ms / 1000) } : { time: true }, y: opts.max ? { range: [0, opts.max] } : { range: (u, lo, hi) => [0, Math.max(hi * 1.1, 1)] } },
      axes: [{}, { values: (u, splits) => splits.map(fmt), size: 60 }],
      series: [{}, ...opts.series.map((label, i) => ({
        label,
        stroke: COLORS[i % COLORS.length],
        width: 1.5,
        fill: opts.series.length === 1 ? COLORS[i % COLORS.length] + "22" : undefined,
        value: (u, v) => fmt(v),
        spanGaps: false,
        ...(opts.points ? { points: { show: true, size: 6 } } : {}),
      }))],
      legend: { show: true },
    }, data, body);
    unfit = fit(box, plot);
  }
  return {
    set(xsMs, ys) {
      if (!xsMs.length) {
        if (plot) { plot.destroy(); plot = null; unfit(); }
        mount(body, h("div", { class: "empty" }, opts.empty || "No samples in this window yet"));
        box.dataset.points = "0";
        return;
      }
      const data = [xsMs.map((t) => t / 1000), ...ys];
      box.dataset.points = String(xsMs.length);
      if (plot) {
        plot.setData(data);
      } else {
        mount(body);
        make(data);
      }
    },
    destroy() {
      unfit();
      if (plot) plot.destroy();
    },
  };
}

/**
 * A bar chart of labelled categories in a new panel appended to parent.
 * opts: {title, unit, label (the series), empty}. set(labels, values).
 */
export function barChart(parent, opts) {
  const box = h("div", { class: "chart", "data-chart": opts.title });
  const body = h("div");
  box.append(h("div", { class: "title" }, opts.title), body);
  parent.append(box);
  let plot = null;
  let unfit = () => {};
  const fmt = (v) => short(v, opts.unit);
  return {
    set(labels, values) {
      if (plot) { plot.destroy(); plot = null; unfit(); }
      box.dataset.points = String(labels.length);
      if (!labels.length) {
        mount(body, h("div", { class: "empty" }, opts.empty || "Nothing in this window"));
        return;
      }
      mount(body);
      plot = new uPlot({
        width: width(box),
        height: HEIGHT,
        scales: { x: { time: false, range: [-0.5, labels.length - 0.5] }, y: { range: (u, lo, hi) => [0, Math.max(hi * 1.15, 0.01)] } },
        axes: [
          { values: (u, splits) => splits.map((v) => (Number.isInteger(v) ? labels[v] ?? "" : "")), incrs: [1], space: 10 },
          { values: (u, splits) => splits.map(fmt), size: 60 },
        ],
        series: [
          { value: (u, v) => (v === null || v === undefined ? "" : labels[v] ?? "") },
          {
            label: opts.label,
            fill: COLORS[0] + "cc",
            stroke: COLORS[0],
            paths: uPlot.paths.bars({ size: [0.6, 80] }),
            points: { show: false },
            value: (u, v) => fmt(v),
          },
        ],
      }, [labels.map((_, i) => i), values], body);
      unfit = fit(box, plot);
    },
    destroy() {
      unfit();
      if (plot) plot.destroy();
    },
  };
}
