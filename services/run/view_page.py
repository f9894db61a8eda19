"""The run viewer's page: one self-contained HTML file (inline CSS, JavaScript and images; no CDN,
works offline) rendering what `services.run.view_data.build_view` returns.

Sections: the curves (the run's PNGs) with a per-round table, the phase-time breakdown, the task
pool (each slot's versions and decisions with their reasons), and a trajectory browser — filters
by round, task, split, outcome and judge disagreement, 50 rows a page, and a click shows each
step's observation, prompt, response, action, next observation, the m votes with their reasoning,
the oracle label, the advantage and the consistency rewards.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

__all__ = ["render_page", "PAGE_SIZE"]

PAGE_SIZE = 50
"""Trajectory rows per page."""

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1f3a5f;color:#fff;padding:10px 18px}header h1{font-size:18px;margin:0}
main{padding:0 18px 40px}section{margin-top:22px}h2{font-size:16px;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ddd;padding:3px 6px;text-align:right}
th{background:#eee}td.l,th.l{text-align:left}.imgs img{max-width:440px;margin:4px;border:1px solid #ddd}
tr.traj{cursor:pointer}tr.traj:hover{background:#e8f0fe}tr.sel{background:#d2e3fc}
.won{color:#137333}.lost{color:#b3261e}.flag{color:#b06000}pre{white-space:pre-wrap;margin:2px 0;
background:#f1f3f4;padding:4px;font-size:12px}.step{border:1px solid #ccc;margin:8px 0;padding:6px;background:#fff}
.vote{margin:2px 0 2px 12px}.good{color:#137333}.bad{color:#b3261e}.filters label{margin-right:12px}
#browser{display:flex;gap:14px;align-items:flex-start}#browser>table{flex:0 0 auto}
#detail{flex:1 1 auto;min-width:380px;max-height:92vh;overflow:auto;position:sticky;top:4px}.note{color:#555}
"""

_JS = r"""
const D = JSON.parse(document.getElementById('data').textContent);
const PAGE = %(page)d;
let page = 0, shown = [];
const $ = id => document.getElementById(id);
const esc = s => String(s ?? '').replace(/[&<>"]/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
const fmt = (v, d=3) => v === null || v === undefined || Number.isNaN(v) ? '—' : (typeof v === 'number' ? +v.toFixed(d) : esc(v));
const label = v => v > 0 ? '<span class="good">good</span>' : v < 0 ? '<span class="bad">bad</span>' : 'none';
function rounds() {
  const keys = ['policy/success_heldout','policy/success_train','reward/step_accuracy','env/in_band_share',
                'env/accepted_total','policy/invalid_answer_rate','time/round_s'];
  let h = '<tr><th>round</th>' + keys.map(k => `<th>${esc(k)}</th>`).join('') + '</tr>';
  for (const r of D.rounds) h += `<tr><td>${r.round}</td>` + keys.map(k => `<td>${fmt(r[k])}</td>`).join('') + '</tr>';
  $('rounds').innerHTML = h;
  const ph = Object.keys(D.rounds[0] || {}).filter(k => k.startsWith('time/') && k.endsWith('_s'));
  let p = '<tr><th>round</th>' + ph.map(k => `<th>${esc(k.slice(5))}</th>`).join('') + '</tr>';
  for (const r of D.rounds) p += `<tr><td>${r.round}</td>` + ph.map(k => `<td>${fmt(r[k], 1)}</td>`).join('') + '</tr>';
  $('phases').innerHTML = p;
}
function images() {
  $('curves').innerHTML = Object.entries(D.images).filter(([k]) => k !== 'phases')
    .map(([k, src]) => `<img alt="${esc(k)}" title="${esc(k)}" src="${src}">`).join('');
  if (D.images.phases) $('phase-img').innerHTML = `<img alt="phases" src="${D.images.phases}">`;
}
function pool() {
  let h = '<tr><th class="l">slot</th><th class="l">versions</th><th class="l">decisions (round: kind, direction, versions, acc of parent → candidate, reason)</th></tr>';
  for (const s of D.pool) {
    const d = s.decisions.map(e => `r${e.round}: <b>${esc(e.kind)}</b> ${esc(e.direction)} v${e.from_version}→v${e.candidate_version}` +
      (e.kind === 'accepted' || e.kind === 'rejected' ? ` acc ${fmt(e.acc_prev,2)} → ${fmt(e.acc_new,2)}` : '') +
      (e.reason ? ` — ${esc(e.reason)}` : '')).join('<br>');
    h += `<tr><td class="l">${esc(s.slot)}</td><td class="l">${s.versions.join(', ')}</td><td class="l">${d}</td></tr>`;
  }
  $('pool').innerHTML = D.pool.length ? h : '<tr><td class="l">no task-pool decision recorded</td></tr>';
}
function filters() {
  const rs = [...new Set(D.trajectories.map(t => t.round))].sort((a, b) => a - b);
  $('f-round').innerHTML = '<option value="">all</option>' + rs.map(r => `<option>${r}</option>`).join('');
  const sp = [...new Set(D.trajectories.map(t => t.split))].sort();
  $('f-split').innerHTML = '<option value="">all</option>' + sp.map(s => `<option>${esc(s)}</option>`).join('');
  for (const id of ['f-round','f-split','f-outcome','f-disagree']) $(id).onchange = () => { page = 0; table(); };
  $('f-task').oninput = () => { page = 0; table(); };
  $('prev').onclick = () => { if (page > 0) { page--; table(); } };
  $('next').onclick = () => { if ((page + 1) * PAGE < shown.length) { page++; table(); } };
}
function table() {
  const r = $('f-round').value, sp = $('f-split').value, o = $('f-outcome').value, dis = $('f-disagree').value,
        task = $('f-task').value.trim();
  shown = D.trajectories.filter(t => (r === '' || t.round === +r) && (sp === '' || t.split === sp) &&
    (o === '' || t.outcome === +o) && (task === '' || t.slot.includes(task)) &&
    (dis === '' || (dis === 'split' ? t.split_votes : dis === 'oracle' ? t.judge_vs_oracle : (t.split_votes || t.judge_vs_oracle))));
  $('traj-count').textContent = shown.length;
  let h = '<tr><th class="l">trajectory</th><th>round</th><th class="l">task</th><th>v</th><th class="l">split</th>' +
          '<th>outcome</th><th>steps</th><th>policy v</th><th>RM v</th><th class="l">judge</th></tr>';
  for (const t of shown.slice(page * PAGE, (page + 1) * PAGE)) {
    const flags = (t.split_votes ? 'votes split ' : '') + (t.judge_vs_oracle ? 'judge≠oracle' : '');
    h += `<tr class="traj" data-id="${esc(t.id)}"><td class="l">${esc(t.id)}</td><td>${t.round}</td><td class="l">${esc(t.slot)}</td>` +
         `<td>${t.task_version}</td><td class="l">${esc(t.split)}${t.candidate ? ' (candidate)' : ''}</td>` +
         `<td class="${t.outcome > 0 ? 'won' : 'lost'}">${t.outcome > 0 ? 'won' : 'lost'}</td><td>${t.steps}</td>` +
         `<td>${t.policy_version}</td><td>${t.rm_version}</td><td class="l flag">${flags}</td></tr>`;
  }
  $('trajs').innerHTML = h;
  $('page').textContent = shown.length ? `rows ${page * PAGE + 1}–${Math.min((page + 1) * PAGE, shown.length)} of ${shown.length}` : 'no trajectory matches';
  for (const row of document.querySelectorAll('tr.traj')) row.onclick = () => detail(row.dataset.id, row);
}
function detail(id, row) {
  for (const r of document.querySelectorAll('tr.sel')) r.classList.remove('sel');
  if (row) row.classList.add('sel');
  const t = D.trajectories.find(x => x.id === id), steps = D.details[id] || [];
  let h = `<h3>${esc(id)}</h3><div class="note">task ${esc(t.slot)} v${t.task_version}, ${esc(t.split)}, ` +
          `<span class="${t.outcome > 0 ? 'won' : 'lost'}">${t.outcome > 0 ? 'won' : 'lost'}</span>, policy v${t.policy_version}, RM v${t.rm_version}</div>` +
          `<pre>${esc(t.task_text)}</pre>`;
  for (const s of steps) {
    h += `<div class="step"><b>step ${s.index}</b> — action <code>${esc(s.action || '(invalid)')}</code>` +
         ` · oracle: <span class="oracle">${label(s.oracle)}</span> · mean vote ${fmt(s.mean_vote, 2)}` +
         ` · advantage ${fmt(s.advantage)}<div>observation<pre>${esc(s.observation)}</pre></div>` +
         `<details><summary>prompt</summary><pre>${esc(s.prompt)}</pre></details>` +
         `<div>response<pre>${esc(s.response)}</pre></div><div>next observation<pre>${esc(s.next_observation)}</pre></div>` +
         `<div>votes (m=${s.votes.length})` + s.votes.map((v, l) => `<div class="vote">${label(v.value)} ` +
         `(${v.value}) consistency reward ${s.consistency ? fmt(s.consistency[l]) : '—'}<pre>${esc(v.text)}</pre></div>`).join('') +
         '</div></div>';
  }
  $('detail').innerHTML = h;
}
rounds(); images(); pool(); filters(); table();
"""


def _finite(value: Any) -> Any:
    """NaN and infinities (a metric not measured that round) as null: JSON has no NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def render_page(view: dict[str, Any], refresh_s: int = 0) -> str:
    """The HTML page for ``view``; ``refresh_s`` > 0 reloads it that often (a live run being served)."""
    data = json.dumps(_finite(view), ensure_ascii=False, allow_nan=False, default=str).replace("</", "<\\/")
    done = len(view["rounds"])
    status = ("finished" if view["finished"] else "running (this page reloads itself)" if refresh_s else "not finished")
    kept = len(view["trajectories"])
    limit_note = (f"{kept} of {view['total_trajectories']} trajectories shown (every "
                  f"{-(-view['total_trajectories'] // max(kept, 1))}th; `--limit` sets the cap, {view['limit']} now)"
                  if kept < view["total_trajectories"] else f"all {kept} trajectories")
    events_note = "" if view["events_recorded"] else (
        "<p class='note'>This run has no events/ directory (recorded since `logging.events`): only its curves "
        "are shown.</p>")
    meta = f'<meta http-equiv="refresh" content="{refresh_s}">' if refresh_s and not view["finished"] else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">{meta}<title>RLAnything run {html.escape(view['run'])}</title>
<style>{_CSS}</style></head>
<body><header><h1>RLAnything run {html.escape(view['run'])}</h1>
<div>{done} of {view['rounds_planned']} rounds, {status}; {limit_note}</div></header>
<main>{events_note}
<section><h2>Curves</h2><div class="imgs" id="curves"></div><table id="rounds"></table></section>
<section><h2>Where the time goes (seconds per phase and round)</h2><div class="imgs" id="phase-img"></div>
<table id="phases"></table></section>
<section><h2>Task pool</h2><table id="pool"></table></section>
<section><h2>Trajectories (<span id="traj-count">0</span>)</h2>
<div class="filters"><label>round <select id="f-round"></select></label>
<label>task id contains <input id="f-task" size="18"></label>
<label>split <select id="f-split"></select></label>
<label>outcome <select id="f-outcome"><option value="">all</option><option value="1">won</option>
<option value="-1">lost</option></select></label>
<label>judge <select id="f-disagree"><option value="">all</option><option value="any">any disagreement</option>
<option value="split">votes split</option><option value="oracle">judge ≠ oracle</option></select></label>
<button id="prev">◀</button> <span id="page"></span> <button id="next">▶</button></div>
<div id="browser"><table id="trajs"></table><div id="detail"><p class="note">Click a trajectory to see its steps.</p></div></div></section>
</main>
<script type="application/json" id="data">{data}</script>
<script>{_JS % {"page": PAGE_SIZE}}</script>
</body></html>
"""
