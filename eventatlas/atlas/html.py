"""The atlas as one offline HTML page: an interactive graph (no network, no library: inline SVG + JS).

Nodes are coloured by inventory; edges are the declared links and each source's best learned link per
scorer (the scorer is chosen in the page). Clicking a node lists its links with scores and the evidence
sentences behind them; the search box finds a type by name. Layout: a small force simulation run in the
page (springs on edges, repulsion on a grid), so the file stays a few hundred kilobytes of data.
"""
from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..io import atomic_path

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>eventatlas atlas</title>
<style>
body{margin:0;font:13px system-ui,sans-serif;display:flex;height:100vh}
#side{width:360px;overflow:auto;padding:8px;border-right:1px solid #ccc}
#g{flex:1}
.ev{color:#555;margin-left:1em} .k{font-weight:bold}
</style></head><body>
<div id="side"><h3>eventatlas atlas</h3>
<p>__SUMMARY__</p>
<label>learned links: <select id="method"></select></label>
<label><input type="checkbox" id="declared" checked> declared</label><br>
<input id="q" placeholder="find a type" style="width:95%"><div id="info"></div></div>
<svg id="g"></svg>
<script id="data" type="application/json">__DATA__</script>
<script>
const D = JSON.parse(document.getElementById('data').textContent);
const svg = document.getElementById('g'), NS = 'http://www.w3.org/2000/svg';
const inv = [...new Set(D.nodes.map(n => n.inventory))];
const col = i => `hsl(${(inv.indexOf(i) * 137) % 360},65%,45%)`;
const byId = new Map(D.nodes.map((n, i) => [n.node_id, Object.assign(n, {i, x: Math.random() * 800, y: Math.random() * 600, vx: 0, vy: 0})]));
const methods = [...new Set(D.links.filter(l => l.kind === 'learned').map(l => l.method))];
const sel = document.getElementById('method');
for (const m of ['(none)', ...methods]) { const o = document.createElement('option'); o.textContent = m; sel.appendChild(o); }
if (methods.includes('combined')) sel.value = 'combined'; else if (methods.length) sel.value = methods[0];
function edges() {
  return D.links.filter(l => byId.has(l.source) && byId.has(l.target) &&
    ((l.kind === 'declared' && document.getElementById('declared').checked) || (l.kind === 'learned' && l.rank === 1 && l.method === sel.value)));
}
let E = [];
function layout(steps) {
  const N = D.nodes;
  for (let s = 0; s < steps; s++) {
    const cell = 40, grid = new Map();
    for (const n of N) { const k = Math.floor(n.x / cell) + ',' + Math.floor(n.y / cell); (grid.get(k) || grid.set(k, []).get(k)).push(n); }
    for (const n of N) {
      const gx = Math.floor(n.x / cell), gy = Math.floor(n.y / cell);
      for (let dx = -1; dx <= 1; dx++) for (let dy = -1; dy <= 1; dy++) for (const m of grid.get((gx + dx) + ',' + (gy + dy)) || []) {
        if (m === n) continue; let x = n.x - m.x, y = n.y - m.y, d2 = x * x + y * y + 0.01;
        if (d2 < cell * cell) { n.vx += x / d2 * 30; n.vy += y / d2 * 30; }
      }
    }
    for (const l of E) { const a = byId.get(l.source), b = byId.get(l.target); const x = b.x - a.x, y = b.y - a.y;
      a.vx += x * 0.01; a.vy += y * 0.01; b.vx -= x * 0.01; b.vy -= y * 0.01; }
    for (const n of N) { n.vx += (400 - n.x) * 0.001; n.vy += (300 - n.y) * 0.001; n.x += n.vx *= 0.6; n.y += n.vy *= 0.6; }
  }
}
function draw() {
  svg.innerHTML = ''; const g = document.createElementNS(NS, 'g'); svg.appendChild(g);
  for (const l of E) { const a = byId.get(l.source), b = byId.get(l.target), e = document.createElementNS(NS, 'line');
    e.setAttribute('x1', a.x); e.setAttribute('y1', a.y); e.setAttribute('x2', b.x); e.setAttribute('y2', b.y);
    e.setAttribute('stroke', l.kind === 'declared' ? '#bbb' : '#e66'); g.appendChild(e); }
  for (const n of D.nodes) { const c = document.createElementNS(NS, 'circle');
    c.setAttribute('cx', n.x); c.setAttribute('cy', n.y); c.setAttribute('r', 3 + Math.min(6, Math.log1p(n.n_mentions || 0)));
    c.setAttribute('fill', col(n.inventory)); c.onclick = () => show(n);
    const t = document.createElementNS(NS, 'title'); t.textContent = n.node_id; c.appendChild(t); g.appendChild(c); }
  const b = g.getBBox(); svg.setAttribute('viewBox', `${b.x - 10} ${b.y - 10} ${b.width + 20} ${b.height + 20}`);
}
function esc(s) { const d = document.createElement('div'); d.textContent = s == null ? '' : String(s); return d.innerHTML; }
function show(n) {
  const ls = D.links.filter(l => l.source === n.node_id || l.target === n.node_id).sort((a, b) => (a.rank || 0) - (b.rank || 0)).slice(0, 60);
  let h = `<p class="k">${esc(n.node_id)}</p><p>${esc(n.name)} (${esc(n.kind)}, ${n.n_mentions || 0} mentions)</p><p>${esc(n.definition || '')}</p>`;
  for (const l of ls) {
    const other = l.source === n.node_id ? l.target : '&larr; ' + esc(l.source);
    h += `<div>${esc(l.kind === 'declared' ? l.relation : l.method + ' #' + l.rank)}: ${l.source === n.node_id ? esc(other) : other}` +
         (l.score != null ? ` (${l.score.toFixed(3)})` : '') + '</div>';
    for (const m of (l.evidence_mention_ids || []).slice(0, 2)) if (D.sentences[m]) h += `<div class="ev">${esc(D.sentences[m])}</div>`;
  }
  document.getElementById('info').innerHTML = h;
}
document.getElementById('q').oninput = e => { const q = e.target.value.toLowerCase(); if (q.length < 2) return;
  const n = D.nodes.find(n => (n.name || '').toLowerCase() === q || n.type_id.toLowerCase() === q) ||
            D.nodes.find(n => (n.name || '').toLowerCase().includes(q)); if (n) show(n); };
function refresh() { E = edges(); layout(150); draw(); }
sel.onchange = refresh; document.getElementById('declared').onchange = refresh;
refresh();
</script></body></html>
"""


def html_page(nodes: Sequence[Mapping[str, Any]], links: Sequence[Mapping[str, Any]],
              sentences: Mapping[str, str] | None = None) -> str:
    def clean(v: Any) -> Any:
        return None if isinstance(v, float) and v != v else v

    keep = ("node_id", "inventory", "kind", "type_id", "name", "definition", "n_mentions")
    data = {"nodes": [{k: clean(n.get(k)) for k in keep} for n in nodes],
            "links": [{k: clean(l.get(k)) for k in ("source", "target", "relation", "kind", "score", "rank", "method",
                                              "evidence_mention_ids")} for l in links],
            "sentences": dict(sentences or {})}
    text = json.dumps(data, default=str, allow_nan=False)
    text = text.replace("</", "<\\/")  # the data cannot close its script element
    summary = html.escape(f"{len(nodes)} nodes in {len({n['inventory'] for n in nodes})} inventories, "
                          f"{len(links)} links")
    return PAGE.replace("__SUMMARY__", summary).replace("__DATA__", text)


def write_html(nodes, links, out_dir: str | Path, sentences: Mapping[str, str] | None = None) -> Path:
    path = Path(out_dir) / "atlas.html"
    with atomic_path(path) as tmp:
        tmp.write_text(html_page(nodes, links, sentences), encoding="utf-8")
    return path
