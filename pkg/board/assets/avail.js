// avail.js: availability over the last 24 hours (docs/availability.md): the
// ratios of the servers on screen (GET /v1/mcp/availability, one call per
// page of 100), a server's figures and outages, a skill's ratio, kept for a
// minute or until the server's status changes; and the bar of a window with its outages marked, readable
// without colour (outages are hatched, named in text and listed).

const TTL = 60 * 1000;

// percent shows a ratio as mcpctl does (output.Percent): three decimals.
export function percent(r) {
  return r === null || r === undefined ? '—' : `${(r * 100).toFixed(3)}%`;
}

// Availability fetches and keeps figures for one session's API.
export class Availability {
  constructor(api, signal, onChange) {
    this.api = api;
    this.signal = signal;
    this.onChange = onChange;
    this.ratios = new Map(); // server_id -> {ratio, at}
    this.servers = new Map(); // server_id -> {a, at}
    this.skills = new Map(); // name -> {a, at}
    this.inflight = new Set();
    this.queue = [];
    this.running = 0;
  }

  // fresh: the entry is less than a minute old and, when a status is
  // given, was read while the server had it (a transition makes the
  // figures old at once).
  fresh(entry, status) {
    return entry && Date.now() - entry.at < TTL && (status === undefined || entry.status === status);
  }

  // ratio is a server's kept 24 h ratio: undefined while unknown.
  ratio(id) {
    const e = this.ratios.get(id);
    return e ? e.ratio : undefined;
  }

  // wantRatios fetches the ratios of the servers whose ratio is unknown or
  // old, 100 a call.
  wantRatios(servers) {
    const status = new Map(servers.map((s) => [s.server_id, s.status]));
    const need = servers.filter((s) => !this.fresh(this.ratios.get(s.server_id), s.status) && !this.inflight.has(`r:${s.server_id}`))
      .map((s) => s.server_id);
    for (let i = 0; i < need.length; i += 100) {
      const chunk = need.slice(i, i + 100);
      for (const id of chunk) this.inflight.add(`r:${id}`);
      this.api.get('/v1/mcp/availability', { window: '24h', server_ids: chunk.join(',') }, this.signal)
        .then((list) => {
          const at = Date.now();
          for (const id of chunk) this.ratios.set(id, { ratio: null, at, status: status.get(id) });
          for (const r of list.servers || []) {
            this.ratios.set(r.server_id, { ratio: r.available_ratio, at, status: status.get(r.server_id) });
          }
          this.onChange();
        })
        .catch(() => {
          // An mcpd without the endpoint, or a failure: no figures, and no
          // new try before the minute is over.
          const at = Date.now();
          for (const id of chunk) this.ratios.set(id, { ratio: null, at, status: status.get(id) });
        })
        .finally(() => { for (const id of chunk) this.inflight.delete(`r:${id}`); });
    }
  }

  // server is a server's 24 h availability: undefined until fetched, null
  // when it could not be read.
  server(id, status) {
    const e = this.servers.get(id);
    if (!this.fresh(e, status)) this.fetchOne(`s:${id}`, `/v1/mcp/servers/${encodeURIComponent(id)}/availability`, (a, at) => {
      this.servers.set(id, { a, at, status });
      if (a) this.ratios.set(id, { ratio: a.available_ratio, at, status });
    });
    return e ? e.a : undefined;
  }

  // skill is a skill's 24 h availability: undefined until fetched, null
  // when it could not be read.
  skill(name) {
    const e = this.skills.get(name);
    if (!this.fresh(e)) this.fetchOne(`k:${name}`, `/v1/mcp/skills/${encodeURIComponent(name)}/availability`, (a, at) => {
      this.skills.set(name, { a, at });
    });
    return e ? e.a : undefined;
  }

  // fetchOne reads one answer, at most four at a time (a page of skills
  // asks for up to 100).
  fetchOne(key, path, keep) {
    if (this.inflight.has(key)) return;
    this.inflight.add(key);
    this.queue.push(() => this.api.get(path, { window: '24h' }, this.signal)
      .then((a) => { keep(a, Date.now()); this.onChange(); })
      .catch(() => { keep(null, Date.now()); this.onChange(); })
      .finally(() => {
        this.inflight.delete(key);
        this.running--;
        this.next();
      }));
    this.next();
  }

  next() {
    while (this.running < 4 && this.queue.length) {
      this.running++;
      this.queue.shift()();
    }
  }
}

function el(tag, props, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k.startsWith('aria-') || k === 'role') e.setAttribute(k, v);
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else e[k] = v;
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

function hm(ms) {
  if (ms < 60000) return `${Math.round(ms / 1000)}s`;
  const m = Math.round(ms / 60000);
  return m < 60 ? `${m}m` : `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
}

function clock(iso) {
  const d = new Date(iso);
  const p = (n) => String(n).padStart(2, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}`;
}

// bar draws the window from `from` to `to`: the time not observed (before
// registration) blank, available time plain, each outage a hatched mark
// with its status, times and duration in its label and title; then the
// figures and the outages as text, newest first.
export function bar(a) {
  const from = Date.parse(a.from);
  const span = Math.max(1, Date.parse(a.to) - from);
  const observedFrom = Date.parse(a.to) - a.observed_seconds * 1000;
  const pct = (t) => `${Math.min(100, Math.max(0, ((t - from) / span) * 100)).toFixed(3)}%`;
  const marks = [];
  if (observedFrom > from) {
    marks.push(el('span', { className: 'unobserved', title: 'not registered yet' }));
    marks[0].style.left = '0%';
    marks[0].style.width = pct(observedFrom);
  }
  for (const o of a.outages) {
    const start = Date.parse(o.from);
    const end = Date.parse(o.to);
    const label = `${o.status} ${clock(o.from)}–${clock(o.to)} (${hm(end - start)})`;
    const m = el('span', { className: `outage o-${o.status}`, title: label, dataset: { status: o.status } });
    m.style.left = pct(start);
    m.style.width = `max(2px, ${((end - start) / span * 100).toFixed(3)}%)`;
    marks.push(m);
  }
  const track = el('div', {
    className: 'avail-bar', role: 'img',
    'aria-label': `${a.window} window: ${percent(a.available_ratio)} available, ${a.outages.length} outage${a.outages.length === 1 ? '' : 's'}`,
  }, ...marks);
  const s = a.seconds;
  const figures = el('p', { className: 'avail-figures' },
    el('strong', { className: 'avail-ratio' }, percent(a.available_ratio)), ` available over the last ${a.window}`,
    ` · healthy ${hm(s.healthy * 1000)}, degraded ${hm(s.degraded * 1000)}, unhealthy ${hm(s.unhealthy * 1000)},`
    + ` deregistered ${hm(s.deregistered * 1000)} · ${a.transitions} transition${a.transitions === 1 ? '' : 's'}`);
  const scale = el('div', { className: 'avail-scale muted small', 'aria-hidden': 'true' },
    el('span', null, clock(a.from)), el('span', null, `now ${clock(a.to)}`));
  const list = el('ol', { className: 'avail-outages plain' }, ...(a.outages.length
    ? a.outages.map((o) => el('li', { dataset: { status: o.status } },
      el('span', { className: `pattern o-${o.status}`, 'aria-hidden': 'true' }),
      `${o.status} from ${clock(o.from)} to ${clock(o.to)} (${hm(Date.parse(o.to) - Date.parse(o.from))})`))
    : [el('li', { className: 'muted' }, 'No outage in the window.')]));
  return el('div', { className: 'avail' }, figures, track, scale, list);
}
