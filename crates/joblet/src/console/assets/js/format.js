// How numbers, sizes, times and durations are written on every page.

export function mib(mb) {
  if (mb === null || mb === undefined) return "–";
  if (mb >= 1024) return `${(mb / 1024).toFixed(mb >= 10240 ? 0 : 1)} GiB`;
  return `${Math.round(mb)} MiB`;
}

export function pct(v) {
  return v === null || v === undefined ? "–" : `${Math.round(v)}%`;
}

export function celsius(v) {
  return v === null || v === undefined ? "–" : `${Math.round(v)} °C`;
}

export function watts(v) {
  return v === null || v === undefined ? "–" : `${Math.round(v)} W`;
}

/** A duration in ms as "1h 02m", "3m 05s", "4.2s", "350ms". */
export function duration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "–";
  ms = Math.max(0, ms);
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(Math.floor(s % 60)).padStart(2, "0")}s`;
  const hrs = Math.floor(m / 60);
  if (hrs < 48) return `${hrs}h ${String(m % 60).padStart(2, "0")}m`;
  return `${Math.floor(hrs / 24)}d ${hrs % 24}h`;
}

/** A Unix-ms time as local "YYYY-MM-DD HH:MM:SS". */
export function time(ms) {
  if (!ms) return "–";
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** "12s ago", "3m ago". */
export function ago(ms, now = Date.now()) {
  if (!ms) return "–";
  return `${duration(now - ms)} ago`;
}

export function shortId(id) {
  return id ? String(id).slice(0, 8) : "–";
}

export function num(v, digits = 1) {
  return v === null || v === undefined ? "–" : Number(v).toFixed(digits);
}
