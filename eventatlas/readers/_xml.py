"""Safe XML parsing: defusedxml only, DTDs/entities forbidden; errors name file and line."""
from __future__ import annotations

import os
from typing import Any

import defusedxml.ElementTree as DET
from defusedxml import DefusedXmlException
from xml.etree.ElementTree import ParseError

from ..errors import InputError


def parse_bytes(data: bytes, source: str | os.PathLike, *, allow_doctype: bool = False) -> Any:
    """Root element of an XML document. Entity declarations and external entities are always
    refused (billion laughs, XXE); a DOCTYPE only when ``allow_doctype`` (ACE apf files name an
    external DTD, which expat never fetches). Malformed XML raises InputError with the line."""
    try:
        return DET.fromstring(data, forbid_dtd=not allow_doctype, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as e:
        raise InputError(source, "DTD/entity", f"refused unsafe XML ({type(e).__name__}: {e}); DTDs and entity declarations are not allowed") from None
    except ParseError as e:
        head = data[:200].lower()
        if b"encoding=" not in head or b"utf-8" in head:
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as u:  # say what is wrong instead of "invalid token"
                line = data[: u.start].count(b"\n") + 1
                raise InputError(source, f"line {line}", f"not valid UTF-8 ({u.reason} at byte {u.start}); re-encode the file as UTF-8 or declare its encoding") from None
        line, col = getattr(e, "position", (None, None))
        raise InputError(source, f"line {line}", f"malformed XML: {e.msg if hasattr(e, 'msg') else e} (column {col})") from None


def local(tag: str) -> str:
    """Tag name without its namespace (FrameNet uses xmlns="http://framenet.icsi.berkeley.edu")."""
    return tag.rsplit("}", 1)[-1]


def children(el, name: str):
    return [c for c in el if local(c.tag) == name]


def child(el, name: str):
    for c in el:
        if local(c.tag) == name:
            return c
    return None
