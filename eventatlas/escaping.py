"""Escaping data for the pages and files the project writes: one place for each output language.

* :func:`html_text`: text or an attribute value in HTML;
* :func:`script_json`: JSON embedded in a ``<script>`` element: ``<``, ``>``, ``&``, U+2028 and U+2029 are
  written as ``\\uXXXX`` escapes, so no ``</script>`` or ``<!--`` in the data can end or hide the script
  (the JSON parses to the same value);
* :func:`markdown_text`: text for a Markdown page: what would start raw HTML (``<tag``, ``</``, ``<!--``,
  ``<?``) or a character reference (``&amp;``) is escaped outside code spans, so data is shown, never run;
* :func:`csv_cell`: a CSV cell a spreadsheet will not run as a formula (a text cell starting with ``=``,
  ``+``, ``-``, ``@``, tab or carriage return gets a leading ``'``; numbers stay numbers).
"""
from __future__ import annotations

import html
import json
import re
from typing import Any

_SCRIPT = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SCRIPT_RE = re.compile("[<>&\u2028\u2029]")


def html_text(v: Any) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def script_json(obj: Any, **kw: Any) -> str:
    """``json.dumps(obj)`` safe inside ``<script>``: only ``\\uXXXX`` escapes stand for ``<``, ``>``, ``&``,
    U+2028 and U+2029 (outside strings JSON has none of them)."""
    return _SCRIPT_RE.sub(lambda m: _SCRIPT[m.group()], json.dumps(obj, **kw))


# a code span (a run of backticks closed by a run of the same length); its text is shown as is
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
# what starts raw HTML in Markdown (an open or closing tag, a comment, a declaration or instruction) or an
# entity / character reference
_MD_HTML = re.compile(r"<(?=[A-Za-z/!?])|&(?=#?[A-Za-z0-9]+;)")


def markdown_text(text: Any) -> str:
    """``text`` with raw HTML and character references escaped outside code spans (``<script>`` shows as
    text); anything else, ``a <= b`` included, is left as written."""
    s, out, pos = str(text), [], 0
    for m in _CODE_SPAN.finditer(s):
        out += [_MD_HTML.sub(lambda x: "&lt;" if x.group() == "<" else "&amp;", s[pos:m.start()]), m.group()]
        pos = m.end()
    out.append(_MD_HTML.sub(lambda x: "&lt;" if x.group() == "<" else "&amp;", s[pos:]))
    return "".join(out)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def csv_cell(v: Any) -> Any:
    """``v`` for a CSV cell: text a spreadsheet would read as a formula gets a leading ``'`` (the OWASP
    rule); numbers, and text that is a plain number such as ``-0.5``, are left as they are."""
    if isinstance(v, str) and v.startswith(_FORMULA_START) and not _NUMBER.fullmatch(v):
        return "'" + v
    return v
