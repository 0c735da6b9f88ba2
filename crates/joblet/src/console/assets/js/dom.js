// Building the page without innerHTML: every text goes through
// textContent, so nothing the API returns is ever parsed as markup, and
// nothing needs an inline style or handler (the CSP allows neither).

const SVG_NS = "http://www.w3.org/2000/svg";

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2), v);
    } else if (k === "class") {
      el.setAttribute("class", Array.isArray(v) ? v.filter(Boolean).join(" ") : v);
    } else if (k === "value" && "value" in el) {
      el.value = v;
    } else {
      el.setAttribute(k, v === true ? "" : String(v));
    }
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** An HTML element: h("a", {href: "#/jobs"}, "Jobs"). */
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** An SVG element. */
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** Replaces el's children. */
export function mount(el, ...children) {
  el.replaceChildren();
  return build(el, {}, children);
}

/** A state badge: its colour comes from the class state-<STATE>. */
export function badge(state) {
  const name = String(state || "UNKNOWN").toUpperCase();
  return h("span", { class: `badge state-${name}`, "data-state": name }, name);
}

/** A <dl> of label/value pairs, leaving out null values. */
export function kv(pairs) {
  return h("dl", { class: "kv" },
    pairs.filter(([, v]) => v !== null && v !== undefined && v !== "")
      .map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

/** A meter: value out of max (a <progress>), with a label below. */
export function meter(value, max, { hot = false, title } = {}) {
  const p = h("progress", { max: max > 0 ? max : 1, value: Math.max(0, value || 0), class: hot ? "hot" : null, title });
  return p;
}
