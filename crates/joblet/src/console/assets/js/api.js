// The REST API as the console uses it: JSON over fetch with the session
// cookie (same origin), the session's CSRF token on every change, errors
// in the API's one shape ({"error": {"code", "message", "field"}}) turned
// into ApiError, and server-sent events for live logs.

const BASE = "/api/v1";

/** A refused or failed API call, with the API's code and message. */
export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

let csrf = null;

/** Remembers the session's CSRF token for changes (from GET /session). */
export function useCsrf(token) {
  csrf = token;
}

async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") {
    if (csrf) headers["X-Joblet-CSRF"] = csrf;
    if (body !== undefined) headers["Content-Type"] = "application/json";
  }
  let res;
  try {
    res = await fetch(BASE + path, {
      method,
      headers,
      credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, "unavailable", `The node did not answer (${e.message}). Is joblet running?`);
  }
  const text = await res.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!res.ok) {
    const err = data && data.error;
    throw new ApiError(res.status, err ? err.code : "http_" + res.status,
      err ? err.message : `${method} ${path}: HTTP ${res.status}`, err ? err.field : undefined);
  }
  return data;
}

export const get = (path) => call("GET", path);
export const post = (path, body) => call("POST", path, body === undefined ? {} : body);
export const del = (path) => call("DELETE", path);

/** A query string from an object, leaving out empty values. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : "";
}

/**
 * Follows server-sent events at path; onEvent(type, data) for each event
 * of the given types. Returns a function that stops following.
 */
export function follow(path, types, onEvent, onError) {
  const src = new EventSource(BASE + path, { withCredentials: true });
  for (const t of types) {
    src.addEventListener(t, (ev) => {
      let data = ev.data;
      try {
        data = JSON.parse(ev.data);
      } catch {
        /* plain text */
      }
      onEvent(t, data, ev);
    });
  }
  src.onerror = () => {
    if (onError) onError(src.readyState === EventSource.CLOSED);
  };
  return () => src.close();
}
