// The console's shell: who is signed in (GET /api/v1/session), the page
// the URL's #fragment names, and the message banner. Each page module
// exports render(ctx) and returns a function that stops what it started
// (timers, log streams) when another page is shown.

import * as api from "./api.js";
import { h, mount } from "./dom.js";
import * as overview from "./pages/overview.js";
import * as jobs from "./pages/jobs.js";
import * as job from "./pages/job.js";
import * as gpus from "./pages/gpus.js";
import * as workflows from "./pages/workflows.js";
import * as history from "./pages/history.js";

const main = document.getElementById("main");
const banner = document.getElementById("banner");
let stop = () => {};
let session = null;

/** Shows a message above the page: kind "error" or "info". */
export function say(message, kind = "error") {
  mount(banner,
    h("button", { class: "close", title: "Dismiss", "aria-label": "Dismiss", onclick: () => { banner.hidden = true; } }, "×"),
    h("span", { class: "text" }, message));
  banner.className = `banner ${kind}`;
  banner.dataset.kind = kind;
  banner.hidden = false;
}

function clearBanner() {
  banner.hidden = true;
}

/** The message for a failed call, as the page shows it. */
export function explain(err) {
  if (err instanceof api.ApiError) {
    if (err.status === 401) {
      return `Your console session has ended (${err.message}). Get a new sign-in link on the node with: rnx console`;
    }
    if (err.status === 403) return `Not allowed: ${err.message}`;
    return err.message;
  }
  return String(err && err.message ? err.message : err);
}

const routes = [
  [/^#\/overview$/, overview.render],
  [/^#\/jobs$/, jobs.render],
  [/^#\/jobs\/([^/]+)$/, job.render],
  [/^#\/gpus$/, gpus.render],
  [/^#\/gpus\/([^/]+)$/, gpus.render],
  [/^#\/workflows$/, workflows.render],
  [/^#\/workflows\/([^/]+)$/, workflows.render],
  [/^#\/history$/, history.render],
];

function show() {
  stop();
  stop = () => {};
  clearBanner();
  const hash = location.hash || "#/overview";
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", hash.startsWith(`#/${a.dataset.page}`));
  }
  for (const [re, render] of routes) {
    const m = hash.match(re);
    if (m) {
      mount(main);
      const ctx = {
        main,
        session,
        admin: session.role === "admin",
        param: m[1] ? decodeURIComponent(m[1]) : null,
        say,
        explain,
        failed: (err) => say(explain(err)),
      };
      try {
        stop = render(ctx) || (() => {});
      } catch (e) {
        say(explain(e));
      }
      return;
    }
  }
  location.hash = "#/overview";
}

/** The page for a browser that is not signed in. */
function signedOut(err) {
  document.getElementById("nav").hidden = true;
  // A failed sign-in link lands here with the daemon's reason.
  const failed = new URLSearchParams(location.search).get("signin_error");
  const reason = failed || (err && err.status === 401 ? err.message : explain(err));
  mount(main,
    h("div", { class: "panel", id: "signed-out" },
      h("h1", {}, "Not signed in"),
      h("p", {}, "This browser has no console session, or its session has ended or was revoked:"),
      h("p", { class: "error", id: "signin-error" }, reason),
      h("p", {}, "On the node, run ", h("code", {}, "rnx console"), " (or ", h("code", {}, "rnx console --role viewer"),
        ") and open the one-time link it prints. Each link works once and for a few minutes.")));
}

async function start() {
  try {
    session = await api.get("/session");
  } catch (e) {
    signedOut(e);
    return;
  }
  api.useCsrf(session.csrf);
  const who = document.getElementById("who");
  mount(who, session.name, h("span", { class: `badge role role-${session.role}`, id: "role" }, session.role),
    " ", h("a", { href: "#", id: "sign-out", onclick: (ev) => { ev.preventDefault(); signOut(); } }, "Sign out"));
  window.addEventListener("hashchange", show);
  show();
}

async function signOut() {
  try {
    await api.post("/session/logout");
  } catch (e) {
    say(explain(e));
    return;
  }
  stop();
  signedOut({ message: "You signed out." });
}

start();
