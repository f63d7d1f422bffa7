"""A conforming run's outcome coverage as one inline SVG chart: per operation, each outcome of the
operation table (returns, each error it may raise) as a bar of how many calls reached it.

The bars are on a log scale (one call and a hundred thousand share a page); an outcome no call
reached has no bar and is labelled "not reached" in red. Drawn here, no script, like `chart`.
"""

from __future__ import annotations

import math
from html import escape

WIDTH = 960
LABEL_W, COUNT_W, ROW_H, GROUP_GAP, TOP = 260, 90, 18, 10, 8
BAR_COLOUR, MISSING_COLOUR = "#1b9e77", "#c62828"


def coverage_chart(coverage: dict) -> str:
    """A <figure> holding the chart of `coverage` (a check report's: {"operations": {OPERATION:
    {OUTCOME: calls}}}) and a caption counting the outcomes reached."""
    operations = coverage["operations"]
    counts = [count for outcomes in operations.values() for count in outcomes.values()]
    reached, possible = sum(count > 0 for count in counts), len(counts)
    most = math.log10(max(counts + [1]) + 1)
    plot_w = WIDTH - LABEL_W - COUNT_W
    rows, y = [], TOP
    for operation, outcomes in operations.items():
        for outcome, count in outcomes.items():
            middle = y + ROW_H / 2
            rows.append(f'<text class="outcome" x="{LABEL_W - 8}" y="{middle:.1f}" text-anchor="end" '
                        f'dominant-baseline="middle">{escape(operation)} \u00b7 {escape(outcome)}</text>')
            if count > 0:
                width = max(plot_w * math.log10(count + 1) / most, 2)
                rows.append(f'<rect class="reached" data-operation="{escape(operation)}" data-outcome="{escape(outcome)}" '
                            f'x="{LABEL_W}" y="{y + 3}" width="{width:.1f}" height="{ROW_H - 6}" fill="{BAR_COLOUR}">'
                            f"<title>{escape(operation)} {escape(outcome)}: {count} calls</title></rect>")
                rows.append(f'<text class="count" x="{LABEL_W + width + 6:.1f}" y="{middle:.1f}" '
                            f'dominant-baseline="middle">{count}</text>')
            else:
                rows.append(f'<text class="not-reached" data-operation="{escape(operation)}" '
                            f'data-outcome="{escape(outcome)}" x="{LABEL_W + 2}" y="{middle:.1f}" '
                            f'dominant-baseline="middle" fill="{MISSING_COLOUR}" font-weight="600">not reached</text>')
            y += ROW_H
        y += GROUP_GAP
    height = y + TOP
    svg = (f'<svg class="coverage" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" '
           f'aria-label="outcomes reached per operation">{"".join(rows)}</svg>')
    caption = (f"{reached} of {possible} outcomes reached; each bar is the calls that reached the outcome, on a "
               "log scale")
    return f'<figure class="coverage-figure">{svg}<figcaption>{escape(caption)}</figcaption></figure>'
