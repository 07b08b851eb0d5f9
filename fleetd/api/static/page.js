// fleetd live page. Reads GET /v1/whoami, GET /v1/fleet (long-poll on sinceVersion/wait) and
// GET /v1/incidents with the token as a bearer header; the operator's page also reads
// GET /v1/fleet?scope=all (every fleetd sharing the journal) every few seconds. The token lives in sessionStorage only:
// never in a URL, never in a cookie. Every value from fleetd is written with textContent, never
// as HTML.
"use strict";
(() => {
  const KEY = "fleetd.token";
  const WAIT_SECONDS = 10; // an idle page still rereads the journal (delivery states) this often
  const DEADLINE_MS = (WAIT_SECONDS + 15) * 1000; // every request ends: answered or aborted
  const JOURNAL_EVERY_MS = 2000; // the journal is read at most this often; fleet_list in between
  const RETRY_MIN_MS = 1000;
  const RETRY_MAX_MS = 8000;
  const INSTANCES_EVERY_MS = 5000; // scope=all answers at once (no long-poll): read this often
  let generation = 0; // a sign-in or sign-out ends the loop of the one before
  let current = null; // the AbortController of the fleet request in flight
  let across = 0; // the generation whose operator page follows the other instances

  const $ = (id) => document.getElementById(id);

  function cell(row, label, text, cls) {
    const td = document.createElement("td");
    td.dataset.label = label;
    td.textContent = text === null || text === undefined || text === "" ? "–" : String(text);
    if (cls) td.className = cls;
    row.appendChild(td);
    return td;
  }

  function fill(tableId, rows, empty, build) {
    const body = $(tableId).tBodies[0];
    const fresh = document.createElement("tbody");
    if (rows.length === 0) {
      const tr = document.createElement("tr");
      const td = cell(tr, "", empty, "empty");
      td.colSpan = $(tableId).tHead.rows[0].cells.length;
      fresh.appendChild(tr);
    }
    for (const item of rows) fresh.appendChild(build(item));
    body.replaceWith(fresh);
  }

  function setStatus(state, text) {
    const status = $("status");
    status.dataset.state = state;
    status.textContent = text;
  }

  function healthClass(state) {
    if (!state) return "";
    if (/GONE|NEVER_READY|ORPHANED|UNREACHABLE|DOWN|ERROR|LOST/.test(state)) return "bad";
    if (/STALL|STRANDED|UNRESPONSIVE|UNKNOWN|AT_RISK|MUTE|AMBIGUOUS/.test(state)) return "warn";
    return "ok";
  }

  function renderMembers(members) {
    fill("members", members, "no members", (m) => {
      const tr = document.createElement("tr");
      tr.dataset.session = m.sessionId;
      const health = (m.health && m.health.state) || "";
      cell(tr, "Name", m.name);
      cell(tr, "Profile", m.profile);
      cell(tr, "Owner", m.owner);
      cell(tr, "State", m.state);
      cell(tr, "herdr", m.liveStatus);
      cell(tr, "Turn", m.turn);
      cell(tr, "Health", health, healthClass(health));
      return tr;
    });
  }

  function renderLeads(leads) {
    fill("leads", leads, "no leads", (l) => {
      const tr = document.createElement("tr");
      tr.dataset.lead = l.name;
      const health = l.health || {};
      cell(tr, "Name", l.name);
      cell(tr, "Agent", l.agent);
      cell(tr, "herdr", l.liveStatus);
      cell(tr, "Inbox", l.inboxDepth);
      cell(tr, "Health", health.state, healthClass(health.state));
      cell(tr, "Holds for others", health.assignedForeignIncidents || 0);
      return tr;
    });
  }

  function routingText(i) {
    const r = i.routing || {};
    const to = r.route === "human" ? "a person" : r.recipient || i.recipient || "nobody yet";
    const parts = [to];
    if (r.reason) parts.push(r.reason);
    if (r.generation !== undefined) parts.push("generation " + r.generation);
    if (r.onBehalfOf) parts.push("for " + r.onBehalfOf);
    return parts.join(" · ");
  }

  function renderIncidents(rows, note) {
    $("incidents-note").textContent = note;
    fill("incidents", rows, "no incidents", (i) => {
      const tr = document.createElement("tr");
      tr.dataset.incident = i.id;
      tr.dataset.status = i.status || "open";
      const open = (i.status || "open") === "open";
      cell(tr, "Status", i.status || "open", open ? "bad" : "ok");
      cell(tr, "State", i.state, healthClass(i.state));
      cell(tr, "Subject", i.target ? i.target + " (" + i.subject + ")" : i.subject);
      cell(tr, "Severity", i.severity);
      cell(tr, "Routing", routingText(i));
      cell(tr, "Delivery", i.delivery || "–");
      cell(tr, "Opened", i.openedAt ? new Date(i.openedAt).toLocaleTimeString() : "");
      return tr;
    });
  }

  function term(dl, name, value, cls) {
    const dt = document.createElement("dt");
    dt.textContent = name;
    const dd = document.createElement("dd");
    dd.textContent = value === null || value === undefined || value === "" ? "–" : String(value);
    if (cls) dd.className = cls;
    dl.append(dt, dd);
  }

  function reach(value) {
    if (value === null || value === undefined) return "not tried yet";
    return value ? "reachable" : "unreachable";
  }

  function endpointText(dep) {
    if (!dep) return "–";
    const parts = [dep.kind + (dep.allDown ? ": all down" : "")];
    for (const e of dep.endpoints || []) {
      let text = "#" + e.index + (e.active ? " (in use)" : "") + " " + reach(e.reachable);
      if (e.breaker && e.breaker !== "closed") text += ", breaker " + e.breaker;
      if (e.standing && e.standing !== "active") text += ", " + e.standing;
      parts.push(text);
    }
    return parts.join(" · ");
  }

  function renderDeps(view) {
    const dl = document.createElement("dl");
    dl.id = "deps";
    const cov = view.healthCoverage || {};
    term(dl, "Coverage", cov.status, cov.status === "full" ? "ok" : "warn");
    if (cov.reason) term(dl, "Why", cov.reason);
    term(dl, "Detection", cov.detection);
    term(dl, "Peer routing", cov.peerRouting);
    term(dl, "Human escalation", cov.humanEscalation);
    const link = view.controlLink || {};
    term(dl, "herdr link", link.state, link.state === "up" ? "ok" : "bad");
    const inbox = view.inbox || {};
    term(dl, "Inbox reachable", inbox.reachable ? "yes" : "no", inbox.reachable ? "ok" : "bad");
    const deps = view.dependencies || {};
    for (const [name, dep] of [["Inbox broker", deps.inbox], ["Webhook", deps.webhook]]) {
      term(dl, name, endpointText(dep), dep && dep.allDown ? "bad" : "");
    }
    for (const p of deps.providers || []) {
      const text = reach(p.reachable) + (p.lastError ? " · last error " + p.lastError : "");
      term(dl, "Provider " + p.name, text, p.reachable === false ? "bad" : "");
    }
    for (const m of deps.models || []) {
      const seat = "Model " + m.profile + " (" + m.model + ")";
      term(dl, seat, m.verdict, m.verdict === "unavailable" ? "bad" : "");
    }
    $("deps").replaceWith(dl);
  }

  function render(view) {
    $("view").hidden = false;
    const members = view.members || [];
    const live = members.filter((m) => m.state !== "released").length;
    $("summary").textContent =
      live + " live member(s), " + (view.agents || []).length + " herdr agent(s), " +
      (view.incidents || []).length + " open incident(s) · view " + view.viewVersion +
      " · " + new Date(view.generatedAt).toLocaleTimeString();
    renderMembers(members);
    renderLeads(view.leads || []);
    renderDeps(view);
  }

  function ago(seconds) {
    if (seconds === null || seconds === undefined) return "–";
    const s = Math.round(seconds);
    if (s < 120) return s + " s";
    if (s < 7200) return Math.round(s / 60) + " min";
    return Math.round(s / 3600) + " h";
  }

  function line(parent, tag, text, cls) {
    const el = document.createElement(tag);
    el.textContent = text;
    if (cls) el.className = cls;
    parent.appendChild(el);
    return el;
  }

  // One other fleetd sharing the journal, from its last published summary (what
  // `fleetd status --all` shows of it): host, age of its last renewal, DOWN, coverage, leads with
  // health, members by lead, open incidents with routing.
  function instanceBlock(part) {
    const box = document.createElement("div");
    box.className = "instance";
    box.dataset.instance = part.instance;
    box.dataset.down = part.down ? "true" : "false";
    const title = line(box, "h3", part.instance + " ");
    const state = line(title, "span", part.down ? "DOWN" : "up", part.down ? "bad" : "ok");
    state.dataset.role = "state";
    const meta = part.host + " · renewed " + ago(part.ageSeconds) + " ago";
    line(box, "p", part.down ? meta + " · stopped renewing: its last summary" : meta, "note");
    const fleet = part.summary;
    if (!fleet) {
      line(box, "p", "no summary to show (" + (part.summaryProblem || "no summary") + ")", "warn");
      return box;
    }
    const dl = document.createElement("dl");
    const link = (fleet.controlLink || {}).state || "unknown";
    const cov = fleet.healthCoverage || {};
    const coverage = cov.status || "off";
    term(dl, "herdr link", link, link === "up" ? "ok" : "bad");
    term(dl, "Coverage", coverage + (cov.reason ? " · " + cov.reason : ""),
      coverage === "full" ? "ok" : "warn");
    const counts = Object.entries(fleet.membersByLead || {}).sort();
    const byLead = counts.map(([name, n]) => name + " " + n).join(" · ");
    term(dl, "Members", String(fleet.membersTotal || 0) + (byLead ? ": " + byLead : ""));
    box.appendChild(dl);
    const leads = line(box, "ul", "");
    leads.dataset.role = "leads";
    for (const l of fleet.leads || []) {
      const li = line(leads, "li", "lead " + l.name + " (" + (l.liveStatus || "–") + "): ");
      const health = (l.health && l.health.state) || "no health yet";
      line(li, "span", health, healthClass(l.health && l.health.state));
    }
    const incidents = fleet.incidents || [];
    const heading = incidents.length + " open incident(s)";
    const left = (fleet.membersLeftOut || 0) + (fleet.incidentsLeftOut || 0);
    line(box, "p", left ? heading + " · " + left + " rows left out of its summary" : heading);
    const list = line(box, "ul", "");
    list.dataset.role = "incidents";
    for (const i of incidents) {
      const li = line(list, "li", "");
      li.dataset.incident = i.id;
      line(li, "span", i.state, healthClass(i.state));
      li.append(" " + i.subject + " (" + i.severity + ", " + ago(i.ageSeconds) + ") → ");
      li.append(routingText(i));
    }
    return box;
  }

  function renderInstances(result) {
    const others = (result.instances || []).filter((p) => !p.answering);
    const journalRead = result.journal || {};
    let note = others.length + " other fleetd(s) sharing the journal · " + (result.down || 0) +
      " down";
    if (journalRead.read === "failed") {
      note = "the journal's instance rows cannot be read now" +
        (journalRead.reason ? " (" + journalRead.reason + ")" : "");
    }
    $("instances-note").textContent = note;
    $("instances-note").className = journalRead.read === "failed" || result.down ? "bad" : "note";
    const list = document.createElement("div");
    list.id = "instances-list";
    for (const part of others) list.appendChild(instanceBlock(part));
    $("instances-list").replaceWith(list);
  }

  // The operator's view across instances. Not shared (SQLite: one fleetd), the first answer ends
  // it and the section stays hidden; a failed read says so in the section and tries again.
  async function followInstances(token, mine) {
    while (mine === generation) {
      let answer = null;
      try {
        answer = await get("/v1/fleet?scope=all", token, false);
      } catch {
        answer = null;
      }
      if (mine !== generation) return;
      const result = answer && answer.status === 200 && answer.body && answer.body.ok
        ? answer.body.result
        : null;
      if (result && result.journal && result.journal.shared === false) {
        $("instances").hidden = true;
        return;
      }
      $("instances").hidden = false;
      if (result) {
        renderInstances(result);
      } else {
        const why = answer ? errorCode(answer) : "fleetd unreachable";
        $("instances-note").textContent = "the other instances cannot be read now (" + why + ")";
        $("instances-note").className = "bad";
      }
      await sleep(INSTANCES_EVERY_MS);
    }
  }

  function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
  }

  async function get(path, token, main = true) {
    const controller = new AbortController();
    if (main) current = controller; // sign-out cuts the fleet's long-poll short
    const timer = setTimeout(() => controller.abort(), DEADLINE_MS);
    try {
      const res = await fetch(path, {
        headers: { Authorization: "Bearer " + token, Accept: "application/json" },
        cache: "no-store",
        credentials: "omit",
        referrerPolicy: "no-referrer",
        signal: controller.signal,
      });
      const body = res.status === 304 ? null : await res.json().catch(() => null);
      return { status: res.status, body };
    } finally {
      clearTimeout(timer);
    }
  }

  class Refused extends Error {}

  function check(answer) {
    if (answer.status === 401) throw new Refused("token refused: sign in again");
    if (answer.status === 403) throw new Refused("this token may not read the fleet");
    return answer.status !== 304 && answer.body && answer.body.ok ? answer.body.result : null;
  }

  function errorCode(answer) {
    return answer.body && answer.body.error ? answer.body.error.code : "HTTP " + answer.status;
  }

  // fleet_list's incidents are health's word on what is open now; the journal records each change
  // a moment later (its delivery pass). An incident not yet in the journal shows from fleet_list;
  // one the journal still has open but that fleet_list listed and no longer does is resolved.
  const seenOpen = new Set();
  let journal = null; // the last journal answer: {rows, note}
  let journalAt = 0;

  function forgetIncidents() {
    journal = null;
    seenOpen.clear();
  }

  function merge(rows, view) {
    const live = new Map((view.incidents || []).map((i) => [i.id, i]));
    for (const id of live.keys()) seenOpen.add(id);
    const known = new Set(rows.map((r) => r.id));
    for (const id of seenOpen) if (!known.has(id) && !live.has(id)) seenOpen.delete(id);
    const gone = (r) => r.status === "open" && seenOpen.has(r.id) && !live.has(r.id);
    const fresh = [...live.values()].filter((i) => !known.has(i.id));
    return fresh
      .map((i) => ({ ...i, status: "open" }))
      .concat(rows.map((r) => (gone(r) ? { ...r, status: "resolved" } : r)));
  }

  async function loadIncidents(token, view) {
    if (journal === null || Date.now() - journalAt >= JOURNAL_EVERY_MS) {
      journalAt = Date.now();
      const answer = await get("/v1/incidents", token);
      const result = check(answer);
      if (result) {
        const note = result.truncated
          ? "the newest " + result.limit + " shown"
          : "open, and resolved in the last 24 hours";
        journal = { rows: result.incidents, note };
      } else {
        const why = "the incident journal cannot be read now (" + errorCode(answer) + ")";
        journal = { rows: [], note: why + ": open incidents only" };
      }
    }
    renderIncidents(merge(journal.rows, view), journal.note);
  }

  async function follow(token, mine) {
    let version = null;
    let retry = RETRY_MIN_MS;
    while (mine === generation) {
      try {
        if (version === null) {
          forgetIncidents(); // a new sign-in, or fleetd back (perhaps another run): read afresh
          if ($("status").dataset.state !== "unreachable") setStatus("connecting", "connecting…");
          const who = check(await get("/v1/whoami", token));
          if (who) {
            $("who").hidden = false;
            $("who").textContent = "signed in as " + who.role + (who.lead ? " " + who.lead : "");
            if (who.role === "operator" && across !== mine) {
              across = mine;
              followInstances(token, mine);
            }
          }
        }
        const query = version === null ? "" : "?sinceVersion=" + version + "&wait=" + WAIT_SECONDS;
        const answer = await get("/v1/fleet" + query, token);
        if (mine !== generation) return;
        const view = check(answer);
        if (answer.status === 304) {
          setStatus("live", "live");
        } else if (!view) {
          setStatus("error", "fleetd answered " + errorCode(answer) + "; retrying");
          await sleep(retry);
          retry = Math.min(retry * 2, RETRY_MAX_MS);
        } else {
          if (view.viewVersion !== version) render(view);
          await loadIncidents(token, view);
          version = view.viewVersion;
          setStatus("live", "live");
          retry = RETRY_MIN_MS;
        }
      } catch (err) {
        if (mine !== generation) return;
        if (err instanceof Refused) {
          signOut(err.message);
          return;
        }
        setStatus("unreachable", "fleetd unreachable; retrying");
        version = null;
        await sleep(retry);
        retry = Math.min(retry * 2, RETRY_MAX_MS);
      }
    }
  }

  function start(token) {
    generation += 1;
    $("signin").hidden = true;
    $("signout").hidden = false;
    follow(token, generation);
  }

  function signOut(message) {
    generation += 1;
    if (current) current.abort();
    sessionStorage.removeItem(KEY);
    $("view").hidden = true;
    $("instances").hidden = true;
    $("who").hidden = true;
    $("signout").hidden = true;
    $("signin").hidden = false;
    setStatus(message ? "unauthorized" : "signed-out", message || "signed out");
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("signin").addEventListener("submit", (event) => {
      event.preventDefault();
      const input = $("token");
      const token = input.value.trim();
      input.value = "";
      if (!token) return;
      sessionStorage.setItem(KEY, token);
      start(token);
    });
    $("signout").addEventListener("click", () => signOut(""));
    const saved = sessionStorage.getItem(KEY);
    if (saved) start(saved);
  });
})();
