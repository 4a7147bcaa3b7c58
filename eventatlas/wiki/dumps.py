"""The dump backend: Wikidata JSON dump + Wikipedia multistream XML + Wikinews XML and categorylinks.

Streaming only. Sharding: the Wikidata scan splits multi-stream bz2 / plain JSON into
shards (``dumpfile.plan_shards``); Wikipedia link harvesting splits the multistream
XML by the stream offsets of its index, each shard parsed and harvested in a worker
process (``harvest_shard``, a pure function a Prefect task runner can map as well).
XML is parsed with defusedxml (no DTDs, no entities).
"""
from __future__ import annotations

import bz2
import gzip
import io
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Iterable, Iterator

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import iterparse

from eventatlas.io import Rejects, fingerprint_paths

from .backend import Page, normalize_title, parse_redirect
from .links import harvest
from .dumpfile import DumpError, iter_entities
from .wikidata import EventRecord, scan_dump


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _pages_from_xml(stream, lang: str, project: str, source: str) -> Iterator[Page]:
    """Pages of a MediaWiki export stream (any schema version)."""
    last = None  # where a damaged stream stopped, for the error message
    try:
        for _, el in iterparse(stream, events=("end",), forbid_dtd=True, forbid_entities=True, forbid_external=True):
            if _local(el.tag) != "page":
                continue
            f = {_local(c.tag): c for c in el}
            title = f["title"].text or ""
            ns = int(f["ns"].text) if "ns" in f else 0
            pid = int(f["id"].text)
            rev = f.get("revision")
            text, rid, ts = "", None, None
            if rev is not None:
                for c in rev:
                    t = _local(c.tag)
                    if t == "text":
                        text = c.text or ""
                    elif t == "id":
                        rid = int(c.text)
                    elif t == "timestamp":
                        ts = c.text
            red = f.get("redirect")
            redirect_to = normalize_title(red.get("title")) if red is not None and red.get("title") else parse_redirect(text)
            last = f"page id {pid} {title!r}"
            yield Page(lang, normalize_title(title) if ns == 0 else title, pid, text, ns=ns, redirect_to=redirect_to,
                       project=project, revision_id=rid, timestamp=ts)
            el.clear()
    except (EOFError, OSError) as e:
        raise DumpError(source, f"after {last or 'the start'}", f"corrupt or truncated compressed stream ({e})") from e
    except DefusedXmlException as e:  # DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden
        raise DumpError(source, f"after {last or 'the start'}", f"refused unsafe XML ({type(e).__name__}: {e}); "
                        "DTDs and entity declarations are not allowed") from None
    except (KeyError, ValueError, TypeError) as e:  # a <page> without title/id, a non-integer id or ns
        raise DumpError(source, f"after {last or 'the start'}", f"malformed <page> ({type(e).__name__}: {e})") from e
    except Exception as e:  # ParseError carries a (line, column) position
        if type(e).__name__ == "ParseError":
            raise DumpError(source, f"after {last or 'the start'}, xml position {getattr(e, 'position', '?')}", f"malformed XML: {e}") from e
        raise


class _Concat(io.RawIOBase):
    """A file-like over byte chunks (used to wrap a multistream range in a root element)."""

    def __init__(self, chunks: Iterator[bytes]):
        self.chunks, self.buf = chunks, b""

    def readable(self):
        return True

    def readinto(self, b):
        while not self.buf:
            try:
                self.buf = next(self.chunks)
            except StopIteration:
                return 0
        n = min(len(b), len(self.buf))
        b[:n] = self.buf[:n]
        self.buf = self.buf[n:]
        return n


def _range_chunks(path: str, start: int, end: int) -> Iterator[bytes]:
    """Decompress the bz2 streams stored in bytes [start, end), wrapped in a root element."""
    yield b"<mediawiki>"
    with open(path, "rb") as f:
        f.seek(start)
        remaining = end - start
        dec = bz2.BZ2Decompressor()
        fed = 0  # bytes given to the current decompressor: >0 at the end means a cut stream
        while remaining > 0:
            raw = f.read(min(1 << 20, remaining))
            if not raw:
                break
            remaining -= len(raw)
            while raw:
                fed += len(raw)
                out = dec.decompress(raw)
                if out:
                    # the footer stream closes the dump's root; ours closes the wrapper instead
                    yield out.replace(b"</mediawiki>", b"") if b"</mediawiki>" in out else out
                if dec.eof:
                    raw = dec.unused_data
                    dec = bz2.BZ2Decompressor()
                    fed = 0
                else:
                    raw = b""
        if fed and not dec.eof:
            raise EOFError(f"bz2 stream ended before its end-of-stream marker (byte {end})")
    yield b"</mediawiki>"


def iter_index(index_path: str | Path) -> Iterator[tuple[int, int, str]]:
    """(offset, page_id, title) rows of a multistream index (``offset:id:title``; titles may hold ':'), streamed."""
    opener = bz2.open if str(index_path).endswith(".bz2") else open
    with opener(index_path, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line:
                continue
            parts = line.split(":", 2)
            if len(parts) != 3 or not parts[0].isdigit():
                raise DumpError(index_path, f"line {i}", "expected offset:page_id:title")
            yield int(parts[0]), int(parts[1]), parts[2]


def index_offsets(index_path: str | Path) -> list[int]:
    """Distinct stream offsets (a few hundred thousand for enwiki: ~100 pages a stream)."""
    out: list[int] = []
    for o, _, _ in iter_index(index_path):
        if not out or o != out[-1]:
            out.append(o)
    return sorted(set(out))


def harvest_shard(path: str, start: int, end: int, lang: str, targets: set[str]) -> list[tuple[str, int, list]]:
    """Parse the pages in one byte range of a multistream dump and harvest links to ``targets``."""
    out = []
    for p in _pages_from_xml(io.BufferedReader(_Concat(_range_chunks(path, start, end))), lang, "wikipedia", path):
        if p.ns != 0 or p.is_redirect:
            continue
        links = harvest(p.wikitext, targets)
        if links:
            out.append((p.title, p.page_id, links))
    return out


def _parse_sql_values(text: str) -> Iterator[tuple]:
    """Tuples of the ``INSERT INTO ... VALUES (...),(...);`` statements of a MySQL dump."""
    tok = re.compile(r"\(|\)|,|'((?:[^'\\]|\\.)*)'|(-?\d+(?:\.\d+)?)|NULL", re.S)
    for stmt in re.finditer(r"INSERT INTO `\w+` VALUES (.*?);\n", text, re.S):
        body = stmt.group(1)
        row: list | None = None
        for m in tok.finditer(body):
            g = m.group(0)
            if g == "(":
                row = []
            elif g == ")":
                if row is not None:
                    yield tuple(row)
                row = None
            elif g == ",":
                continue
            elif row is not None:
                if m.group(1) is not None:
                    row.append(re.sub(r"\\(.)", r"\1", m.group(1)))
                elif m.group(2) is not None:
                    row.append(int(m.group(2)) if "." not in m.group(2) else float(m.group(2)))
                else:
                    row.append(None)


def read_categorylinks(path: str | Path) -> dict[int, list[str]]:
    """page_id -> categories (spaces, no prefix) from a classic ``categorylinks.sql.gz``."""
    opener = gzip.open if str(path).endswith(".gz") else open
    out: dict[int, list[str]] = {}
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        for line in f:  # mysqldump writes one INSERT statement per line
            if not line.startswith("INSERT INTO"):
                continue
            for row in _parse_sql_values(line if line.endswith("\n") else line + "\n"):
                out.setdefault(int(row[0]), []).append(str(row[1]).replace("_", " "))
    return out


class DumpBackend:
    """Backend over dump files laid out as ``tests/support/wiki_world/world.write_dumps`` returns them:

    ``{"wikidata": path | [paths], "wikipedia": {lang: {"xml", "index"}}, "wikinews": {lang: {"xml", "categorylinks"}},
    "dates": {...}}``.
    """

    name = "dumps"

    def __init__(self, paths: dict, *, dataset: str = "wikigrounding"):
        self.paths = paths
        self.dataset = dataset
        wd = paths["wikidata"]
        self.wikidata = [wd] if isinstance(wd, (str, Path)) else list(wd)

    def info(self) -> dict[str, Any]:
        files = self.wikidata + [v["xml"] for v in self.paths.get("wikipedia", {}).values()] + \
            [v["xml"] for v in self.paths.get("wikinews", {}).values()]
        return {"backend": self.name, "dates": self.paths.get("dates", {}), "files": [Path(f).name for f in files],
                "fingerprint": fingerprint_paths(files)}

    # --- Wikidata
    def iter_entities(self) -> Iterator[dict]:
        for p in self.wikidata:
            yield from iter_entities(p)

    def scan_events(self, languages, rejects: Rejects, *, workers: int = 1, executor=None) -> list[EventRecord]:
        out = []
        for p in self.wikidata:
            res = scan_dump(p, languages, workers=workers, executor=executor, dataset=rejects.dataset)
            rejects.rows.extend(res.rejects)
            out += [EventRecord.from_dict(d) for d in res.events]
        return out

    # --- Wikipedia
    def _wiki(self, lang: str) -> dict | None:
        return self.paths.get("wikipedia", {}).get(lang)

    def iter_pages(self, lang: str) -> Iterator[Page]:
        w = self._wiki(lang)
        if not w:
            return
        with bz2.open(w["xml"], "rb") as f:
            yield from _pages_from_xml(f, lang, "wikipedia", w["xml"])

    def _offsets(self, lang: str) -> list[int] | None:
        if not hasattr(self, "_offs"):
            self._offs: dict[str, list[int] | None] = {}
        if lang not in self._offs:
            w = self._wiki(lang)
            self._offs[lang] = index_offsets(w["index"]) if w and w.get("index") else None
        return self._offs[lang]

    def get_articles(self, lang: str, titles: Iterable[str]) -> dict[str, Page]:
        want = {normalize_title(t) for t in titles}
        w = self._wiki(lang)
        if not w or not want:
            return {}
        offs = self._offsets(lang)
        if offs is not None:  # decompress only the streams holding the wanted titles
            hit = sorted({o for o, _, t in iter_index(w["index"]) if normalize_title(t) in want})
            nxt = {o: (offs[i + 1] if i + 1 < len(offs) else Path(w["xml"]).stat().st_size) for i, o in enumerate(offs)}
            pages: Iterable[Page] = (p for o in hit
                                     for p in _pages_from_xml(io.BufferedReader(_Concat(_range_chunks(w["xml"], o, nxt[o]))),
                                                              lang, "wikipedia", w["xml"]))
        else:
            pages = self.iter_pages(lang)
        return {p.title: p for p in pages if p.ns == 0 and p.title in want}

    def redirects_to(self, lang: str, titles: Iterable[str]) -> dict[str, str]:
        want = {normalize_title(t) for t in titles}
        return {p.title: p.redirect_to for p in self.iter_pages(lang) if p.ns == 0 and p.redirect_to in want}

    def iter_linking_pages(self, lang: str, targets: set[str]) -> Iterator[Page]:
        for p in self.iter_pages(lang):
            if p.ns == 0 and not p.is_redirect and "[[" in p.wikitext:  # cheap pre-filter
                yield p

    def harvest_pages(self, lang: str, targets: set[str], *, workers: int = 1, executor=None) -> Iterator[tuple[str, int, list]]:
        """(title, page_id, links) for pages linking to ``targets``, sharded over index streams."""
        w = self._wiki(lang)
        if not w:
            return
        offs = self._offsets(lang)
        if offs is None or workers <= 1 and executor is None:
            for p in self.iter_linking_pages(lang, targets):
                links = harvest(p.wikitext, targets)
                if links:
                    yield p.title, p.page_id, links
            return
        size = Path(w["xml"]).stat().st_size
        n = max(1, min(len(offs), workers * 2))  # a few shards per worker evens out page sizes
        cuts = [offs[round(i * len(offs) / n)] for i in range(n)]
        cuts = sorted(set(cuts))
        # the last index stream is followed by the footer stream; the range to EOF covers it
        ranges = [(c, cuts[i + 1] if i + 1 < len(cuts) else size) for i, c in enumerate(cuts)]
        args = ([w["xml"]] * len(ranges), [r[0] for r in ranges], [r[1] for r in ranges], [lang] * len(ranges), [targets] * len(ranges))
        if executor is None:
            with ProcessPoolExecutor(max_workers=workers) as ex:
                parts = list(ex.map(harvest_shard, *args))
        else:
            parts = list(executor.map(harvest_shard, *args))
        for part in parts:
            yield from part

    # --- Wikinews
    def iter_wikinews(self, lang: str, targets: set[str]) -> Iterator[Page]:
        n = self.paths.get("wikinews", {}).get(lang)
        if not n:
            return
        cats = read_categorylinks(n["categorylinks"]) if n.get("categorylinks") else {}
        with bz2.open(n["xml"], "rb") as f:
            for p in _pages_from_xml(f, lang, "wikinews", n["xml"]):
                if p.ns != 0 or p.is_redirect:
                    continue
                yield Page(p.lang, p.title, p.page_id, p.wikitext, ns=p.ns, redirect_to=None,
                           categories=tuple(cats.get(p.page_id, ())), project="wikinews", revision_id=p.revision_id, timestamp=p.timestamp)
