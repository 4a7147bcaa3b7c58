"""The HTML pages' templates: Jinja2 files shipped inside the package (``eventatlas/templates/``).

One environment for every page. It escapes every ``{{ value }}`` (HTML text and attribute values alike),
so a dataset or method name holding ``<script>`` or quotes is shown, never run. Text that is already
markup has to be marked so explicitly (``markupsafe.Markup``), with the reason at that place: JSON for a
``<script>`` element, say, from :func:`eventatlas.escaping.script_json`, which HTML escaping would
break. ``None`` renders as nothing, as a missing warehouse value always has. The templates are
read through the package (importlib), so rendering works from any directory and from an installed wheel.
"""
from __future__ import annotations

from functools import cache
from typing import Any

import jinja2

TEMPLATES = "templates"  # eventatlas/templates/, package data in the wheel (pyproject.toml)


def _finalize(v: Any) -> Any:
    return "" if v is None else v


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("eventatlas", TEMPLATES),
        autoescape=True,  # every template is HTML or SVG
        undefined=jinja2.StrictUndefined,  # a misspelt name fails the render instead of showing nothing
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    # data-* attributes carry the raw value (``None`` included), for a reader to check against the warehouse
    env.filters["repr"] = repr
    env.filters["thousands"] = lambda n: f"{n:,}"
    return env


def render(name: str, **context: Any) -> str:
    """The template ``name`` (a file in ``eventatlas/templates/``) rendered with ``context``."""
    return environment().get_template(name).render(**context)

