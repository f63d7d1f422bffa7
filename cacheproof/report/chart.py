"""The figures over the calls as one inline SVG chart, drawn here: no script, no library, no font file.

x is the call: call i's span, from i - 1 to i, shows the state right after it (the fresh spec is
the value at x = 0); y is the kind's unit. BAND figures are stacked areas (the tensor cache's in use, idle, reserved: the top of idle is
the ready bytes), LINE figures lines over them, the LIMIT figure a dashed ceiling. The diverging call
is its span outlined in red (a red rule when the calls are many), labelled with the invariants the
implementation's state breaks there; the implementation's own series is drawn beside the spec's,
dotted, where the report says its state at that call. With one row per call and at most
HOVER_CALLS calls, each call's span carries a tooltip with its figures.
"""

from __future__ import annotations

import math
from html import escape
from typing import Sequence

from cacheproof.report.series import BAND, LIMIT, LINE, Series

WIDTH, HEIGHT = 960, 320
LEFT, RIGHT, TOP, BOTTOM = 72, 24, 30, 46
HOVER_CALLS = 400

COLOURS = {
    "capacity": "#222222", "usable": "#222222", "in use": "#d95f02", "idle": "#1b9e77",
    "reserved": "#7570b3", "ready": "#1f4e79", "free": "#1b9e77", "cached": "#7570b3",
    "slots": "#222222", "protected": "#d95f02", "evictable": "#7570b3", "requests' own": "#e7298a",
}
"""Each figure's colour, by name (colour-blind safe: the ColorBrewer Dark2 hues)."""
MARK_COLOUR = "#c62828"


def nice_step(span: float, ticks: int) -> int:
    """The tick step for `span` with about `ticks` ticks: 1, 2 or 5 times a power of ten, at least 1."""
    raw = max(span / ticks, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    return next(int(m * magnitude) for m in (1, 2, 5, 10) if m * magnitude >= raw)


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _staircase(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The step line through `points` (x, y), the first the fresh spec's: the value of each later
    point holds over the span from the x before it to its own x (call i's span is [i - 1, i])."""
    line = [points[0]]
    for (previous, _), (x, y) in zip(points, points[1:]):
        line += [(previous, y), (x, y)]
    return line


def _path(points: Sequence[tuple[float, float]], close: bool = False) -> str:
    text = "M" + " L".join(f"{_fmt(x)},{_fmt(y)}" for x, y in points)
    return text + (" Z" if close else "")


def _drawn(figures, rows: Sequence[Sequence[int]]) -> list[list[int]]:
    """Per figure, the height each row draws it at: a BAND's top (the bands stacked in order), any
    other figure's value."""
    drawn, total = [], [0] * len(rows)
    for index, figure in enumerate(figures):
        column = [row[index] for row in rows]
        if figure.style == BAND:
            total = [low + value for low, value in zip(total, column)]
            drawn.append(total)
        else:
            drawn.append(column)
    return drawn


def chart(series: Series, marked: int | None, title: str, implementation: Sequence[int] | None = None,
          broken: Sequence[str] = ()) -> str:
    """A <figure> holding the SVG chart of `series` and its legend (HTML). With the marked call's
    `implementation` row, the implementation's series is drawn beside the spec's, dotted: the
    spec's up to the call before (it agreed there), its own after the marked call; `broken` names
    the invariants its state breaks there, in the marked call's label."""
    calls = max(series.calls, 1)
    columns = list(zip(*series.rows))
    bands = [index for index, figure in enumerate(series.figures) if figure.style == BAND]
    stacked, total = [], [0] * len(series.rows)
    for index in bands:
        bottom = total
        total = [low + value for low, value in zip(total, columns[index])]
        stacked.append((index, bottom, total))
    own = None if implementation is None or marked is None else [column[0] for column in _drawn(series.figures, [implementation])]
    highest = max([max(column) for column in columns] + [max(total), 1] + (own or []))
    y_step = nice_step(highest, 5)
    y_top = y_step * math.ceil(highest / y_step)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x_of(step: float) -> float:
        return LEFT + plot_w * step / calls

    def y_of(value: float) -> float:
        return TOP + plot_h * (1 - value / y_top)

    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" '
             f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}">',
             f'<rect class="plot" x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#fbfbfb" stroke="#999"/>']
    for value in range(0, y_top + 1, y_step):
        y = _fmt(y_of(value))
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y}" y2="{y}" stroke="#e3e3e3"/>')
        parts.append(f'<text class="y-tick" x="{LEFT - 8}" y="{y}" text-anchor="end" dominant-baseline="middle">{value}</text>')
    x_step = nice_step(calls, 10)
    for step in range(x_step if x_step > 1 else 1, calls + 1, x_step):
        x = _fmt(x_of(step - 0.5))
        parts.append(f'<line class="tick" x1="{x}" x2="{x}" y1="{TOP + plot_h}" y2="{TOP + plot_h + 5}" stroke="#666"/>')
        parts.append(f'<text class="x-tick" x="{x}" y="{TOP + plot_h + 18}" text-anchor="middle">{step}</text>')
    parts.append(f'<text class="axis-title" x="{LEFT + plot_w / 2}" y="{HEIGHT - 6}" text-anchor="middle">'
                 "call (each call's span shows the state right after it)</text>")
    parts.append(f'<text class="axis-title" x="16" y="{TOP + plot_h / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 16 {TOP + plot_h / 2})">{escape(series.unit)}</text>')
    for index, bottom, top in stacked:
        figure = series.figures[index]
        upper = _staircase([(x_of(s), y_of(v)) for s, v in zip(series.steps, top)])
        lower = _staircase([(x_of(s), y_of(v)) for s, v in zip(series.steps, bottom)])
        parts.append(f'<path class="band" data-figure="{escape(figure.name)}" d="{_path(upper + lower[::-1], True)}" '
                     f'fill="{COLOURS[figure.name]}" fill-opacity="0.55" stroke="none"/>')
    for index, figure in enumerate(series.figures):
        if figure.style in (LINE, LIMIT):
            line = _staircase([(x_of(s), y_of(v)) for s, v in zip(series.steps, columns[index])])
            dash = ' stroke-dasharray="7 5"' if figure.style == LIMIT else ""
            parts.append(f'<path class="line" data-figure="{escape(figure.name)}" d="{_path(line)}" fill="none" '
                         f'stroke="{COLOURS[figure.name]}" stroke-width="2.5"{dash}/>')
    if own is not None:
        parts += _implementation_lines(series, marked, implementation, own, x_of, y_of)
    if marked is not None:
        left, right = x_of(marked - 1), x_of(marked)
        middle = (left + right) / 2
        anchor = "end" if middle > LEFT + plot_w * 0.8 else "start"
        parts.append(f'<rect class="marked-call" data-step="{marked}" x="{_fmt(left)}" y="{TOP - 4}" '
                     f'width="{_fmt(right - left)}" height="{plot_h + 4}" fill="none" stroke="{MARK_COLOUR}" '
                     f'stroke-width="2.5"/>')
        parts.append(f'<text class="marked-label" x="{_fmt(right if anchor == "end" else left)}" y="{TOP - 10}" '
                     f'text-anchor="{anchor}" fill="{MARK_COLOUR}">call {marked} diverges{escape(_breaks(broken))}</text>')
    if series.stride == 1 and series.calls <= HOVER_CALLS:
        parts += _hover_spans(series, x_of, TOP, plot_h)
    parts.append("</svg>")
    return (f'<figure class="chart-figure">{"".join(parts)}'
            f"<figcaption>{_legend(series, marked, own is not None)}</figcaption></figure>")


def _breaks(broken: Sequence[str]) -> str:
    return f": your implementation breaks {', '.join(broken)}" if broken else ""


def _implementation_lines(series: Series, marked: int, values: Sequence[int], own: Sequence[int], x_of, y_of) -> list[str]:
    """The implementation's series, dotted, for each figure but the ceiling: the spec's heights up to
    the call before the marked one, then its own (`own`, the heights of its figures `values`) over
    the marked call's span, ending in a ring whose tooltip says the figure's value."""
    spec = _drawn(series.figures, series.rows)
    kept = [j for j, step in enumerate(series.steps) if step < marked]
    parts = []
    for index, figure in enumerate(series.figures):
        if figure.style == LIMIT:
            continue
        points = [(x_of(series.steps[j]), y_of(spec[index][j])) for j in kept] + [(x_of(marked), y_of(own[index]))]
        parts.append(f'<path class="implementation" data-figure="{escape(figure.name)}" d="{_path(_staircase(points))}" '
                     f'fill="none" stroke="{COLOURS[figure.name]}" stroke-width="2" stroke-dasharray="2 4"/>')
        parts.append(f'<circle class="implementation-value" data-figure="{escape(figure.name)}" '
                     f'cx="{_fmt(x_of(marked - 0.5))}" cy="{_fmt(y_of(own[index]))}" r="4.5" fill="#fff" '
                     f'stroke="{COLOURS[figure.name]}" stroke-width="2.5"><title>your implementation after call '
                     f'{marked}: {escape(figure.name)} {values[index]}</title></circle>')
    return parts


def _hover_spans(series: Series, x_of, top: float, height: float) -> list[str]:
    spans = []
    for step, row in zip(series.steps[1:], series.rows[1:]):
        figures = ", ".join(f"{figure.name} {value}" for figure, value in zip(series.figures, row))
        spans.append(f'<rect class="hover" x="{_fmt(x_of(step - 1))}" y="{top}" width="{_fmt(x_of(step) - x_of(step - 1))}" '
                     f'height="{height}" fill="transparent"><title>after call {step}: {escape(figures)}</title></rect>')
    return spans


def _legend(series: Series, marked: int | None, implementation: bool = False) -> str:
    items = []
    for figure in series.figures:
        colour = COLOURS[figure.name]
        swatch = {BAND: f'<span class="swatch band" style="background:{colour}"></span>',
                  LINE: f'<span class="swatch line" style="border-color:{colour}"></span>',
                  LIMIT: f'<span class="swatch limit" style="border-color:{colour}"></span>'}[figure.style]
        items.append(f'<li title="{escape(figure.meaning)}">{swatch}{escape(figure.name)} '
                     f'<small>{escape(figure.meaning)}</small></li>')
    if marked is not None:
        items.append(f'<li><span class="swatch mark"></span>the diverging call (call {marked})</li>')
    if implementation:
        items.append('<li class="implementation"><span class="swatch dotted"></span>your implementation, dotted '
                     f"(the same as the spec's before call {marked}; a ring: its figures after it)</li>")
    kept = "" if marked is None else " (and the diverging call)"
    drawn = "" if series.stride == 1 else (f'<li class="note">one point per {series.stride} calls{kept}, '
                                           f"of {series.calls}</li>")
    return f'<ul class="legend">{"".join(items)}{drawn}</ul>'
