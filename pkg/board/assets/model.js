// model.js: what the board knows of the tenant's registry, kept current by
// the change feed's events without listing again.

export const STATUSES = ['healthy', 'degraded', 'unhealthy', 'deregistered'];

// Reasons a skill is unavailable that mcpd sets itself and a recovery undoes.
const CASCADE = new Set(['server_unhealthy', 'server_deregistered']);

function byModule(a, b) {
  return a.module_name < b.module_name ? -1 : a.module_name > b.module_name ? 1 : 0;
}

// The servers table's default order, as the TUI's status sort: those that
// need a look first (unhealthy, degraded, healthy, deregistered), then by
// module name.
const STATUS_RANK = { unhealthy: 0, degraded: 1, healthy: 2, deregistered: 3 };

function byStatus(a, b) {
  return ((STATUS_RANK[a.status] ?? 4) - (STATUS_RANK[b.status] ?? 4)) || byModule(a, b);
}

export class Registry {
  constructor() {
    this.servers = new Map(); // server_id -> server object
    this.order = []; // server objects ordered by module_name
    this.skills = null; // server_id -> [skill]; null until listed
    this.hasRemotes = false;
    this.version = 0; // counts the changes that may reorder the servers
    this.byStatus = null; // this.order by status, of this.byStatusVersion
    this.byStatusVersion = -1;
  }

  setServers(list) {
    this.version++;
    this.servers = new Map();
    this.order = list.slice().sort(byModule);
    this.hasRemotes = false;
    for (const s of this.order) {
      this.servers.set(s.server_id, s);
      if (Array.isArray(s.remotes)) this.hasRemotes = true;
    }
  }

  setSkills(list) {
    this.skills = new Map();
    for (const k of list) this.addSkill(k);
  }

  addSkill(k) {
    let arr = this.skills.get(k.server_id);
    if (!arr) this.skills.set(k.server_id, (arr = []));
    arr.push(k);
  }

  setServerSkills(id, list) {
    if (this.skills) this.skills.set(id, list);
  }

  // upsert puts a full server object in, keeping its place in the order.
  upsert(s) {
    this.version++;
    const old = this.servers.get(s.server_id);
    if (Array.isArray(s.remotes)) this.hasRemotes = true;
    if (old) {
      Object.assign(old, s);
      return old;
    }
    let lo = 0;
    let hi = this.order.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (byModule(this.order[mid], s) < 0) lo = mid + 1;
      else hi = mid;
    }
    this.order.splice(lo, 0, s);
    this.servers.set(s.server_id, s);
    return s;
  }

  // apply applies one audit event and returns whether the server's full
  // object must be fetched (a registration changes what events do not
  // carry: capabilities, skills, remotes).
  apply(ev) {
    this.version++;
    const b = ev.body || {};
    let s = this.servers.get(ev.server_id);
    let fetch = ev.kind === 'mcp.server.registered';
    if (!s) {
      s = this.upsert({
        server_id: ev.server_id, module_name: ev.module_name, version: b.version,
        supported_protocols: b.supported_protocols || [], status: ev.to_status,
        last_heartbeat_at: ev.occurred_at, registered_at: ev.occurred_at, deregistered_at: null,
        capability_advertisement: {}, trace_id: ev.trace_id, heartbeat_interval_seconds: 10,
      });
      fetch = true;
    }
    s.status = ev.to_status;
    if (b.version) s.version = b.version;
    if (Array.isArray(b.supported_protocols)) s.supported_protocols = b.supported_protocols;
    s.changedAt = performance.now();
    const skills = this.skills && this.skills.get(s.server_id);
    switch (ev.kind) {
      case 'mcp.server.registered':
        s.last_heartbeat_at = ev.occurred_at;
        s.registered_at = s.registered_at || ev.occurred_at;
        s.deregistered_at = null;
        break;
      case 'mcp.server.recovered':
        // A recovery is a heartbeat: the last one is the event's time.
        s.last_heartbeat_at = ev.occurred_at;
        for (const k of skills || []) {
          if (!k.available && CASCADE.has(k.unavailable_reason)) {
            k.available = true;
            k.unavailable_reason = null;
          }
        }
        break;
      case 'mcp.server.unhealthy':
        for (const k of skills || []) {
          if (k.available) {
            k.available = false;
            k.unavailable_reason = 'server_unhealthy';
          }
        }
        break;
      case 'mcp.server.deregistered':
        s.deregistered_at = ev.occurred_at;
        for (const k of skills || []) {
          if (k.available || CASCADE.has(k.unavailable_reason)) {
            k.available = false;
            k.unavailable_reason = 'server_deregistered';
          }
        }
        break;
      default:
    }
    return fetch;
  }

  counts() {
    const c = { all: this.order.length, healthy: 0, degraded: 0, unhealthy: 0, deregistered: 0 };
    for (const s of this.order) c[s.status] = (c[s.status] || 0) + 1;
    return c;
  }

  // filtered returns the servers of a status and a part of a module name
  // (either may be empty), by status then name (sort 'status') or by name
  // (sort 'name').
  filtered(status, module, sort) {
    const m = (module || '').toLowerCase();
    const byName = sort === 'name' || !!status; // one status: the name decides
    if (!m) {
      if (byName) return status ? this.order.filter((s) => s.status === status) : this.order;
      if (this.byStatusVersion !== this.version) {
        this.byStatus = this.order.slice().sort(byStatus);
        this.byStatusVersion = this.version;
      }
      return this.byStatus;
    }
    const list = this.order.filter((s) => (!status || s.status === status) && s.module_name.includes(m));
    return byName ? list : list.sort(byStatus);
  }

  // skillCounts returns [available, total] of a server, or null before the
  // skills are listed.
  skillCounts(id) {
    if (!this.skills) return null;
    const arr = this.skills.get(id) || [];
    let n = 0;
    for (const k of arr) if (k.available) n++;
    return [n, arr.length];
  }

  // skillGroups returns one entry per skill name: its providers and how
  // many are available; names with no available provider first.
  skillGroups(nameFilter, onlyMissing) {
    if (!this.skills) return null;
    const f = (nameFilter || '').toLowerCase();
    const groups = new Map();
    for (const [id, arr] of this.skills) {
      const s = this.servers.get(id);
      if (!s) continue;
      for (const k of arr) {
        if (f && !k.name.toLowerCase().includes(f)) continue;
        let g = groups.get(k.name);
        if (!g) groups.set(k.name, (g = { name: k.name, providers: [], available: 0 }));
        g.providers.push({ skill: k, server: s });
        if (k.available) g.available++;
      }
    }
    let out = [...groups.values()];
    if (onlyMissing) out = out.filter((g) => g.available === 0);
    out.sort((a, b) => {
      const ma = a.available === 0 ? 0 : 1;
      const mb = b.available === 0 ? 0 : 1;
      if (ma !== mb) return ma - mb;
      return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
    });
    for (const g of out) g.providers.sort((a, b) => byModule(a.server, b.server));
    return out;
  }
}
