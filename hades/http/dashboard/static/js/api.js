// Same-origin JSON calls to the dashboard API. The session travels in an HttpOnly cookie the browser sends.

/** Endpoints whose 401 is an answer, not a lost session. */
const SESSION_ENDPOINTS = new Set(['/api/login', '/api/session']);

let unauthorized = () => {};

/** What to do when any other endpoint answers 401 (the app goes to /login). */
export function onUnauthorized(handler) {
  unauthorized = handler;
}

/** Tell the app the session is gone (used by the SSE feeds, whose 401s the browser hides). */
export function sessionLost() {
  unauthorized();
}

export class ApiError extends Error {
  constructor(status, message, data) {
    super(message);
    this.status = status;
    this.data = data;
  }
}

/** ``{ok, status, data}``; a network failure is an ApiError with status 0. */
export async function request(path, { method = 'GET', body, signal } = {}) {
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' }, signal };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    if (error.name === 'AbortError') throw error;
    throw new ApiError(0, 'The Hades API is unreachable.', null);
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { error: text };
    }
  }
  if (response.status === 401 && !SESSION_ENDPOINTS.has(path.split('?')[0])) unauthorized();
  return { ok: response.ok, status: response.status, data };
}

/** The parsed body of a 2xx answer; anything else throws an ApiError carrying the server's ``error``. */
export async function getJSON(path, options) {
  const { ok, status, data } = await request(path, options);
  if (!ok) throw new ApiError(status, data?.error ?? `HTTP ${status}`, data);
  return data;
}

/** ``/api/jobs/<id>`` with the id escaped. */
export function jobPath(id, suffix = '') {
  return `/api/jobs/${encodeURIComponent(id)}${suffix}`;
}
