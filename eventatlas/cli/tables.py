"""Tables that fit the terminal: one way for every command's table (``print_rows``), the column fitting
(``fit_columns``) and the widths they are measured by."""
from __future__ import annotations

from typing import Any, Iterable, Optional

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .base import console

def fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) >= 1000 else f"{v:.4g}"
    return str(v)


def terminal_width() -> int:
    """The terminal's width in characters: ``COLUMNS`` when set, else the terminal's, else 80 (a pipe)."""
    import shutil

    return shutil.get_terminal_size().columns


def column_widths(cols: list[str], rows: list[tuple]) -> list[int]:
    """Each column's width in a rich table (the default box): its longest text (header or cell) and 3 for padding
    and border; a table is 1 more than the sum of its columns'."""
    return [max([len(str(c)), *(len(fmt(r[i])) for r in rows)]) + 3 for i, c in enumerate(cols)]


def fit_columns(cols: list[str], rows: list[tuple], priority: list[str], width: int, must: Iterable[str] = (),
                need: Optional[list[int]] = None, shrink: Iterable[str] = ()) -> list[int]:
    """Indices (in table order) of the columns a table shows in ``width`` characters: the first column of
    ``priority`` and those of ``must`` always, then the columns of ``priority`` in that order while the table
    still fits (:func:`column_widths`, or ``need``); a column missing from ``priority`` comes last. A ``shrink``
    column (a title, cut with …) that does not fit whole takes the room left when that is :data:`ELLIPSIS_MIN`
    characters or more, and the columns after it are left out."""
    need = need or column_widths(cols, rows)
    order = [cols.index(c) for c in priority if c in cols] + [i for i, c in enumerate(cols) if c not in priority]
    must = set(must)
    keep = order[:1] + [i for i in order[1:] if cols[i] in must]
    used = 1 + sum(need[i] for i in keep)
    for i in order:
        if i in keep:
            continue
        if used + need[i] <= width:
            keep.append(i)
            used += need[i]
        elif cols[i] in shrink and used + ELLIPSIS_MIN + 3 <= width:
            keep.append(i)
            break
    return sorted(keep)


ELLIPSIS_MIN = 16  # the fewest characters an ``ellipsis`` column (a title) is cut to when room is short


def print_rows(cols: list[str], rows: list[tuple], title: str | None = None, max_rows: int = 500,
               width: int | None = None, *, fit: bool = False, priority: Optional[list[str]] = None,
               key: Optional[list[str]] = None, fold: Optional[list[str]] = None, under: Iterable[str] = (),
               no_wrap: Iterable[str] = (), ellipsis: Iterable[str] = (), hint: str = "") -> None:
    """A table of ``rows``; ``width``: render at that many characters (default: the console's). Cell text is data,
    never markup; ``no_wrap`` columns (names, ids) are never wrapped.

    ``fit``: fit ``width`` (default: the terminal's, :func:`terminal_width`) and still tell the rows apart. A table
    that fits is printed whole. Else the ``fold`` columns (default: ``key``) whose value is the same on every row
    become one heading line above the table (``task grounding · dataset d · split test``); of the other columns
    those of ``priority`` (default: table order) are taken in that order while the table fits, the first always;
    when rows would then look the same in the shown ``key`` columns (default: every column), the hidden key column
    that tells them apart is shown anyway, before the later columns of ``priority`` (values before identity); one
    line names the columns left out (with ``hint``). ``under``: columns printed whole on a line of their own under
    each row when they do not fit beside the others (the first, an id, as it is, never wrapped: copy it from there;
    the others as ``name: value``); ``ellipsis``: columns (titles) cut with … to the room left, never wrapped."""
    no_wrap, ellipsis = set(no_wrap), set(ellipsis)
    shown_rows = list(rows[:max_rows])
    if not fit:
        t = Table(title=title, show_lines=False)
        for c in cols:
            t.add_column(str(c), overflow="fold", no_wrap=c in no_wrap)
        for r in shown_rows:
            t.add_row(*[escape(fmt(v)) for v in r])
        # an explicit width gets a console of its own: Console.print never renders wider than its console
        (console if width is None else Console(width=width)).print(t)
    else:
        _print_fitted([str(c) for c in cols], shown_rows, title, width or terminal_width(), priority, key, fold,
                      list(under), no_wrap, ellipsis, hint)
    if len(rows) > max_rows:
        console.print(f"... {len(rows) - max_rows} more rows", markup=False)


def _under_line(x: str, inner: int) -> str:
    """An ``under`` line in the box (``inner``: the room within ``│   `` and `` │``): indented when it fits, else
    against the border, else whole past it."""
    if len(x) <= inner:
        return f"│   {x.ljust(inner)} │"
    return f"│ {x} │" if len(x) <= inner + 2 else f"│ {x}"


def _print_fitted(cols: list[str], rows: list[tuple], title: str | None, w: int, priority: Optional[list[str]],
                  key: Optional[list[str]], fold: Optional[list[str]], under: list[str], no_wrap: set[str],
                  ellipsis: set[str], hint: str) -> None:
    """:func:`print_rows` with ``fit``."""
    from rich.segment import Segment
    from rich.text import Text

    out = Console(width=w)
    text = [[fmt(v) for v in r] for r in rows]
    need = column_widths(cols, rows)
    key = list(cols) if key is None else [c for c in key if c in cols]
    fold = key if fold is None else fold
    if sum(need) + 1 <= w:  # every column fits: the table as it is
        t = Table(title=title, show_lines=False)
        for c in cols:
            t.add_column(c, overflow="fold", no_wrap=c in no_wrap or c in ellipsis or c in under)
        for r in text:
            t.add_row(*map(escape, r))
        out.print(t)
        return
    # the columns with one value on every row: a heading line (an empty one says nothing)
    folded = {i for i, c in enumerate(cols) if c in fold and len(rows) > 1 and len({r[i] for r in text}) == 1}
    heading = [f"{cols[i]} {text[0][i]}" for i in sorted(folded) if text[0][i]]
    rest = [i for i in range(len(cols)) if i not in folded]
    below = [cols.index(c) for c in under if c in cols and cols.index(c) in rest]
    if below and sum(need[i] for i in rest) + 1 <= w:
        below = []  # they fit beside the others: columns like the rest
    keep_cols = [c for c in under if c in cols and cols.index(c) in rest and cols.index(c) not in below]
    rest = [i for i in rest if i not in below]
    sub = [cols[i] for i in rest]
    sub_need = [need[i] for i in rest]
    prio = list(priority or cols)
    must: set[str] = set(keep_cols)
    while True:  # show the hidden key column that tells apart rows the shown ones do not
        shown = fit_columns(sub, [], prio, w, must, sub_need, shrink=ellipsis)
        seen = [rest[j] for j in shown if sub[j] in key] + below
        groups: dict[tuple, list[int]] = {}
        for n, r in enumerate(text):
            groups.setdefault(tuple(r[i] for i in seen), []).append(n)
        alike = [g for g in groups.values() if len(g) > 1]
        hidden = [c for c in [*prio, *sub] if c in sub and c in key and sub.index(c) not in shown and c not in must]
        split = next((c for c in dict.fromkeys(hidden)
                      if any(len({text[n][cols.index(c)] for n in g}) > 1 for g in alike)), None)
        if split is None:
            break
        must.add(split)
    idx = [rest[j] for j in shown]
    left = [cols[i] for i in rest if i not in idx]
    used = 1 + sum(need[i] for i in idx if cols[i] not in ellipsis)
    t = Table(show_lines=False)
    for i in idx:
        c = cols[i]
        if c in ellipsis:
            room = max(ELLIPSIS_MIN, w - used - 3 * sum(1 for k in idx if cols[k] in ellipsis))
            t.add_column(c, no_wrap=True, overflow="ellipsis", max_width=min(room, need[i] - 3))
        else:
            t.add_column(c, no_wrap=bool(below) or c in no_wrap or c in under, overflow="ellipsis" if below else "fold")
    for r in text:
        t.add_row(*[escape(r[i]) for i in idx])
    if title:
        out.print(title, markup=False, highlight=False)
    lines_h: list[str] = []
    for item in heading:  # each `name value` whole on one line
        if lines_h and len(lines_h[-1]) + 3 + len(item) <= w:
            lines_h[-1] += f" · {item}"
        else:
            lines_h.append(item)
    for ln in lines_h:
        out.print(ln, markup=False, highlight=False)
    if not below:
        out.print(t)
    else:  # each row one line, its id (and the other `under` columns) on lines of their own beneath it
        widest = max([len(text[n][below[0]]) for n in range(len(text))] + [0]) + 6  # `│   id │`
        natural = 1 + sum(need[i] for i in idx)
        if natural < min(w, widest) and idx:  # the id's line inside the box: widen the last column
            t.columns[-1].min_width = need[idx[-1]] - 3 + min(w, widest) - natural
        lines = out.render_lines(t, out.options.update(width=max(w, widest)), pad=False)
        if len(lines) != len(text) + 4:  # a header or row over two lines: the ids after the table instead
            out.print(t)
            lines = []
        inner = Segment.get_line_length(lines[0]) - 6 if lines else w - 6
        extra: list[list[str]] = []
        for r in text:
            mine = []
            for n_u, i in enumerate(below):
                if not r[i]:
                    continue
                if n_u == 0:
                    mine.append(r[i])
                else:
                    label = Text(f"{cols[i]}: {r[i]}")
                    mine += [ln.plain for ln in label.wrap(out, max(inner, 20))]
            extra.append(mine)
        if lines:
            printed = [*lines[:3]]
            for n, mine in enumerate(extra):
                printed.append(lines[3 + n])
                printed += [[Segment(_under_line(x, inner))] for x in mine]
            printed += lines[3 + len(text):]
            for line in printed:
                out.print(Text.assemble(*[(s.text, s.style) for s in line if not s.control]), soft_wrap=True,
                          highlight=False)
        else:
            for mine in extra:
                for x in mine:
                    out.print(f"  {x}", markup=False, highlight=False, soft_wrap=True)
    if left:
        out.print(f"left out to fit {w} columns: {', '.join(left)}" + (f" ({hint})" if hint else ""), markup=False,
                  highlight=False)
