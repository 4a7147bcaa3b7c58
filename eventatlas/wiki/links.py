"""Wikitext -> plain paragraphs with link spans, and fast link harvesting.

One renderer (:func:`render_nodes`, over mwparserfromhell nodes) defines the plain
text: templates, refs, tables, comments, files, categories and interwiki links
vanish; bold/italic and inline HTML keep their contents; a wikilink becomes its
anchor text. Paragraphs are the blank-line separated blocks of the rendered page,
headings are boundaries, and list/table/indented blocks are not prose.

:func:`harvest_full` parses every page completely (the reference).
:func:`harvest` gives the same links faster: a regex pre-scan drops pages without a
candidate link target; the raw text is cut into top-level blocks (blank lines
outside templates, tables, comments and HTML blocks, where rendering can only
produce paragraph breaks anyway); blocks that are all list lines, or whose candidate
links sit only inside templates/tables/refs/comments (which never render), are
skipped; a block that is plain text plus plain wikilinks (and headings, lists,
entities) is rendered by a small exact renderer; only the rest is parsed with
mwparserfromhell. Equality with the full parse is tested on the real pages.
"""
from __future__ import annotations

import html.entities as html_entities
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

import mwparserfromhell
from mwparserfromhell.nodes import Argument, Comment, ExternalLink, Heading, HTMLEntity, Tag, Template, Text, Wikilink

from .backend import normalize_title

# Namespaces and prefixes whose links are not article links (en/de/fr/es + canonical).
NON_ARTICLE_PREFIXES = {
    "file", "image", "media", "category", "template", "wikipedia", "wp", "help", "portal", "user", "talk", "special",
    "draft", "module", "mediawiki", "wikt", "wiktionary", "commons", "c", "s", "q", "n", "v", "b", "m", "meta", "species",
    "wikisource", "wikiquote", "wikinews", "wikibooks", "wikiversity", "wikivoyage", "d", "wikidata", "mw", "phab",
    "datei", "bild", "kategorie", "vorlage", "benutzer", "diskussion", "hilfe", "fichier", "catégorie", "modèle",
    "utilisateur", "discussion", "aide", "archivo", "imagen", "categoría", "plantilla", "usuario", "ayuda", "anexo",
}
WIKINEWS_TO_WIKIPEDIA = ("w", "wikipedia")
_LANG_PREFIX = re.compile(r"^[a-z]{2,3}(?:-[a-z]{2,8})*$")

DROP_TAGS = {"ref", "references", "gallery", "math", "chem", "timeline", "score", "graph", "syntaxhighlight", "source",
             "pre", "templatedata", "imagemap", "mapframe", "maplink", "table", "noinclude", "includeonly", "hiero"}
BREAK_TAGS = {"br", "hr"}

# Candidate pre-scan: raw link targets ([[Target...]] and, for Wikinews, {{w|Target...}}).
_WIKILINK_TARGET = re.compile(r"\[\[\s*([^\[\]|\n{}]*)")
_W_TEMPLATE_TARGET = re.compile(r"\{\{\s*[wW]\s*\|\s*([^|{}\n]*)")
# Bold/italic quote runs. MediaWiki closes them at each line end; mwparserfromhell lets an
# unbalanced run swallow text across paragraphs (and across a <ref>). The renderer keeps only
# their contents anyway, so they are removed before parsing, in every path alike.
_QUOTE_RUNS = re.compile(r"'{2,}")
_TEXT_NOISE = re.compile(r"'{2,}|<ref[^>]*/>|<ref[^>]*>.*?</ref>|</?ref[^>]*>", re.S | re.I)
_PARA_SPLIT = re.compile(r"\n[ \t]*\n")
_HTML_BLOCK = r"(?:blockquote|div|gallery|ref|poem|center|references|timeline|math|pre|syntaxhighlight|source|score|imagemap|table|span|small|big|nowiki|code|chem|graph|mapframe|font|p|ul|ol|li|dl)"
_BLOCK_TOKENS = re.compile(r"\{\{|\}\}|^\{\||^\|\}|<!--|\n[ \t]*\n|<" + _HTML_BLOCK + r"\b[^<>]*?(?<!/)>|</" + _HTML_BLOCK + r"\s*>",
                           re.M | re.I)


@dataclass(frozen=True)
class Link:
    """One wikilink found in a prose paragraph; ``paragraph[start:end] == anchor``."""

    target: str  # normalised target title as written (before redirect resolution)
    anchor: str
    paragraph: str
    start: int
    end: int


@lru_cache(maxsize=1 << 17)
def classify_target(raw: str, wikinews: bool = False) -> str | None:
    """Normalised article title a link target denotes, or None for files/categories/interwiki."""
    t = raw.strip()
    leading_colon = t.startswith(":")
    if leading_colon:
        t = t[1:].strip()
    if ":" in t:
        prefix, rest = t.split(":", 1)
        p = prefix.strip().lower()
        if wikinews and p in WIKINEWS_TO_WIKIPEDIA:
            return normalize_title(rest) if rest.strip() and ":" not in rest.strip()[:1] else None
        if p in NON_ARTICLE_PREFIXES or _LANG_PREFIX.match(p):
            return None
    if wikinews:  # plain [[...]] links on Wikinews point to Wikinews pages, not Wikipedia articles
        return None
    if not t or t.startswith("#"):
        return None  # same-page section link
    return normalize_title(t)


def _w_template_link(tpl: Template) -> tuple[str, str] | None:
    """``{{w|Title|text}}`` -> (title, anchor)."""
    if str(tpl.name).strip().lower() != "w" or not tpl.params:
        return None
    title = str(tpl.params[0].value).strip()
    anchor = str(tpl.params[1].value).strip() if len(tpl.params) > 1 else title
    if not title:
        return None
    return normalize_title(title), (render_inline(anchor) or title)


def render_inline(wikitext: str) -> str:
    parts: list[str] = []
    render_nodes(mwparserfromhell.parse(wikitext).nodes, parts, None, False, None)
    return "".join(parts).strip()


PARA_BREAK = "\n\n"


def render_nodes(nodes, out: list[str], spans: list | None, wikinews: bool, targets: set[str] | None, pos: list[int] | None = None) -> None:
    """Append the plain text of ``nodes`` to ``out``; record (start, end, target, anchor) of candidate links in ``spans``.

    ``pos`` is a one-element running length of ``out`` (avoids re-joining).
    """
    if pos is None:
        pos = [sum(len(s) for s in out)]

    def emit(s: str) -> None:
        if s:
            out.append(s)
            pos[0] += len(s)

    for node in nodes:
        if isinstance(node, Text):
            # markup the parser left as text (unbalanced quotes, refs inside broken italics):
            # MediaWiki never shows it, and cleaning it keeps block and page parses equal
            emit(_TEXT_NOISE.sub("", node.value) if ("'" in node.value or "<" in node.value) else node.value)
        elif isinstance(node, Wikilink):
            target = classify_target(str(node.title), wikinews)
            if target is None:
                continue  # files (with captions), categories, interwiki, other namespaces
            if node.text is not None and str(node.text).strip():
                sub: list[str] = []
                render_nodes(node.text.nodes, sub, None, wikinews, None)
                anchor = "".join(sub).replace("\n", " ").strip()
            else:
                anchor = str(node.title).strip().lstrip(":").split("#", 1)[0].strip()
                if wikinews and ":" in anchor:
                    anchor = anchor.split(":", 1)[1].strip()
            if not anchor:
                continue
            start = pos[0]
            emit(anchor)
            if spans is not None and (targets is None or target in targets):
                spans.append((start, pos[0], target, anchor))
        elif isinstance(node, Template):
            if wikinews:
                w = _w_template_link(node)
                if w:
                    start = pos[0]
                    emit(w[1])
                    if spans is not None and (targets is None or w[0] in targets):
                        spans.append((start, pos[0], w[0], w[1]))
            # other templates render nothing (infoboxes, citations, navboxes)
        elif isinstance(node, Tag):
            tag = str(node.tag).strip().lower()
            if tag in DROP_TAGS or node.wiki_markup in ("{|",):
                continue
            if tag in BREAK_TAGS:
                emit(" ")
                continue
            if tag == "nowiki":
                emit(str(node.contents) if node.contents is not None else "")
                continue
            if node.wiki_markup in ("*", "#", ";", ":"):
                emit(node.wiki_markup)  # list/indent markers stay, so list blocks are not prose
            if node.contents is not None:
                render_nodes(node.contents.nodes, out, spans, wikinews, targets, pos)
        elif isinstance(node, Heading):
            emit(PARA_BREAK)  # a heading is a boundary, never prose
        elif isinstance(node, ExternalLink):
            if node.title is not None:
                render_nodes(node.title.nodes, out, None, wikinews, None, pos)
        elif isinstance(node, HTMLEntity):
            emit(node.normalize())
        elif isinstance(node, (Comment, Argument)):
            continue
        else:  # unknown node kinds: keep their text
            emit(str(node))


def _is_prose(block: str) -> bool:
    s = block.lstrip()
    return bool(s) and s[0] not in "*#:;|!{"


def _paragraphs_of_render(text: str, spans: list, para_offset: int, wikinews: bool) -> tuple[list[Link], list[str], int]:
    """Cut rendered text into prose paragraphs; map spans into them."""
    links: list[Link] = []
    paras: list[str] = []
    idx = para_offset
    cuts = [(m.start(), m.end()) for m in _PARA_SPLIT.finditer(text)]
    starts = [0] + [e for _, e in cuts]
    ends = [s for s, _ in cuts] + [len(text)]
    si = 0
    spans = sorted(spans)
    for b0, b1 in zip(starts, ends):
        block = text[b0:b1]
        lead = len(block) - len(block.lstrip())
        body = block.strip()
        in_block = []
        while si < len(spans) and spans[si][0] < b1:
            if spans[si][0] >= b0 and spans[si][1] <= b1:
                in_block.append(spans[si])
            si += 1
        if not _is_prose(block) or not body:
            continue
        para = body.replace("\n", " ")
        for s, e, tgt, anchor in in_block:
            ps, pe = s - b0 - lead, e - b0 - lead
            if 0 <= ps < pe <= len(para) and para[ps:pe] == anchor.replace("\n", " "):
                links.append(Link(tgt, para[ps:pe], para, ps, pe))
        paras.append(para)
        idx += 1
    return links, paras, idx


def harvest_full(wikitext: str, targets: set[str] | None, *, wikinews: bool = False) -> list[Link]:
    """Reference harvester: parse the whole page with mwparserfromhell."""
    out: list[str] = []
    spans: list = []
    render_nodes(mwparserfromhell.parse(_QUOTE_RUNS.sub("", wikitext)).nodes, out, spans, wikinews, targets)
    links, _, _ = _paragraphs_of_render("".join(out), spans, 0, wikinews)
    return links


def top_level_blocks(wikitext: str) -> list[str]:
    """Split raw wikitext at blank lines that lie outside templates, tables, comments and HTML blocks."""
    blocks: list[str] = []
    depth_tpl = depth_tbl = depth_html = 0
    last = 0
    i = 0
    n = len(wikitext)
    while i < n:
        m = _BLOCK_TOKENS.search(wikitext, i)
        if not m:
            break
        tok = m.group()
        if tok == "{{":
            depth_tpl += 1
        elif tok == "}}":
            depth_tpl = max(0, depth_tpl - 1)
        elif tok == "{|":
            depth_tbl += 1
        elif tok == "|}":
            depth_tbl = max(0, depth_tbl - 1)
        elif tok == "<!--":
            end = wikitext.find("-->", m.end())
            i = n if end < 0 else end + 3
            continue
        elif tok.startswith("</"):
            depth_html = max(0, depth_html - 1)
        elif tok.startswith("<"):
            depth_html += 1
        elif depth_tpl == 0 and depth_tbl == 0 and depth_html == 0:  # blank line at top level
            blocks.append(wikitext[last:m.start()])
            last = m.end()
        i = m.end()
    blocks.append(wikitext[last:])
    return blocks


def candidate_targets(wikitext: str, *, wikinews: bool = False) -> set[str]:
    """Normalised targets the pre-scan sees (a superset of what the renderer links)."""
    found = set()
    for m in _WIKILINK_TARGET.finditer(wikitext):
        t = classify_target(m.group(1), wikinews)
        if t:
            found.add(t)
    if wikinews:
        for m in _W_TEMPLATE_TARGET.finditer(wikitext):
            if m.group(1).strip():
                found.add(normalize_title(m.group(1)))
    return found


_HIDDEN_TOKENS = re.compile(r"\{\{|\}\}|^[ \t]*\{\||^[ \t]*\|\}|<ref\b[^<>]*?/>|<ref\b[^<>]*>|</ref\s*>|<!--|-->", re.I | re.M)


def visible_text(block: str) -> str | None:
    """The block without templates, tables, refs and comments (what the renderer can show as links);
    None when the braces/tags do not balance (then the caller must parse to be sure)."""
    out, last = [], 0
    tpl = ref = tbl = 0
    com = False
    for m in _HIDDEN_TOKENS.finditer(block):
        tok = m.group()
        if com:
            if tok == "-->":
                com = False
                last = m.end()
            continue
        hidden = tpl > 0 or ref > 0 or tbl > 0
        if not hidden:
            out.append(block[last:m.start()])
        if tok == "<!--":
            com = True
        elif tok.endswith("{|"):
            tbl += 1
        elif tok.endswith("|}") and tok.lstrip().startswith("|}"):
            if tbl == 0:
                return None
            tbl -= 1
        elif tok == "{{":
            tpl += 1
        elif tok == "}}":
            if tpl == 0:
                return None
            tpl -= 1
        elif tok.startswith("</"):
            if ref == 0:
                return None
            ref -= 1
        elif tok.startswith("<ref") and not tok.endswith("/>"):
            ref += 1
        last = m.end()
    if tpl or ref or com or tbl:
        return None
    out.append(block[last:])
    return "".join(out)


_LIST_MARKS = ("*", "#", ":", ";")
_SIMPLE_LINK = re.compile(r"\[\[([^\[\]\n{}<>|]*)(?:\|([^\[\]\n]*))?\]\]")
_NOT_SIMPLE = re.compile(r"[<>{}\[\]]|^=|^----|''|__|~~~|https?:", re.M)
_HEADING_LINE = re.compile(r"^(={1,6})([^=\n<>{}\[\]&']+)\1(?=[ \t]*$)", re.M)
_ENTITY = re.compile(r"&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{0,31});")


class _NotSimple(Exception):
    pass


def _entity(m: re.Match) -> str:
    v = m.group(1)
    if v[0] != "#":
        cp = html_entities.name2codepoint.get(v)
        return chr(cp) if cp is not None else m.group(0)  # unknown names stay text, as in mwparserfromhell
    cp = int(v[2:], 16) if v[1] in "xX" else int(v[1:])
    if not (0 < cp <= 0x10FFFF) or 0xD800 <= cp <= 0xDFFF:
        raise _NotSimple  # let the parser decide on odd code points
    return chr(cp)


def _simple_piece(t: str) -> str:
    """Headings -> paragraph breaks, entities -> characters; raises _NotSimple on other markup."""
    if "=" in t:
        t = _HEADING_LINE.sub(PARA_BREAK, t)
    if _NOT_SIMPLE.search(t):
        raise _NotSimple
    return _ENTITY.sub(_entity, t) if "&" in t else t


def _render_simple(vis: str, targets: set[str] | None) -> tuple[str, list] | None:
    """Render a block that is plain text plus plain wikilinks without mwparserfromhell.

    Returns None (the caller parses) as soon as anything else appears: tags, templates,
    entities, external links, headings, quotes, stray brackets. For what it accepts it
    follows :func:`render_nodes` exactly (checked against full parses on real pages)."""
    out: list[str] = []
    spans: list = []
    pos = 0
    last = 0
    try:
        for m in _SIMPLE_LINK.finditer(vis):
            gap = _simple_piece(vis[last:m.start()])
            out.append(gap)
            pos += len(gap)
            last = m.end()
            raw_title, text = m.group(1), m.group(2)
            target = classify_target(raw_title)
            if target is None:
                continue  # files, categories, interwiki: dropped, as the renderer does
            if text is not None:
                if not text.strip() or "=" in text or "\n" in text:
                    return None  # (empty: maybe a template visible_text removed; let the parser decide)
                anchor = _simple_piece(text).strip()
            else:
                if "&" in raw_title:
                    return None
                anchor = raw_title.strip().lstrip(":").split("#", 1)[0].strip()
            if not anchor:
                continue
            out.append(anchor)
            if targets is None or target in targets:
                spans.append((pos, pos + len(anchor), target, anchor))
            pos += len(anchor)
        out.append(_simple_piece(vis[last:]))
    except _NotSimple:
        return None
    return "".join(out), spans


def harvest(wikitext: str, targets: set[str] | None, *, wikinews: bool = False) -> list[Link]:
    """Same links as :func:`harvest_full`, parsing only blocks that hold a candidate link."""
    if targets is not None:
        if "[[" not in wikitext and not (wikinews and "{{" in wikitext):
            return []
        if not (candidate_targets(wikitext, wikinews=wikinews) & targets):
            return []
    links: list[Link] = []
    for block in top_level_blocks(wikitext):
        has = "[[" in block or (wikinews and "{{" in block)
        if has and block.lstrip()[:1] in _LIST_MARKS and all(l.lstrip()[:1] in _LIST_MARKS for l in block.split("\n") if l.strip()):
            has = False  # every line a list item: every rendered paragraph starts with a marker, none is prose
        vis = None
        if has and not wikinews:
            # links inside templates, refs and comments never render: look at the rest only
            vis = visible_text(_QUOTE_RUNS.sub("", block))
            if targets is not None:
                has = candidate_targets(block if vis is None else vis) & targets
        elif has and targets is not None:
            has = candidate_targets(block, wikinews=True) & targets
        if has:
            simple = _render_simple(vis, targets) if vis is not None else None
            if simple is not None:
                text, spans = simple
            else:
                out: list[str] = []
                spans = []
                render_nodes(mwparserfromhell.parse(_QUOTE_RUNS.sub("", block)).nodes, out, spans, wikinews, targets)
                text = "".join(out)
            got, _, _ = _paragraphs_of_render(text, spans, 0, wikinews)
            links.extend(got)
    return links


def paragraphs(wikitext: str, *, wikinews: bool = False) -> list[str]:
    """All prose paragraphs of a page as plain text (used for descriptions and documents)."""
    out: list[str] = []
    render_nodes(mwparserfromhell.parse(_QUOTE_RUNS.sub("", wikitext)).nodes, out, None, wikinews, None)
    _, paras, _ = _paragraphs_of_render("".join(out), [], 0, wikinews)
    return paras


def all_article_links(wikitext: str) -> list[str]:
    """Every article wikilink anywhere in the page (templates, refs, captions included), normalised.

    The basis of the real-data reference count: mwparserfromhell's recursive
    ``filter_wikilinks`` minus files, categories, interwiki and other namespaces.
    """
    code = mwparserfromhell.parse(wikitext)
    out = []
    for wl in code.filter_wikilinks(recursive=True):
        t = classify_target(str(wl.title))
        if t:
            out.append(t)
    return out


def link_key(links: Iterable[Link]) -> list[tuple]:
    """Order-free comparable form of harvested links (for equality checks)."""
    return sorted((l.target, l.anchor, l.paragraph, l.start, l.end) for l in links)
