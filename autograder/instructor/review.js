"use strict";
const token = new URLSearchParams(location.search).get("token") || "";
const TEXT = JSON.parse(document.getElementById("text").textContent);
let data = null, qi = 0, li = 0;
const $ = (id) => document.getElementById(id);
// a fixed string of the page in its language, {name} filled from values
const t = (key, values) => TEXT[key].replace(/\{(\w+)\}/g, (all, name) => (values && name in values ? values[name] : all));
const keyOf = (q, e) => e.learner + "\t" + q.assignment + "\t" + q.key;
function scoreOf(q, e) { return data.scores[keyOf(q, e)]; }
// a score given for another answer (the learner resubmitted) does not count: the answer waits again
function changed(q, e) { const s = scoreOf(q, e); return !!(s && s.answer && s.answer !== e.digest); }
function graded(q, e) { return !!scoreOf(q, e) && !changed(q, e); }
function say(text, cls) { const s = $("status"); s.textContent = text; s.className = cls || ""; }
// HTML the server rendered from Markdown: the course's text as written, a learner's escaped, math as
// MathML; the page's policy runs no script but this one, so nothing in it can run
function rendered(id, markup, fallback) { const box = $(id); if (markup) box.innerHTML = markup; else box.textContent = fallback; }
async function load() {
  const r = await fetch("/api/state", {headers: {"X-Review-Token": token}});
  if (!r.ok) { $("title").textContent = t("open_printed"); return; }
  data = await r.json();
  if (!data.questions.length) { $("title").textContent = t("nothing", {out: data.out}); return; }
  show();
}
function listRow(q, x, i) {
  const row = document.createElement("div"), name = document.createElement("span"), score = document.createElement("span");
  const s = scoreOf(q, x);
  name.className = "name"; name.textContent = x.student; score.className = "score";
  row.className = "row " + (graded(q, x) ? "done" : changed(q, x) ? "todo changed" : "todo") + (i === li ? " on" : "");
  if (graded(q, x)) score.textContent = s.points + " / " + q.max_points;
  else if (changed(q, x)) {
    const old = document.createElement("s"); old.textContent = s.points;
    score.append(t("changed_mark") + " ", old); row.title = t("changed_title");
  } else score.textContent = "\u2013 / " + q.max_points;
  row.append(name);
  // a blank answer waiting for its score says so in the list, before "0 to blank answers" is pressed
  if (x.blank && !graded(q, x)) {
    const mark = document.createElement("span"); mark.className = "mark"; mark.textContent = t("blank_mark");
    row.classList.add("blank"); row.title = t("blank_title"); row.append(mark);
  }
  row.append(score); row.onclick = () => { li = i; show(); };
  return row;
}
function show() {
  const q = data.questions[qi], e = q.entries[li];
  $("title").textContent = t("title", {n: qi + 1, total: data.questions.length, assignment: q.assignment, key: q.key});
  const done = q.entries.filter((x) => graded(q, x)).length;
  const all = data.questions.reduce((n, x) => n + x.entries.length, 0);
  const allDone = data.questions.reduce((n, x) => n + x.entries.filter((y) => graded(x, y)).length, 0);
  $("progress").textContent = t("progress", {done: done, total: q.entries.length, all_done: allDone, all: all});
  $("progress").dataset.done = done; $("progress").dataset.total = q.entries.length;
  rendered("prompt", q.prompt_html, q.prompt); rendered("model", q.model_html, t("none_written"));
  rendered("rubric", q.rubric_html, t("none_written"));
  $("max").textContent = t("of_max", {max: q.max_points});
  const side = $("side"); side.replaceChildren(...q.entries.map((x, i) => listRow(q, x, i)));
  if (!e) { $("who").textContent = t("nobody"); $("answer").textContent = ""; return; }
  $("who").textContent = t("who", {student: e.student, n: li + 1, total: q.entries.length});
  const a = $("answer");
  if (e.answer === null) { a.textContent = t("not_stored"); a.className = "box blank"; }
  else if (e.blank) { a.textContent = t("blank"); a.className = "box blank"; }
  else { rendered("answer", e.answer_html, e.answer); a.className = "box"; }
  const s = scoreOf(q, e);
  $("points").value = s ? s.points : ""; $("comment").value = s ? s.comment : "";
  $("changed").textContent = changed(q, e) ? t("changed_note", {points: s.points}) : "";
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
    say(t("saved", {student: e.student, points: $("points").value.trim() || t("cleared")}), "ok");
    if (next && li < q.entries.length - 1) li += 1;
    document.activeElement.blur(); show();
  } catch (err) { say(t("not_saved", {error: err.message}), "err"); }
}
async function zeroBlank() {
  const q = data.questions[qi]; let n = 0;
  try {
    for (const e of q.entries) if (e.blank && !graded(q, e)) { await post(q, e, "0", ""); n += 1; }
    say(t(n === 1 ? "zero_given_one" : "zero_given", {n: n}), "ok"); show();
  } catch (err) { say(t("not_saved", {error: err.message}), "err"); }
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
