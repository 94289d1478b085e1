
"use strict";
const token = new URLSearchParams(location.search).get("token") || "";
let data = null, qi = 0, li = 0;
const $ = (id) => document.getElementById(id);
const keyOf = (q, e) => e.learner + "\t" + q.assignment + "\t" + q.key;
function scoreOf(q, e) { return data.scores[keyOf(q, e)]; }
// a score given for another answer (the learner resubmitted) does not count: the answer waits again
function changed(q, e) { const s = scoreOf(q, e); return !!(s && s.answer && s.answer !== e.digest); }
function graded(q, e) { return !!scoreOf(q, e) && !changed(q, e); }
function say(text, cls) { const s = $("status"); s.textContent = text; s.className = cls || ""; }
async function load() {
  const r = await fetch("/api/state", {headers: {"X-Review-Token": token}});
  if (!r.ok) { $("title").textContent = "Open the address the review command printed."; return; }
  data = await r.json();
  if (!data.questions.length) { $("title").textContent = "Nothing to grade by hand in " + data.out; return; }
  show();
}
function show() {
  const q = data.questions[qi], e = q.entries[li];
  $("title").textContent = "Question " + (qi + 1) + " of " + data.questions.length + ": " + q.assignment + " / " + q.key;
  const done = q.entries.filter((x) => graded(q, x)).length;
  const all = data.questions.reduce((n, x) => n + x.entries.length, 0);
  const allDone = data.questions.reduce((n, x) => n + x.entries.filter((y) => graded(x, y)).length, 0);
  $("progress").textContent = done + " of " + q.entries.length + " graded for this question; " + allDone + " of " + all + " in all";
  $("progress").dataset.done = done; $("progress").dataset.total = q.entries.length;
  $("prompt").textContent = q.prompt; $("model").textContent = q.model_answer || "(none written)";
  $("rubric").textContent = q.rubric || "(none written)";
  $("max").textContent = "of " + q.max_points;
  const side = $("side"); side.replaceChildren();
  q.entries.forEach((x, i) => {
    const d = document.createElement("div");
    d.textContent = x.student; d.className = (graded(q, x) ? "done" : changed(q, x) ? "todo changed" : "todo") + (i === li ? " on" : "");
    if (changed(q, x)) d.title = "the answer changed since it was graded: grade it again";
    d.onclick = () => { li = i; show(); }; side.appendChild(d);
  });
  if (!e) { $("who").textContent = "nobody answered"; $("answer").textContent = ""; return; }
  $("who").textContent = e.student + " (" + (li + 1) + " of " + q.entries.length + ")";
  const a = $("answer");
  if (e.answer === null) { a.textContent = "(the answer was not stored: grade this learner again with --regrade)"; a.className = "box blank"; }
  else if (e.blank) { a.textContent = "(no answer: the cell is as released)"; a.className = "box blank"; }
  else { a.textContent = e.answer; a.className = "box"; }
  const s = scoreOf(q, e);
  $("points").value = s ? s.points : ""; $("comment").value = s ? s.comment : "";
  $("changed").textContent = changed(q, e) ? "The answer changed since it was graded (" + s.points + " points, not counted): grade it again." : "";
  const on = side.children[li]; if (on) on.scrollIntoView({block: "nearest"});
}
async function post(q, e, points, comment) {
  const r = await fetch("/api/score", {method: "POST", headers: {"Content-Type": "application/json", "X-Review-Token": token},
    body: JSON.stringify({assignment: q.assignment, key: q.key, learner: e.learner, points: points, comment: comment})});
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  if (body.stored) data.scores[keyOf(q, e)] = body.stored; else delete data.scores[keyOf(q, e)];
}
async function save(next) {
  const q = data.questions[qi], e = q.entries[li];
  if (!e) return;
  try {
    await post(q, e, $("points").value.trim(), $("comment").value.trim());
    say("saved " + e.student + ": " + ($("points").value.trim() || "cleared"), "ok");
    if (next && li < q.entries.length - 1) li += 1;
    document.activeElement.blur(); show();
  } catch (err) { say("not saved: " + err.message, "err"); }
}
async function zeroBlank() {
  const q = data.questions[qi]; let n = 0;
  try {
    for (const e of q.entries) if (e.blank && !graded(q, e)) { await post(q, e, "0", ""); n += 1; }
    say("gave 0 to " + n + " blank answer" + (n === 1 ? "" : "s"), "ok"); show();
  } catch (err) { say("not saved: " + err.message, "err"); }
}
$("save").onclick = () => save(true); $("zero").onclick = zeroBlank;
$("form").addEventListener("submit", (ev) => ev.preventDefault());
document.addEventListener("keydown", (ev) => {
  if (!data || !data.questions.length || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const inField = ev.target.tagName === "INPUT";
  const q = data.questions[qi];
  if (ev.key === "Enter") { ev.preventDefault(); save(true); return; }
  if (ev.key === "Escape") { document.activeElement.blur(); return; }
  // the points field takes digits and a dot; a letter there is a command (c: comment, j/k, n/p)
  if (inField && !(ev.target.id === "points" && /^[a-z]$/.test(ev.key))) return;
  const move = (d) => { li = Math.max(0, Math.min(q.entries.length - 1, li + d)); show(); };
  const question = (d) => { qi = Math.max(0, Math.min(data.questions.length - 1, qi + d)); li = 0; show(); };
  if (ev.key === "j" || ev.key === "ArrowDown" || ev.key === "ArrowRight") { ev.preventDefault(); move(1); }
  else if (ev.key === "k" || ev.key === "ArrowUp" || ev.key === "ArrowLeft") { ev.preventDefault(); move(-1); }
  else if (ev.key === "n") question(1);
  else if (ev.key === "p") question(-1);
  else if (ev.key === "c") { ev.preventDefault(); $("comment").focus(); }
  else if (/^[0-9]$/.test(ev.key)) { ev.preventDefault(); const p = $("points"); p.value = ev.key; p.focus(); }
});
load();
