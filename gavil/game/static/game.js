"use strict";
// Every text from the server is set with textContent: nothing is ever parsed as HTML.
const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("gavil-token");
const state = { createTask: null, createIid: null, solveTask: null, sel: new Set(), status: null, consent: null };

async function api(method, path, body) {
  const opt = { method, headers: { "Content-Type": "application/json" } };
  if (token) opt.headers.Authorization = "Bearer " + token;
  if (body !== undefined) opt.body = JSON.stringify(body);
  const r = await fetch(path, opt);
  const data = await r.json().catch(() => ({ error: "unexpected answer from the server" }));
  if (!r.ok) throw new Error(data.error || "HTTP " + r.status);
  return data;
}

function say(text) { $("msg").textContent = text || ""; }
function show(id) { for (const p of document.querySelectorAll(".panel")) p.hidden = p.id !== id; say(""); }

function grid(el, images, max) {
  el.replaceChildren();
  state.sel = new Set();
  images.forEach((sha, i) => {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "tile";
    b.dataset.pos = String(i);
    const img = document.createElement("img");
    img.src = "/img/" + sha;
    img.alt = "image " + (i + 1);
    b.appendChild(img);
    b.addEventListener("click", () => {
      if (state.sel.has(i)) state.sel.delete(i);
      else if (state.sel.size < max) state.sel.add(i);
      b.classList.toggle("selected", state.sel.has(i));
    });
    el.appendChild(b);
  });
}

function mark(el, positions, cls) {
  for (const b of el.children) if (positions.includes(Number(b.dataset.pos))) b.classList.add(cls);
}

async function loadStatus() {
  const s = await api("GET", "/api/status");
  state.status = s;
  const banner = $("rival-status");
  banner.textContent = (s.paused ? "The game is paused. " : "") + s.rival_message;
  banner.classList.toggle("warn", s.rival_status !== "ok");
  $("code-label").textContent = s.identity === "shared_code" ? "Join code" : "Your invitation code";
  roundMenu(s);
  return s;
}

function roundMenu(s) {
  // every round of the store (closed ones too), read anew with each status: the leaderboard's choice
  const pick = $("lb-round");
  const chosen = pick.value;
  const options = [new Option("all rounds", "")];
  for (const r of s.rounds) options.push(new Option("round " + r + (r === s.round ? " (now)" : ""), String(r)));
  pick.replaceChildren(...options);
  pick.value = s.rounds.map(String).includes(chosen) ? chosen : "";
}

function roundLine(s) {
  // which round the spymaster's associations go into, or that none is being collected
  if (s.round !== null) return "Your associations go into round " + s.round + ".";
  return "No round is being collected right now: new associations are not taken; you can still solve.";
}

// The consent text is shown as text (textContent in a <pre>), never as HTML. Work is asked for only
// once the player accepted the version shown now; a changed text (another version) asks again.
function showConsent(c) {
  show("consent");
  state.consent = c;
  $("consent-text").textContent = c.text;
  const changed = c.accepted_version && c.accepted_version !== c.version;
  $("consent-why").textContent = c.withdrawn ? "" : c.accepted ? "You accepted this text." :
    changed ? "The consent text changed since you accepted it: please read it again before more work." :
    "Please read this before your first task.";
  $("consent-state").textContent = c.withdrawn ? "You withdrew your consent on " + c.withdrawn_at +
    " (UTC): this account takes no more work." : c.accepted ? "Accepted on " + c.accepted_at + " (UTC)." : "";
  $("consent-accept").hidden = c.accepted || c.withdrawn;
  $("consent-withdraw").hidden = c.withdrawn;
  $("consent-confirm").hidden = true;
}

async function consentOk() {
  // true when the player may work; otherwise the consent page is shown
  const c = await api("GET", "/api/consent");
  if (c.accepted && !c.withdrawn) { state.consent = c; return true; }
  showConsent(c);
  return false;
}

async function loadConsent() { showConsent(await api("GET", "/api/consent")); }

async function acceptConsent() {
  try {
    const c = await api("POST", "/api/consent", { version: state.consent.version });
    state.consent = c;
    show("choose");
  } catch (e) { say(e.message); }
}

async function withdrawConsent() {
  try {
    showConsent(await api("POST", "/api/consent/withdraw", { confirm: true }));
    say("Consent withdrawn.");
  } catch (e) { say(e.message); }
}

async function loadCreate() {
  show("create");
  $("create-result").textContent = "";
  $("next-create").hidden = true;
  $("submit-create").disabled = false;
  $("cue").value = "";
  $("create-help").textContent = "";
  $("create-grid").replaceChildren();
  if (!(await consentOk())) return;  // the panel is cleared first: nothing of an earlier task shows
  const s = await loadStatus();
  $("create-round").textContent = roundLine(s);
  $("create-round").classList.toggle("warn", s.round === null);
  if (s.round === null) { state.createTask = null; $("submit-create").disabled = true; return; }
  const { task } = await api("POST", "/api/create/task");
  state.createTask = task;
  state.createIid = null;
  if (!task) { $("create-help").textContent = "No candidate set is left for you: try solving."; $("create-grid").replaceChildren(); return; }
  const given = task.cues_given.length ? " Your first cue for these images: " + task.cues_given.join(", ") + " (give a different one)." : "";
  $("create-help").textContent = "Cue " + (task.cues_given.length + 1) + " of 2: give a one-word cue and select " +
    task.k_min + " to " + task.k_max + " images it relates to, so that other players find them but the AI does not." + given;
  grid($("create-grid"), task.images, task.k_max);
}

function showRival(r) {
  const out = $("create-result");
  if (r.rival_status === "no_weights") {
    out.textContent = "Saved “" + r.cue + "”. No rival model is loaded, so no fool-the-AI score was recorded.";
  } else if (r.rival_state === "failed") {
    out.textContent = "Saved “" + r.cue + "”. The AI could not answer, so no fool-the-AI score was recorded.";
  } else if (r.rival_pending) {
    out.textContent = "Saved “" + r.cue + "”. The AI is choosing its images…";
  } else {
    mark($("create-grid"), r.rival, "rival");
    const label = r.rival_status === "untrained" ? " (UNTRAINED model: random weights)" : "";
    out.textContent = "Saved “" + r.cue + "”. The AI picked images " + r.rival.map((i) => i + 1).join(", ") +
      ". Fool-the-AI score" + label + ": " + r.score_fool_the_ai;
  }
}

const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

async function pollRival(iid, cue) {
  // the rival answers in the background: ask again until it has (the Scores page shows it later too)
  for (let i = 0; i < 120; i++) {
    await sleep(Math.min(250 * (i + 1), 2000));
    if (!state.createTask || state.createIid !== iid) return;
    const r = await api("GET", "/api/create/" + encodeURIComponent(iid));
    if (!r.rival_pending) { showRival(r); return; }
  }
  $("create-result").textContent = "Saved “" + cue + "”. The AI is still busy: see its score on the Scores page.";
}

async function submitCreate() {
  const t = state.createTask;
  if (!t) return;
  try {
    const r = await api("POST", "/api/create", { task_id: t.task_id, cue: $("cue").value, selection: [...state.sel] });
    $("submit-create").disabled = true;
    state.createIid = r.instance_id;
    showRival(r);
    $("next-create").hidden = false;
    $("next-create").textContent = r.cues_given < 2 ? "Give the second cue" : "Next images";
    if (r.rival_pending) pollRival(r.instance_id, r.cue).catch((e) => say(e.message));
  } catch (e) { say(e.message); }
}

async function loadSolve() {
  show("solve");
  $("solve-result").textContent = "";
  $("next-solve").hidden = true;
  $("submit-solve").disabled = false;
  $("solve-cue").textContent = "";
  $("solve-grid").replaceChildren();
  resetFlag();
  if (!(await consentOk())) return;
  const { task } = await api("POST", "/api/solve/task");
  state.solveTask = task;
  $("flag-box").hidden = !task;
  if (!task) { $("solve-cue").textContent = "(nothing to solve right now)"; $("solve-k").textContent = "0"; $("solve-grid").replaceChildren(); return; }
  $("solve-cue").textContent = task.cue;
  $("solve-k").textContent = String(task.k);
  grid($("solve-grid"), task.images, task.k);
}

async function submitSolve() {
  const t = state.solveTask;
  if (!t) return;
  try {
    const r = await api("POST", "/api/solve", { lease_id: t.lease_id, selection: [...state.sel] });
    $("submit-solve").disabled = true;
    mark($("solve-grid"), r.associations, "answer");
    $("solve-result").textContent =
      r.jaccard === null || r.jaccard === undefined ? "Answer recorded." : "Your Jaccard score: " + Math.trunc(100 * r.jaccard) + "%";
    $("next-solve").hidden = false;
  } catch (e) { say(e.message); }
}

function resetFlag() {
  $("flag-box").hidden = true;
  $("flag-category").value = "offensive";
  $("flag-reason").value = "";
  $("flag-btn").disabled = false;
  $("flag-status").textContent = "";
}

async function submitFlag() {
  const t = state.solveTask;
  if (!t) return;
  try {
    await api("POST", "/api/flag", { instance_id: t.instance_id, category: $("flag-category").value, reason: $("flag-reason").value });
    $("flag-btn").disabled = true;
    $("submit-solve").disabled = true;  // a flagged association is not answered; Next brings another
    $("next-solve").hidden = false;
    $("flag-status").textContent = "flagged, thanks";
  } catch (e) { say(e.message); }
}

function table(el, rows) {
  el.replaceChildren();
  for (const row of rows) {
    const tr = document.createElement("tr");
    for (const cell of row) {
      const td = document.createElement(row === rows[0] ? "th" : "td");
      td.textContent = cell === null || cell === undefined ? "–" : String(cell);
      tr.appendChild(td);
    }
    el.appendChild(tr);
  }
}

async function loadScores() {
  show("scores");
  const me = await api("GET", "/api/me");
  const unit = me.bonus_unit;
  table($("dashboard"), [
    ["associations created", "fool-the-AI", "solvable-by-humans %", "associations solved", "your mean Jaccard %", "bonus (" + unit + ")"],
    [me.associations_created, me.fool_the_ai ?? (me.fool_the_ai_untrained !== null ? me.fool_the_ai_untrained + " (untrained)" : null),
      me.solvable_by_humans, me.associations_solved, me.solver_jaccard, me.bonus],
  ]);
  await loadStatus();  // the round menu as the store has it now
  await loadLeaderboard();
}

let boardAsked = 0;

async function loadLeaderboard() {
  const r = $("lb-round").value;  // "": every round
  const asked = ++boardAsked;
  const lb = await api("GET", "/api/leaderboard" + (r ? "?round=" + encodeURIComponent(r) : ""));
  if (asked !== boardAsked) return;  // a later choice of round is being loaded: keep its answer
  table($("leaderboard"), [["player", "created", "fool-the-AI", "solvable %", "solved", "bonus"],
    ...lb.rows.map((r) => [r.name, r.associations_created, r.fool_the_ai, r.solvable_by_humans, r.associations_solved, r.bonus])]);
}

function joined(name) {
  $("join").hidden = true;
  $("nav").hidden = false;
  $("whoami").textContent = "Playing as " + name;
}

async function join() {
  try {
    const r = await api("POST", "/api/join", { code: $("code").value, name: $("name").value });
    token = r.token;
    sessionStorage.setItem("gavil-token", token);
    sessionStorage.setItem("gavil-name", r.name);
    joined(r.name);
    if (await consentOk()) show("choose");  // a creation task is reserved only when the player asks for one
  } catch (e) { say(e.message); }
}

function guard(fn) { return () => fn().catch((e) => say(e.message)); }

document.addEventListener("DOMContentLoaded", () => {
  $("join-btn").addEventListener("click", join);
  $("mode-create").addEventListener("click", guard(loadCreate));
  $("mode-solve").addEventListener("click", guard(loadSolve));
  $("mode-scores").addEventListener("click", guard(loadScores));
  $("submit-create").addEventListener("click", submitCreate);
  $("submit-solve").addEventListener("click", submitSolve);
  $("flag-btn").addEventListener("click", submitFlag);
  $("next-create").addEventListener("click", guard(loadCreate));
  $("next-solve").addEventListener("click", guard(loadSolve));
  $("lb-round").addEventListener("change", guard(loadLeaderboard));
  $("mode-consent").addEventListener("click", guard(loadConsent));
  $("consent-accept").addEventListener("click", acceptConsent);
  $("consent-withdraw").addEventListener("click", () => { $("consent-confirm").hidden = false; });
  $("consent-withdraw-no").addEventListener("click", () => { $("consent-confirm").hidden = true; });
  $("consent-withdraw-yes").addEventListener("click", withdrawConsent);
  loadStatus().catch((e) => say(e.message));
  if (token) {
    joined(sessionStorage.getItem("gavil-name") || "");
    consentOk().then((ok) => { if (ok) show("choose"); }).catch((e) => say(e.message));
  }
});
