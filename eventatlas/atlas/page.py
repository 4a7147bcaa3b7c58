"""The atlas as one offline HTML page: an interactive graph (no network, no library: inline SVG + JS).

Nodes are coloured by inventory (each can be hidden); edges are the declared links and each source's
best learned link per scorer (the scorer is chosen in the page). Clicking a node lists its links with
scores and the evidence sentences behind them and rings it and its neighbours; the search box lists the
types whose id or name matches; ``#q=<text>`` / ``#node=<node id>`` in the address opens one (a link
to a type, and how the headless-browser test drives the page). Wheel zooms, dragging pans. Layout: a
small seeded force simulation run in the page (springs on edges, repulsion on a grid), so the file
holds data, not coordinates.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ..escaping import html_text, script_json
from ..io import atomic_path

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>eventatlas atlas</title>
<style>
body{margin:0;font:13px system-ui,sans-serif;display:flex;height:100vh}
#side{width:380px;overflow:auto;padding:8px;border-right:1px solid #ccc}
#g{flex:1;cursor:grab} #g circle{cursor:pointer} #g circle.sel{stroke:#000;stroke-width:2.5}
#g circle.nb{stroke:#333;stroke-width:1} #hits div{cursor:pointer;color:#147} #hits div:hover{text-decoration:underline}
.ev{color:#555;margin-left:1em} .k{font-weight:bold} .sw{display:inline-block;width:10px;height:10px;border-radius:5px}
</style></head><body>
<div id="side"><h3>eventatlas atlas</h3>
<p>__SUMMARY__</p>
<label>learned links: <select id="method"></select></label>
<label><input type="checkbox" id="declared" checked> declared</label>
<div id="invs"></div>
<input id="q" placeholder="find a type (name or id)" style="width:95%" autocomplete="off"><div id="hits"></div>
<div id="info"></div>
<p style="color:#777">Wheel: zoom; drag: pan; click a node: its links and evidence. Link here with #q=&lt;type&gt;.</p></div>
<svg id="g"></svg>
<script id="data" type="application/json">__DATA__</script>
<script>
const D = JSON.parse(document.getElementById('data').textContent);
const svg = document.getElementById('g'), NS = 'http://www.w3.org/2000/svg';
const inv = [...new Set(D.nodes.map(n => n.inventory))];
const col = i => `hsl(${(inv.indexOf(i) * 137) % 360},65%,45%)`;
let seed = 1; const rnd = () => (seed = (seed * 16807) % 2147483647) / 2147483647;  // a seeded layout: same page, same picture
const byId = new Map(D.nodes.map((n, i) => [n.node_id, Object.assign(n, {i, x: rnd() * 800, y: rnd() * 600, vx: 0, vy: 0})]));
const methods = [...new Set(D.links.filter(l => l.kind === 'learned').map(l => l.method))];
const sel = document.getElementById('method');
for (const m of ['(none)', ...methods]) { const o = document.createElement('option'); o.textContent = m; sel.appendChild(o); }
if (methods.includes('combined')) sel.value = 'combined'; else if (methods.length) sel.value = methods[0];
const shown = new Set(inv), invBox = document.getElementById('invs');
for (const i of inv) {
  const l = document.createElement('label'), c = document.createElement('input');
  c.type = 'checkbox'; c.checked = true; c.dataset.inventory = i;
  c.onchange = () => { c.checked ? shown.add(i) : shown.delete(i); refresh(); };
  const n = D.nodes.filter(n => n.inventory === i).length;
  l.append(c, ' '); l.insertAdjacentHTML('beforeend', `<span class="sw" style="background:${col(i)}"></span> ${esc(i)} (${n})`);
  invBox.append(l, document.createElement('br'));
}
let E = [], V = [], selected = null;
function edges() {
  return D.links.filter(l => byId.has(l.source) && byId.has(l.target) &&
    shown.has(byId.get(l.source).inventory) && shown.has(byId.get(l.target).inventory) &&
    ((l.kind === 'declared' && document.getElementById('declared').checked) || (l.kind === 'learned' && l.rank === 1 && l.method === sel.value)));
}
function layout(steps) {
  for (let s = 0; s < steps; s++) {
    const cell = 40, grid = new Map();
    for (const n of V) { const k = Math.floor(n.x / cell) + ',' + Math.floor(n.y / cell); (grid.get(k) || grid.set(k, []).get(k)).push(n); }
    for (const n of V) {
      const gx = Math.floor(n.x / cell), gy = Math.floor(n.y / cell);
      for (let dx = -1; dx <= 1; dx++) for (let dy = -1; dy <= 1; dy++) for (const m of grid.get((gx + dx) + ',' + (gy + dy)) || []) {
        if (m === n) continue; let x = n.x - m.x, y = n.y - m.y, d2 = x * x + y * y + 0.01;
        if (d2 < cell * cell) { n.vx += x / d2 * 30; n.vy += y / d2 * 30; }
      }
    }
    for (const l of E) { const a = byId.get(l.source), b = byId.get(l.target); const x = b.x - a.x, y = b.y - a.y;
      a.vx += x * 0.01; a.vy += y * 0.01; b.vx -= x * 0.01; b.vy -= y * 0.01; }
    for (const n of V) { n.vx += (400 - n.x) * 0.001; n.vy += (300 - n.y) * 0.001; n.x += n.vx *= 0.6; n.y += n.vy *= 0.6; }
  }
}
let vb = null;
function setView(b) { vb = b; svg.setAttribute('viewBox', `${b.x} ${b.y} ${b.w} ${b.h}`); }
function draw() {
  svg.innerHTML = ''; const g = document.createElementNS(NS, 'g'); svg.appendChild(g);
  const near = new Set();
  if (selected) for (const l of E) { if (l.source === selected.node_id) near.add(l.target); if (l.target === selected.node_id) near.add(l.source); }
  for (const l of E) { const a = byId.get(l.source), b = byId.get(l.target), e = document.createElementNS(NS, 'line');
    e.setAttribute('x1', a.x); e.setAttribute('y1', a.y); e.setAttribute('x2', b.x); e.setAttribute('y2', b.y);
    e.setAttribute('stroke', l.kind === 'declared' ? '#bbb' : '#e66'); g.appendChild(e); }
  for (const n of V) { const c = document.createElementNS(NS, 'circle');
    c.setAttribute('cx', n.x); c.setAttribute('cy', n.y); c.setAttribute('r', 3 + Math.min(6, Math.log1p(n.n_mentions || 0)));
    c.setAttribute('fill', col(n.inventory)); c.dataset.node = n.node_id; c.onclick = () => show(n);
    if (selected === n) c.classList.add('sel'); else if (near.has(n.node_id)) c.classList.add('nb');
    const t = document.createElementNS(NS, 'title'); t.textContent = n.node_id + (n.name && n.name !== n.type_id ? ' (' + n.name + ')' : ''); c.appendChild(t); g.appendChild(c); }
  if (!vb) { const b = g.getBBox(); setView({x: b.x - 10, y: b.y - 10, w: b.width + 20, h: b.height + 20}); }
  svg.dataset.nodes = V.length; svg.dataset.edges = E.length;
}
function esc(s) { const d = document.createElement('div'); d.textContent = s == null ? '' : String(s);
  return d.innerHTML.replace(/"/g, '&quot;').replace(/'/g, '&#39;'); }  // text and quoted attribute values
function show(n) {
  selected = n; document.body.dataset.selected = n.node_id;
  const ls = D.links.filter(l => l.source === n.node_id || l.target === n.node_id)
    .sort((a, b) => (a.kind === b.kind ? 0 : a.kind === 'declared' ? -1 : 1) || (a.rank || 0) - (b.rank || 0)).slice(0, 80);
  let h = `<p class="k">${esc(n.node_id)}</p><p>${esc(n.name)} (${esc(n.kind)}, ${n.n_mentions || 0} mentions)</p><p>${esc(n.definition || '')}</p>`;
  for (const l of ls) {
    const out = l.source === n.node_id, other = out ? l.target : l.source;
    h += `<div class="link" data-kind="${esc(l.kind)}">${esc(l.kind === 'declared' ? l.relation : l.method + ' #' + l.rank)}: ${out ? '' : '&larr; '}` +
         `<a href="#node=${encodeURIComponent(other)}">${esc(other)}</a>` + (l.score != null ? ` (${l.score.toFixed(3)})` : '') + '</div>';
    for (const m of (l.evidence_mention_ids || []).slice(0, 2)) if (D.sentences[m]) h += `<div class="ev">${esc(D.sentences[m])}</div>`;
  }
  document.getElementById('info').innerHTML = h;
  draw();
}
function find(q) {
  q = q.toLowerCase();
  const exact = D.nodes.filter(n => n.node_id.toLowerCase() === q || n.type_id.toLowerCase() === q || (n.name || '').toLowerCase() === q);
  const part = D.nodes.filter(n => !exact.includes(n) && (n.type_id.toLowerCase().includes(q) || (n.name || '').toLowerCase().includes(q)));
  return exact.concat(part);
}
function search(q) {
  const hits = q.length < 2 ? [] : find(q), box = document.getElementById('hits');
  box.innerHTML = '';
  for (const n of hits.slice(0, 20)) { const d = document.createElement('div'); d.textContent = n.node_id; d.onclick = () => show(n); box.appendChild(d); }
  if (hits.length > 20) box.insertAdjacentHTML('beforeend', `<p>${hits.length - 20} more</p>`);
  box.dataset.hits = hits.length;
  if (hits.length) show(hits[0]);
}
document.getElementById('q').oninput = e => search(e.target.value.trim());
svg.onwheel = e => { e.preventDefault(); const f = e.deltaY > 0 ? 1.2 : 1 / 1.2, r = svg.getBoundingClientRect();
  const px = vb.x + (e.clientX - r.left) / r.width * vb.w, py = vb.y + (e.clientY - r.top) / r.height * vb.h;
  setView({x: px - (px - vb.x) * f, y: py - (py - vb.y) * f, w: vb.w * f, h: vb.h * f}); };
let drag = null;
svg.onmousedown = e => { drag = {x: e.clientX, y: e.clientY, vb: {...vb}}; };
window.onmouseup = () => { drag = null; };
svg.onmousemove = e => { if (!drag) return; const r = svg.getBoundingClientRect();
  setView({...drag.vb, x: drag.vb.x - (e.clientX - drag.x) / r.width * vb.w, y: drag.vb.y - (e.clientY - drag.y) / r.height * vb.h}); };
function refresh() { E = edges(); V = D.nodes.filter(n => shown.has(n.inventory)); layout(150); draw(); }
function fromHash() {
  const h = new URLSearchParams(location.hash.slice(1));
  if (h.get('node') && byId.has(h.get('node'))) show(byId.get(h.get('node')));
  else if (h.get('q')) { document.getElementById('q').value = h.get('q'); search(h.get('q')); }
}
sel.onchange = refresh; document.getElementById('declared').onchange = refresh; window.onhashchange = fromHash;
refresh(); fromHash();
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
    text = script_json(data, default=str, allow_nan=False)  # the data cannot end or hide its script element
    summary = html_text(f"{len(nodes)} nodes in {len({n['inventory'] for n in nodes})} inventories, "
                        f"{len(links)} links")
    return PAGE.replace("__SUMMARY__", summary).replace("__DATA__", text)


def write_html(nodes, links, out_dir: str | Path, sentences: Mapping[str, str] | None = None,
               name: str = "atlas.html") -> Path:
    path = Path(out_dir) / name
    with atomic_path(path) as tmp:
        tmp.write_text(html_page(nodes, links, sentences), encoding="utf-8")
    return path
