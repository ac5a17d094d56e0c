// app.js: the board. Sign-in, the views (servers, one server, skills), and
// the session that lists once and then follows the change feed.

import { API, APIError, Follower, tokenExpiry } from './api.js';
import { Registry, STATUSES } from './model.js';
import { Availability, bar, percent } from './avail.js';

const TOKEN_KEY = 'mcpd.board.token';
const PAGE_SIZE = 100;
const STATUS_ICON = { healthy: '●', degraded: '▲', unhealthy: '✖', deregistered: '○' };

const $ = (id) => document.getElementById(id);

// h builds an element: h('td', {className: 'x'}, 'text', child, ...).
function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('aria-') || k === 'role') el.setAttribute(k, v);
    else el[k] = v;
  }
  for (const c of children) {
    if (c !== null && c !== undefined && c !== false) el.append(c);
  }
  return el;
}

function badge(status) {
  return h('span', { className: `status s-${status}`, dataset: { status } },
    h('span', { className: 'icon', 'aria-hidden': 'true' }, STATUS_ICON[status] || '?'), status);
}

function fmtAge(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  const hr = Math.floor(m / 60);
  if (hr < 24) return `${hr}h ${String(m % 60).padStart(2, '0')}m`;
  return `${Math.floor(hr / 24)}d ${hr % 24}h`;
}

// fmtTime gives a time as YYYY-MM-DD HH:MM:SS in the browser's zone.
function fmtTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// heartbeatAge says how long ago a server last heartbeated. Heartbeats are
// not on the change feed, so for a server still healthy the board knows only
// that it heartbeated within two intervals (else the monitor would have
// said degraded); for the others the time is exact.
function heartbeatAge(s, now) {
  const age = now - Date.parse(s.last_heartbeat_at);
  const bound = 2 * (s.heartbeat_interval_seconds || 10) * 1000;
  if (s.status === 'healthy' && age >= bound) {
    return { text: `within ${fmtAge(bound)}`, bounded: true };
  }
  return { text: `${fmtAge(age)} ago`, bounded: false };
}

// ---- routes: #/servers?status=&module=&page=, #/server/<id>, #/skills?... --

function parseRoute() {
  const raw = window.location.hash.replace(/^#/, '') || '/servers';
  const q = raw.indexOf('?');
  const path = q < 0 ? raw : raw.slice(0, q);
  const params = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
  if (path.startsWith('/server/')) return { view: 'server', id: decodeURIComponent(path.slice(8)), params };
  if (path === '/skills') return { view: 'skills', params };
  return { view: 'servers', params };
}

function setParams(v, params) {
  const hash = filteredHash(v, params);
  if (window.location.hash !== hash) window.location.hash = hash;
}

// ---- the session: one token, one registry, one follower ------------------

class Session {
  constructor(token) {
    this.api = new API(token);
    this.registry = new Registry();
    this.follower = null;
    this.abort = new AbortController();
    this.expiry = null;
    this.skillsLog = null; // events received while the skills are listed
    this.fetching = new Set();
    this.ended = false;
    this.avail = new Availability(this.api, this.abort.signal, () => render());
  }

  async start() {
    const exp = tokenExpiry(this.api.token);
    if (exp) {
      const left = exp.getTime() - Date.now();
      if (left <= 0) throw new APIError(401, { detail: `the token expired at ${exp.toLocaleString()}` });
      if (left < 2 ** 31) {
        this.expiry = setTimeout(() => signOut(`The token expired at ${exp.toLocaleString()}; sign in with a new one.`), left);
      }
    }
    await this.list();
  }

  // list lists the servers (every page), shows them, follows the feed from
  // the first page's watch_cursor, then lists the skills.
  async list() {
    setConn('listing');
    let listed = null;
    // mcpd may be restarting: try again, with the same backoff as the feed,
    // until it answers or refuses the token.
    for (let attempt = 1; !listed; attempt++) {
      try {
        listed = await this.api.listAll('/v1/mcp/servers', 'servers', {}, this.abort.signal);
      } catch (err) {
        if (this.ended || (err instanceof APIError && [400, 401, 403, 404].includes(err.status))) throw err;
        setConn('reconnecting', attempt);
        const wait = Math.min(5000, 250 * 2 ** Math.min(attempt - 1, 5));
        await new Promise((r) => setTimeout(r, wait));
        if (this.ended) return;
      }
    }
    const { items, watchCursor } = listed;
    if (this.ended) return;
    this.registry.setServers(items);
    this.registry.skills = null;
    performance.mark('mcpd:listed');
    render();
    // After the frame that shows the list: the first render's end.
    requestAnimationFrame(() => setTimeout(() => {
      performance.mark('mcpd:rendered');
      if (performance.getEntriesByName('mcpd:signin', 'mark').length &&
          !performance.getEntriesByName('mcpd:first-render', 'measure').length) {
        performance.measure('mcpd:first-render', 'mcpd:signin', 'mcpd:rendered');
      }
    }, 0));
    this.follow(watchCursor);
    this.listSkills();
  }

  async listSkills() {
    this.skillsLog = [];
    try {
      const { items } = await this.api.listAll('/v1/mcp/skills', 'skills', {}, this.abort.signal);
      if (this.ended) return;
      this.registry.setSkills(items);
      // Events that came while listing: applying them again is harmless
      // (each sets the state its transition leads to).
      for (const ev of this.skillsLog) this.registry.apply(ev);
      this.skillsLog = null;
      render();
      if (performance.getEntriesByName('mcpd:signin', 'mark').length) {
        performance.measure('mcpd:skills-listed', 'mcpd:signin');
      }
    } catch (err) {
      this.skillsLog = null;
      this.fail(err);
    }
  }

  follow(cursor) {
    if (this.follower) this.follower.stop();
    const f = new Follower(this.api, cursor, {
      onEvents: (evs) => this.onEvents(evs),
      onState: (state, attempt) => { if (f === this.follower) setConn(state, attempt); },
      onExpired: () => {
        if (f !== this.follower) return;
        setConn('relisting');
        this.list().catch((err) => this.fail(err));
      },
      onAuth: (err) => this.fail(err),
    });
    this.follower = f;
    f.run();
  }

  onEvents(evs) {
    const t0 = performance.now();
    for (const ev of evs) {
      const needFetch = this.registry.apply(ev);
      if (this.skillsLog) this.skillsLog.push(ev);
      if (needFetch) this.fetchServer(ev.server_id);
      if (view.server && view.server.id === ev.server_id) view.server.events.push(ev);
    }
    performance.measure('mcpd:apply', { start: t0, end: performance.now() });
    render();
  }

  // fetchServer reads one server and its skills after a registration:
  // what the event does not carry (capabilities, skills, remotes).
  async fetchServer(id) {
    if (this.fetching.has(id)) return;
    this.fetching.add(id);
    try {
      const [s, sk] = await Promise.all([
        this.api.get(`/v1/mcp/servers/${encodeURIComponent(id)}`, null, this.abort.signal),
        this.api.get(`/v1/mcp/servers/${encodeURIComponent(id)}/skills`, null, this.abort.signal),
      ]);
      const cur = this.registry.servers.get(id);
      // The feed decides the status; the rest is the fetched object's.
      if (cur) s.status = cur.status;
      this.registry.upsert(s);
      this.registry.setServerSkills(id, sk.skills || []);
      render();
    } catch (err) {
      if (!(err instanceof APIError && err.status === 404)) this.fail(err);
    } finally {
      this.fetching.delete(id);
    }
  }

  fail(err) {
    if (this.ended) return;
    if (err instanceof APIError && (err.status === 401 || err.status === 403)) {
      signOut(authMessage(err));
      return;
    }
    if (err && err.name === 'AbortError') return;
    showError(`mcpd answered an error: ${err.message}`);
  }

  end() {
    this.ended = true;
    this.abort.abort();
    if (this.follower) this.follower.stop();
    clearTimeout(this.expiry);
  }
}

function authMessage(err) {
  const detail = err.problem && err.problem.detail ? ` (${err.problem.detail})` : '';
  if (err.status === 403) {
    return `mcpd accepted the token but it lacks the scope mcp:read: 403 Forbidden${detail}.`;
  }
  if (/expired/i.test(detail)) return `The token has expired: 401 Unauthorized${detail}. Sign in with a new one.`;
  return `mcpd refused the token: 401 Unauthorized${detail}.`;
}

let session = null;
const view = { server: null };

// ---- sign-in ----------------------------------------------------------------

function showSignIn(message) {
  for (const id of ['servers-view', 'server-view', 'skills-view']) $(id).hidden = true;
  $('nav').hidden = true;
  $('signout').hidden = true;
  $('signin-view').hidden = false;
  $('notice').hidden = true;
  const box = $('signin-error');
  box.hidden = !message;
  box.textContent = message || '';
  setConn('signed-out');
  $('token').focus();
}

async function signIn(token) {
  performance.clearMarks('mcpd:signin');
  performance.clearMeasures('mcpd:first-render');
  performance.mark('mcpd:signin');
  if (session) session.end();
  session = new Session(token);
  const mine = session;
  $('signin-view').hidden = true;
  $('nav').hidden = false;
  $('signout').hidden = false;
  route();
  try {
    await mine.start();
  } catch (err) {
    if (mine !== session) return;
    if (err instanceof APIError && (err.status === 401 || err.status === 403)) {
      signOut(authMessage(err));
    } else if (err && err.name !== 'AbortError') {
      showError(`Could not list the servers: ${err.message}`);
    }
  }
}

function signOut(message) {
  if (session) session.end();
  session = null;
  sessionStorage.removeItem(TOKEN_KEY);
  showSignIn(message);
}

function showError(text) {
  const box = $('notice');
  box.textContent = text;
  box.hidden = false;
  setConn('error', 0, text);
}

// ---- connection state ---------------------------------------------------------

function setConn(state, attempt, text) {
  const el = $('conn');
  el.dataset.state = state;
  if (state === 'live') $('notice').hidden = true;
  const label = {
    'signed-out': '',
    listing: 'Listing…',
    relisting: 'Listing again (the feed position expired)…',
    connecting: 'Connecting…',
    live: 'Live',
    reconnecting: `Reconnecting…${attempt > 1 ? ` (attempt ${attempt})` : ''}`,
    error: text || 'Error',
  }[state];
  el.replaceChildren();
  if (label) el.append(h('span', { className: 'dot', 'aria-hidden': 'true' }), label);
}

// ---- rendering ------------------------------------------------------------------

let renderPending = false;

function render() {
  if (renderPending) return;
  renderPending = true;
  const run = () => {
    renderPending = false;
    const t0 = performance.now();
    renderNow();
    performance.measure('mcpd:render', { start: t0, end: performance.now() });
  };
  if (document.hidden) setTimeout(run, 250);
  else requestAnimationFrame(run);
}

function renderNow() {
  if (!session) return;
  const r = parseRoute();
  if (r.view === 'servers') renderServers(r.params);
  else if (r.view === 'server') renderServer();
  else renderSkills(r.params);
}

function route() {
  if (!session) return;
  const r = parseRoute();
  $('servers-view').hidden = r.view !== 'servers';
  $('server-view').hidden = r.view !== 'server';
  $('skills-view').hidden = r.view !== 'skills';
  for (const a of $('nav').querySelectorAll('a')) {
    if (a.dataset.view === r.view || (r.view === 'server' && a.dataset.view === 'servers')) {
      a.setAttribute('aria-current', 'page');
    } else {
      a.removeAttribute('aria-current');
    }
  }
  if (r.view === 'servers') {
    $('module-filter').value = r.params.get('module') || '';
  } else if (r.view === 'skills') {
    $('skill-filter').value = r.params.get('name') || '';
    $('skill-missing').checked = r.params.get('missing') === '1';
  }
  if (r.view === 'server') openServer(r.id);
  else view.server = null;
  renderNow();
}

// -- servers

const rowCache = new Map(); // server_id -> tr

function serverRow(s) {
  let tr = rowCache.get(s.server_id);
  if (!tr) {
    const link = h('a', { href: `#/server/${encodeURIComponent(s.server_id)}` });
    tr = h('tr', { dataset: { serverId: s.server_id } },
      h('th', { scope: 'row' }, link), h('td'), h('td'), h('td', { className: 'age' }), h('td'), h('td', { className: 'num' }),
      h('td', { className: 'col-remotes remotes' }), h('td', { className: 'num avail' }));
    tr.link = link;
    rowCache.set(s.server_id, tr);
  }
  const c = tr.cells;
  const sk = session.registry.skillCounts(s.server_id);
  const skills = sk ? `${sk[0]}/${sk[1]}` : '…';
  const protos = (s.supported_protocols || []).join(', ');
  const remotes = Array.isArray(s.remotes) ? s.remotes.map((x) => x.url).join('\n') : '';
  const ratio = session.avail.ratio(s.server_id);
  const avail = ratio === undefined ? '…' : percent(ratio);
  const sig = [s.module_name, s.version, s.status, protos, skills, remotes, avail].join('\u0000');
  if (tr.sig !== sig) {
    tr.sig = sig;
    tr.link.textContent = s.module_name;
    c[1].textContent = s.version;
    c[2].replaceChildren(badge(s.status));
    c[4].textContent = protos;
    c[5].textContent = skills;
    if (sk) c[5].setAttribute('aria-label', `${sk[0]} of ${sk[1]} skills available`);
    c[6].replaceChildren(...(Array.isArray(s.remotes) ? s.remotes.map((x) =>
      h('div', { className: 'remote', title: `${x.type} ${x.url}` }, x.url)) : []));
    c[7].textContent = avail;
    tr.dataset.status = s.status;
  }
  tr.server = s;
  if (s.changedAt && tr.flashed !== s.changedAt && performance.now() - s.changedAt < 2500) {
    // Highlight a row that just changed. Two classes of the same animation
    // take turns, so that it restarts without forcing a layout.
    tr.flashed = s.changedAt;
    const next = tr.classList.contains('changed-a') ? 'changed-b' : 'changed-a';
    tr.classList.remove('changed-a', 'changed-b');
    tr.classList.add(next);
  }
  updateAge(tr, Date.now());
  return tr;
}

function updateAge(tr, now) {
  const a = heartbeatAge(tr.server, now);
  const cell = tr.cells[3];
  if (cell.textContent !== a.text) cell.textContent = a.text;
  cell.classList.toggle('bounded', a.bounded);
  cell.title = a.bounded
    ? 'Heartbeats are not on the change feed: a server that is still healthy has heartbeated within two intervals.'
    : `Last heartbeat ${fmtTime(tr.server.last_heartbeat_at)}`;
}

function renderServers(params) {
  const reg = session.registry;
  const status = STATUSES.includes(params.get('status')) ? params.get('status') : '';
  const module = params.get('module') || '';
  const counts = reg.counts();

  const buttons = [['', 'All', counts.all], ...STATUSES.map((st) => [st, st, counts[st] || 0])];
  const box = $('counts');
  if (box.children.length !== buttons.length) {
    box.replaceChildren(...buttons.map(([st]) => h('button', {
      type: 'button', className: `count c-${st || 'all'}`, dataset: { status: st },
    })));
  }
  buttons.forEach(([st, label, n], i) => {
    const b = box.children[i];
    const sig = `${label} ${n}`;
    if (b.dataset.sig !== sig) {
      b.dataset.sig = sig;
      b.replaceChildren(
        st ? h('span', { className: `icon s-${st}`, 'aria-hidden': 'true' }, STATUS_ICON[st]) : '',
        h('span', { className: 'label' }, label), h('span', { className: 'n' }, n.toLocaleString()));
    }
    b.setAttribute('aria-pressed', String(st === status));
  });

  // By status then name unless sort=name: a server that needs a look is
  // on the first page. The Module and Status headings switch.
  const sort = params.get('sort') === 'name' ? 'name' : 'status';
  const list = reg.filtered(status, module, sort);
  for (const [id, by] of [['sort-name', 'name'], ['sort-status', 'status']]) {
    const th = $(id).closest('th');
    if (by === sort) th.setAttribute('aria-sort', 'ascending');
    else th.removeAttribute('aria-sort');
    $(id).setAttribute('aria-pressed', String(by === sort));
  }
  $('servers-order').textContent = sort === 'name' ? 'ordered by module name'
    : 'ordered by status (unhealthy, degraded, healthy, deregistered), then module name';
  const pages = Math.max(1, Math.ceil(list.length / PAGE_SIZE));
  const page = Math.min(pages, Math.max(1, parseInt(params.get('page') || '1', 10) || 1));
  const slice = list.slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE);

  const tbody = $('servers-table').tBodies[0];
  session.avail.wantRatios(slice);
  const rows = slice.map(serverRow);
  const same = rows.length === tbody.rows.length && rows.every((r, i) => tbody.rows[i] === r);
  if (!same) {
    const active = document.activeElement;
    tbody.replaceChildren(...rows);
    if (active && tbody.contains(active)) active.focus();
  }
  document.body.classList.toggle('no-remotes', !reg.hasRemotes);

  $('servers-summary').textContent = `${counts.all.toLocaleString()} servers` +
    (status || module ? `, ${list.length.toLocaleString()} shown by the filters` : '');
  const empty = $('servers-empty');
  empty.hidden = list.length > 0;
  empty.textContent = counts.all === 0
    ? 'No servers are registered in this tenant yet. They appear here as they register.'
    : 'No server matches the filters.';
  const from = list.length ? (page - 1) * PAGE_SIZE + 1 : 0;
  $('page-info').textContent = `${from.toLocaleString()}–${((page - 1) * PAGE_SIZE + slice.length).toLocaleString()} of ${list.length.toLocaleString()}`;
  $('prev-page').disabled = page <= 1;
  $('next-page').disabled = page >= pages;
  $('prev-page').dataset.page = page - 1;
  $('next-page').dataset.page = page + 1;
}

// -- one server

async function openServer(id) {
  if (view.server && view.server.id === id) return;
  const v = { id, events: [], audit: null, error: null };
  view.server = v;
  $('server-error').hidden = true;
  const s = session;
  try {
    const [detail, sk, audit] = await Promise.all([
      s.registry.servers.get(id) ? null : s.api.get(`/v1/mcp/servers/${encodeURIComponent(id)}`, null, s.abort.signal),
      s.api.get(`/v1/mcp/servers/${encodeURIComponent(id)}/skills`, null, s.abort.signal),
      s.api.listAll('/v1/mcp/audit', 'events', { server_id: id }, s.abort.signal),
    ]);
    if (view.server !== v || s !== session) return;
    if (detail) s.registry.upsert(detail);
    v.skills = sk.skills || [];
    s.registry.setServerSkills(id, v.skills);
    // Events of the feed that the audit answer already holds are not
    // shown twice.
    const seen = new Set(audit.items.map((e) => e.event_id));
    v.audit = audit.items.concat(v.events.filter((e) => !seen.has(e.event_id)));
    v.events = [];
  } catch (err) {
    if (view.server !== v) return;
    if (err instanceof APIError && err.status === 404) {
      v.error = 'No such server in this tenant.';
    } else {
      s.fail(err);
      v.error = `Could not read the server: ${err.message}`;
    }
  }
  render();
}

function renderServer() {
  const v = view.server;
  if (!v) return;
  const s = session.registry.servers.get(v.id);
  const err = $('server-error');
  err.hidden = !v.error;
  err.textContent = v.error || '';
  if (!s) {
    $('server-title').textContent = v.error ? 'Unknown server' : 'Loading…';
    return;
  }
  document.title = `${s.module_name} · mcpd board`;
  $('server-title').textContent = s.module_name;
  $('server-status').replaceChildren(badge(s.status));
  const a = heartbeatAge(s, Date.now());
  const facts = [
    ['Server ID', s.server_id, 'mono'],
    ['Version', s.version],
    ['Status', badge(s.status)],
    ['Last heartbeat', `${a.text} (${fmtTime(s.last_heartbeat_at)})`, 'age'],
    ['Heartbeat interval', `${s.heartbeat_interval_seconds}s`],
    ['Protocols', (s.supported_protocols || []).join(', ')],
    ['Registered', fmtTime(s.registered_at)],
    ['Deregistered', s.deregistered_at ? fmtTime(s.deregistered_at) : '—'],
    ['Trace ID', s.trace_id || '—', 'mono'],
  ];
  if (s.title) facts.splice(1, 0, ['Title', s.title]);
  if (s.description) facts.splice(1, 0, ['Description', s.description]);
  $('server-facts').replaceChildren(...facts.flatMap(([k, val, cls]) =>
    [h('dt', null, k), h('dd', { className: cls || '' }, val)]));

  const remotes = Array.isArray(s.remotes) ? s.remotes : null;
  $('server-remotes').replaceChildren(...(remotes && remotes.length
    ? remotes.map((x) => h('li', null, h('span', { className: 'tag' }, x.type), ' ', h('code', { className: 'url' }, x.url)))
    : [h('li', { className: 'muted' }, remotes ? 'None registered.' : 'This mcpd does not report remotes.')]));

  const skills = (session.registry.skills && session.registry.skills.get(v.id)) || v.skills || [];
  $('server-skills').tBodies[0].replaceChildren(...(skills.length ? skills.slice().sort((x, y) => (x.name < y.name ? -1 : 1)).map((k) =>
    h('tr', null, h('th', { scope: 'row' }, k.name),
      h('td', null, h('span', { className: k.available ? 'yes' : 'no' },
        h('span', { className: 'icon', 'aria-hidden': 'true' }, k.available ? '✔' : '✖'),
        k.available ? 'available' : `unavailable${k.unavailable_reason ? ` (${k.unavailable_reason})` : ''}`)),
      h('td', null, k.description || ''))) : [h('tr', null, h('td', { colSpan: 3, className: 'muted' }, v.skills ? 'No skills.' : 'Loading…'))]));

  $('server-caps').textContent = JSON.stringify(s.capability_advertisement || {}, null, 2);
  const avail = session.avail.server(v.id, s.status);
  const box = $('server-avail');
  if (box.figures !== avail) {
    box.figures = avail;
    box.replaceChildren(avail ? bar(avail) : h('p', { className: 'muted' },
      avail === null ? 'This mcpd could not say (GET …/availability failed).' : 'Loading…'));
  }

  const events = (v.audit || []).concat(v.audit ? v.events : []);
  if (v.audit) {
    v.audit = events;
    v.events = [];
  }
  const ol = $('server-audit');
  ol.replaceChildren(...(v.audit ? events.slice().reverse().map((e) => h('li', { className: `k-${e.to_status}` },
    h('time', { dateTime: e.occurred_at }, fmtTime(e.occurred_at)),
    h('span', null, h('span', { className: 'kind' }, e.kind.replace('mcp.server.', '')), ' ',
      h('span', { className: 'muted' }, `${e.from_status || 'new'} → ${e.to_status} · version ${e.body ? e.body.version : ''}`))))
    : [h('li', { className: 'muted' }, 'Loading…')]));
  if (v.audit && !events.length) ol.replaceChildren(h('li', { className: 'muted' }, 'No events.'));
}

// -- skills

function renderSkills(params) {
  const reg = session.registry;
  const name = params.get('name') || '';
  const missing = params.get('missing') === '1';
  const groups = reg.skillGroups(name, missing);
  const tbody = $('skills-table').tBodies[0];
  const empty = $('skills-empty');
  if (!groups) {
    tbody.replaceChildren();
    empty.hidden = false;
    empty.textContent = 'Listing the skills…';
    return;
  }
  const all = reg.skillGroups('', false);
  const none = all.filter((g) => g.available === 0).length;
  $('skills-summary').textContent = `${all.length.toLocaleString()} skills, ${none.toLocaleString()} with no available provider`;
  const pages = Math.max(1, Math.ceil(groups.length / PAGE_SIZE));
  const page = Math.min(pages, Math.max(1, parseInt(params.get('page') || '1', 10) || 1));
  const slice = groups.slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE);
  tbody.replaceChildren(...slice.map((g) => h('tr', { className: g.available ? '' : 'missing', dataset: { skill: g.name } },
    ...skillCells(g))));
  empty.hidden = groups.length > 0;
  empty.textContent = all.length ? 'No skill matches the filters.' : 'No skills are registered.';
  $('skills-page-info').textContent = `${groups.length ? ((page - 1) * PAGE_SIZE + 1).toLocaleString() : 0}–${((page - 1) * PAGE_SIZE + slice.length).toLocaleString()} of ${groups.length.toLocaleString()}`;
  $('skills-prev').disabled = page <= 1;
  $('skills-next').disabled = page >= pages;
  $('skills-prev').dataset.page = page - 1;
  $('skills-next').dataset.page = page + 1;
}

function skillCells(g) {
  const a = session.avail.skill(g.name);
  return [
    h('th', { scope: 'row' }, g.name),
    h('td', null, h('span', { className: g.available ? 'yes' : 'no' },
      h('span', { className: 'icon', 'aria-hidden': 'true' }, g.available ? '✔' : '✖'),
      g.available ? `${g.available} of ${g.providers.length}` : `none of ${g.providers.length}`)),
    h('td', null, ...g.providers.map((p) => h('a', {
      href: `#/server/${encodeURIComponent(p.server.server_id)}`, className: `provider s-${p.server.status}`,
      title: `${p.server.module_name}: ${p.server.status}, skill ${p.skill.available ? 'available' : 'unavailable'}`,
    }, h('span', { className: 'icon', 'aria-hidden': 'true' }, STATUS_ICON[p.server.status]),
    `${p.server.module_name} (${p.server.status})`))),
    h('td', { className: 'num avail', title: a ? `${a.outages.length} outages in the last 24h` : '' },
      a ? percent(a.available_ratio) : (a === null ? '—' : '…'))];
}

// ---- wiring ---------------------------------------------------------------------

// The board's own measures (what docs/performance.md reports) are kept to
// the latest thousand of each, so that a board open for days holds no more.
const MEASURES = ['mcpd:feed', 'mcpd:apply', 'mcpd:render'];

function tick() {
  for (const m of MEASURES) {
    if (performance.getEntriesByName(m, 'measure').length > 1000) performance.clearMeasures(m);
  }
  if (!session) return;
  const now = Date.now();
  const r = parseRoute();
  if (r.view === 'servers') {
    for (const tr of $('servers-table').tBodies[0].rows) if (tr.server) updateAge(tr, now);
  } else if (r.view === 'server') {
    const dd = $('server-facts').querySelector('dd.age');
    const s = view.server && session.registry.servers.get(view.server.id);
    if (dd && s) dd.textContent = `${heartbeatAge(s, now).text} (${fmtTime(s.last_heartbeat_at)})`;
  }
}

function init() {
  $('signin').addEventListener('submit', (e) => {
    e.preventDefault();
    const input = $('token');
    const token = input.value.trim().replace(/^Bearer\s+/i, '');
    input.value = '';
    if (token.split('.').length !== 3) {
      showSignIn('That is not a token: a bearer token (JWT) has three parts separated by dots.');
      return;
    }
    const exp = tokenExpiry(token);
    if (exp && exp.getTime() <= Date.now()) {
      showSignIn(`That token expired at ${exp.toLocaleString()}; issue a new one (mcpctl token issue).`);
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, token);
    signIn(token);
  });
  $('signout').addEventListener('click', () => signOut(''));
  window.addEventListener('hashchange', () => {
    document.title = 'mcpd board';
    route();
  });

  $('counts').addEventListener('click', (e) => {
    const b = e.target.closest('button');
    if (!b) return;
    const p = parseRoute().params;
    p.set('status', b.getAttribute('aria-pressed') === 'true' ? '' : b.dataset.status);
    p.delete('page');
    setParams('servers', p);
  });
  $('module-filter').addEventListener('input', (e) => {
    const p = parseRoute().params;
    p.set('module', e.target.value.trim().toLowerCase());
    p.delete('page');
    history.replaceState(null, '', filteredHash('servers', p));
    renderNow();
  });
  $('clear-filters').addEventListener('click', () => {
    const p = new URLSearchParams();
    p.set('sort', parseRoute().params.get('sort') || '');
    setParams('servers', p);
  });
  for (const [id, by] of [['sort-name', 'name'], ['sort-status', '']]) {
    $(id).addEventListener('click', () => {
      const p = parseRoute().params;
      p.set('sort', by);
      p.delete('page');
      setParams('servers', p);
    });
  }
  for (const [id, v] of [['prev-page', 'servers'], ['next-page', 'servers'], ['skills-prev', 'skills'], ['skills-next', 'skills']]) {
    $(id).addEventListener('click', (e) => {
      const p = parseRoute().params;
      p.set('page', e.currentTarget.dataset.page);
      setParams(v, p);
    });
  }
  $('skill-filter').addEventListener('input', (e) => {
    const p = parseRoute().params;
    p.set('name', e.target.value.trim());
    p.delete('page');
    history.replaceState(null, '', filteredHash('skills', p));
    renderNow();
  });
  $('skill-missing').addEventListener('change', (e) => {
    const p = parseRoute().params;
    p.set('missing', e.target.checked ? '1' : '');
    p.delete('page');
    setParams('skills', p);
  });

  setInterval(tick, 1000);
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) signIn(token);
  else showSignIn('');
}

function filteredHash(v, params) {
  const clean = new URLSearchParams();
  for (const [k, val] of params) if (val) clean.set(k, val);
  const qs = clean.toString();
  return `#/${v}${qs ? `?${qs}` : ''}`;
}

init();
