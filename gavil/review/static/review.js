// The image review page: keyboard-first accept / reject (with a reason) / undo, several reviewers
// sharing one queue (the server's decisions file). See gavil/review/web.py and docs/review.md.
"use strict";
const $ = (id) => document.getElementById(id);
const state = { items: [], reasons: [], focus: 0, rejecting: null, mine: [], safety: null };

// The optional safety score (punsafe, 0-1) only orders the queue: highest first, unscored last, ties by
// concept. It never decides anything; untrained (random-weight) scores are never the default order.
function bySafety(a, b) {
  const x = a.punsafe ?? -1, y = b.punsafe ?? -1;
  return y - x || a.concept.localeCompare(b.concept);
}

function shown() {
  const f = $("filter").value, s = $("source").value;
  const list = state.items.filter((i) => (f === "all" || i.state === f) && (!s || i.source === s));
  return $("sort").value === "safety" ? list.slice().sort(bySafety) : list;
}

function say(text) { $("message").textContent = text || ""; }

function render() {
  const list = shown();
  state.focus = Math.max(0, Math.min(state.focus, list.length - 1));
  const grid = $("grid");
  grid.replaceChildren(...list.map((i, n) => {
    const tile = document.createElement("figure");
    tile.className = `tile ${i.state}` + (n === state.focus ? " focused" : "");
    tile.dataset.sha = i.sha256;
    tile.dataset.concept = i.concept;
    tile.dataset.state = i.state;
    const img = document.createElement("img");
    img.src = `/img/${i.sha256}`;
    img.alt = i.concept;
    const cap = document.createElement("figcaption");
    const c = document.createElement("div"); c.className = "concept"; c.textContent = i.concept;
    const st = document.createElement("div"); st.className = "state";
    st.textContent = i.state === "pending" ? `pending · ${i.source}` : `${i.state}${i.reason ? ": " + i.reason : ""} · ${i.who}`;
    cap.append(c, st);
    if (i.punsafe !== null && i.punsafe !== undefined) {
      const sc = document.createElement("div"); sc.className = "safety";
      sc.textContent = `safety score ${i.punsafe.toFixed(2)}${state.safety.untrained ? " (untrained)" : ""}`;
      cap.append(sc);
    }
    tile.append(img, cap);
    tile.addEventListener("click", () => { state.focus = n; render(); });
    return tile;
  }));
  $("progress").textContent = `reviewed ${state.reviewed} / left ${state.left}`;
  const f = grid.querySelector(".focused");
  if (f) f.scrollIntoView({ block: "nearest" });
}

function takeSafety(safety) {
  const first = state.safety === null;
  state.safety = safety;
  $("sort-box").hidden = !safety.scored;
  const note = $("safety-note");
  note.hidden = !safety.scored;
  note.textContent = safety.untrained
    ? `Safety scores from ${safety.model}: random weights (untrained), not a real score; the queue keeps its concept order.`
    : `Safety scores from ${safety.model} (zero-shot, 0-1): they order the queue, they decide nothing.`;
  if (!safety.scored) $("sort").value = "concept";
  else if (first) $("sort").value = safety.untrained ? "concept" : "safety";
}

function take(data) {
  state.items = data.items; state.reasons = data.reasons;
  state.reviewed = data.reviewed; state.left = data.left;
  takeSafety(data.safety);
  const sources = [...new Set(data.items.map((i) => i.source))].sort();
  const sel = $("source"), keep = sel.value;
  if (sel.options.length - 1 !== sources.length) {
    sel.replaceChildren(new Option("any", ""), ...sources.map((s) => new Option(s, s)));
    sel.value = keep;
  }
  render();
}

async function load() {
  const r = await fetch("/api/queue");
  const data = await r.json();
  if (!r.ok) { say(data.error); return; }
  take(data);
}

async function send(item, decision, reason) {
  const who = $("who").value.trim();
  if (!who) { say("Type your name as reviewer first."); $("who").focus(); return false; }
  const r = await fetch("/api/decide", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ who, decision, reason: reason || "", sha256: item.sha256 }),
  });
  const data = await r.json();
  if (!r.ok) { say(data.error); return false; }
  say(`${decision === "undo" ? "undid" : decision + "ed"}: ${item.concept}`);
  take(data);
  return true;
}

function openReasons(item) {
  state.rejecting = item;
  $("reject-concept").textContent = item.concept;
  const all = [...state.reasons, "other"];
  $("reason-list").replaceChildren(...all.map((r) => { const li = document.createElement("li"); li.textContent = r; return li; }));
  $("other-box").hidden = true; $("other").value = "";
  $("reasons").hidden = false;
}

function closeReasons() { state.rejecting = null; $("reasons").hidden = true; }

async function reject(reason) {
  const item = state.rejecting;
  closeReasons();
  if (await send(item, "reject", reason)) state.mine.push(item);
}

async function undo() {
  const item = state.mine.pop();
  if (!item) { say("Nothing of yours to undo."); return; }
  if (!(await send(item, "undo", ""))) state.mine.push(item);
}

async function onKey(e) {
  if (e.target === $("other")) {
    if (e.key === "Enter" && $("other").value.trim()) { e.preventDefault(); await reject("other: " + $("other").value.trim()); }
    if (e.key === "Escape") closeReasons();
    return;
  }
  if (e.target.tagName === "INPUT" || e.target.tagName === "SELECT") return;
  if (state.rejecting) {
    const n = parseInt(e.key, 10);
    if (n >= 1 && n <= state.reasons.length) await reject(state.reasons[n - 1]);
    else if (n === state.reasons.length + 1) { $("other-box").hidden = false; $("other").focus(); e.preventDefault(); }
    else if (e.key === "Escape") closeReasons();
    return;
  }
  const list = shown(), item = list[state.focus];
  if (e.key === "ArrowRight" || e.key === "k") { state.focus += 1; render(); }
  else if (e.key === "ArrowLeft" || e.key === "j") { state.focus -= 1; render(); }
  else if (e.key === "a" && item) { if (await send(item, "accept", "")) state.mine.push(item); }
  else if (e.key === "r" && item) openReasons(item);
  else if (e.key === "u") await undo();
}

$("who").value = localStorage.getItem("gavil-review-who") || "";
$("who").addEventListener("change", () => localStorage.setItem("gavil-review-who", $("who").value.trim()));
$("who").addEventListener("keydown", (e) => { if (e.key === "Enter") $("who").blur(); });
$("filter").addEventListener("change", () => { state.focus = 0; render(); });
$("source").addEventListener("change", () => { state.focus = 0; render(); });
$("sort").addEventListener("change", () => { state.focus = 0; render(); });
document.addEventListener("keydown", onKey);
load();
setInterval(load, 10000); // other reviewers' decisions
