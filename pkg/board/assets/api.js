// api.js: the calls of mcpd's /v1 API that the board makes, with the bearer
// token, and the change feed read with fetch and a streamed body (an
// EventSource cannot send an Authorization header).

// APIError is a failed call: its HTTP status and the problem mcpd sent.
export class APIError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

async function problemOf(res) {
  let problem = null;
  try {
    problem = await res.json();
  } catch {
    problem = { title: res.statusText };
  }
  return new APIError(res.status, problem);
}

// Every request: same origin, no cookies, no referrer, never cached.
function init(token, signal, extra = {}) {
  return {
    headers: { Authorization: `Bearer ${token}`, Accept: 'application/json', ...extra },
    credentials: 'omit',
    cache: 'no-store',
    referrerPolicy: 'no-referrer',
    signal,
  };
}

function url(path, params) {
  const u = new URL(path, window.location.origin);
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') u.searchParams.set(k, v);
  }
  return u.pathname + u.search;
}

// API calls mcpd with one token.
export class API {
  constructor(token) {
    this.token = token;
  }

  async get(path, params, signal) {
    const res = await fetch(url(path, params), init(this.token, signal));
    if (!res.ok) throw await problemOf(res);
    return res.json();
  }

  // listAll pages through a list (limit 1000) and returns its items and the
  // first page's watch_cursor: watching from there misses nothing.
  async listAll(path, key, params, signal) {
    let cursor = null;
    let watchCursor = null;
    const items = [];
    for (let pages = 0; pages < 10000; pages++) {
      const page = await this.get(path, { ...params, limit: 1000, cursor }, signal);
      if (watchCursor === null) watchCursor = page.watch_cursor;
      for (const it of page[key] || []) items.push(it);
      cursor = page.next_cursor;
      if (!cursor) break;
    }
    return { items, watchCursor };
  }
}

// Follower follows GET /v1/mcp/watch from a cursor, resuming from the last
// id it received after a dropped connection. Callbacks:
//   onEvents(events)   a batch of audit events, in commit order
//   onState(state, n)  'connecting', 'live' or 'reconnecting' (attempt n)
//   onExpired()        410 (or 400): the position cannot be resumed; list again
//   onAuth(err)        401 or 403: the token no longer serves; also when
//                      the token has expired before a reconnection (mcpd
//                      ends a watch at its token's exp): ask for another
export class Follower {
  constructor(api, cursor, callbacks) {
    this.api = api;
    this.cursor = cursor;
    this.cb = callbacks;
    this.stopped = false;
    this.abort = null;
    this.idle = null;
  }

  stop() {
    this.stopped = true;
    if (this.abort) this.abort.abort();
    clearTimeout(this.idle);
  }

  async run() {
    let attempt = 0;
    while (!this.stopped) {
      // mcpd ends the stream when the token expires: reconnect with the
      // token while it is valid, else ask for another rather than retry.
      const exp = tokenExpiry(this.api.token);
      if (exp && exp.getTime() <= Date.now()) {
        this.stopped = true;
        this.cb.onAuth(new APIError(401, { detail: `the token expired at ${exp.toLocaleString()}` }));
        return;
      }
      this.cb.onState(attempt === 0 ? 'connecting' : 'reconnecting', attempt);
      this.abort = new AbortController();
      try {
        const res = await fetch(url('/v1/mcp/watch', { cursor: this.cursor }),
          init(this.api.token, this.abort.signal, { Accept: 'text/event-stream' }));
        // 410: the position is gone; 400: it is not one of this tenant's
        // (another mcpd's memory trail). Either way: list again.
        if (res.status === 410 || res.status === 400) {
          this.stopped = true;
          this.cb.onExpired();
          return;
        }
        if (res.status === 401 || res.status === 403) {
          this.stopped = true;
          this.cb.onAuth(await problemOf(res));
          return;
        }
        if (!res.ok) throw await problemOf(res); // 429, 503: try again later
        attempt = 0;
        this.cb.onState('live', 0);
        await this.read(res.body);
      } catch (err) {
        if (this.stopped) return;
        // A refused connection, a reset, a stream cut by a restart: resume.
        void err;
      }
      if (this.stopped) return;
      attempt++;
      this.cb.onState('reconnecting', attempt);
      const wait = Math.min(5000, 250 * 2 ** Math.min(attempt - 1, 5));
      await new Promise((r) => setTimeout(r, wait * (0.75 + Math.random() * 0.5)));
    }
  }

  // A stream that sends nothing for this long is taken for dead: mcpd sends
  // a bookmark after 15 s of quiet.
  armIdle() {
    clearTimeout(this.idle);
    this.idle = setTimeout(() => this.abort && this.abort.abort(), 45000);
  }

  async read(body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    let ev = { id: null, event: '', data: [] };
    this.armIdle();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        this.armIdle();
        const t0 = performance.now();
        buf += value;
        const batch = [];
        // Lines end in LF (or CRLF); mcpd sends no lone CR. One pass with
        // an index, so that a large chunk is not copied line by line.
        let pos = 0;
        for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n', pos)) {
          let line = buf.slice(pos, nl);
          pos = nl + 1;
          if (line.endsWith('\r')) line = line.slice(0, -1);
          if (line === '') {
            if (ev.data.length || ev.id !== null) this.dispatch(ev, batch);
            ev = { id: null, event: '', data: [] };
            continue;
          }
          if (line.startsWith(':')) continue;
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          let val = colon < 0 ? '' : line.slice(colon + 1);
          if (val.startsWith(' ')) val = val.slice(1);
          if (field === 'id') ev.id = val;
          else if (field === 'event') ev.event = val;
          else if (field === 'data') ev.data.push(val);
        }
        buf = buf.slice(pos);
        performance.measure('mcpd:feed', { start: t0, end: performance.now() });
        if (batch.length) this.cb.onEvents(batch);
      }
    } finally {
      clearTimeout(this.idle);
      reader.cancel().catch(() => {});
    }
  }

  dispatch(ev, batch) {
    if (ev.id) this.cursor = ev.id;
    if (ev.event === 'mcp.watch.bookmark' || !ev.data.length) return;
    try {
      batch.push(JSON.parse(ev.data.join('\n')));
    } catch {
      // Not an event object: nothing to apply; the position still moves.
    }
  }
}

// tokenExpiry returns the token's exp as a Date, or null when it has none
// that can be read (mcpd decides in any case).
export function tokenExpiry(token) {
  const parts = token.split('.');
  if (parts.length !== 3) return null;
  try {
    const b64 = parts[1].replace(/-/g, '+').replace(/_/g, '/');
    const claims = JSON.parse(atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4)));
    return typeof claims.exp === 'number' ? new Date(claims.exp * 1000) : null;
  } catch {
    return null;
  }
}
