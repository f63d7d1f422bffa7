"""The HTML page: one self-contained file, inline CSS and SVG, no script, nothing fetched.

Its Content-Security-Policy (`default-src 'none'`) forbids any load, so the page shows the same
offline as online. Sections: the summary (input, spec kind, implementation, profile, semantics,
seed, verdict), then per case its chart (`chart`), the diverging call, the spec-against-cache
table (`state_diff`), the explanation lines, the counterexample as code, the calls up to the
diverging one (the marked row has the id `case-N-call-STEP`), and last the invariants of the spec
kind with their rules.
"""

from __future__ import annotations

import re
from html import escape
from typing import Any, Sequence

from cacheproof.cmdline.kind_words import spec_flag
from cacheproof.contract import snippet
from cacheproof.contract.calls import to_python
from cacheproof.report.chart import chart
from cacheproof.report.inputs import Case, ReportInput
from cacheproof.report.series import Series, listed_steps
from cacheproof.report.state_diff import AS_WRITTEN, StateDiff
from cacheproof.spec.cache.invariants import waivers
from cacheproof.spec.kinds import get_kind
from cacheproof.version import __version__

CODE_CALLS = 200
"""Up to this many calls a case without a snippet of its own is written out as code; a longer
sequence (a monitor's trace) gets the replay command instead."""

TEXT_LIMIT = 240
"""A call or an outcome longer than this is cut in the call list and the table (a large value's repr)."""

PLACEHOLDER_IMPL = "MODULE:FACTORY"

_BROKEN = re.compile(r"\bbreaks ([A-Z][0-9]+)\b")
"""How an explanation line names an invariant the cache's step breaks (`contract.explain`)."""

STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: #1d1d1d; background: #fff; margin: 0 auto; padding: 20px 28px 40px; max-width: 1040px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 34px 0 8px; padding-top: 12px; border-top: 2px solid #ddd; word-break: break-word; }
h3 { font-size: 15px; margin: 20px 0 6px; color: #333; }
.verdict { font-size: 17px; font-weight: 600; margin: 0 0 14px; }
.verdict.fails { color: #b71c1c; } .verdict.passes { color: #1b5e20; }
table { border-collapse: collapse; width: 100%; margin: 4px 0 8px; }
th, td { border: 1px solid #d4d4d4; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; font-weight: 600; }
table.facts { width: auto; } table.facts th { width: 150px; }
table.diff { table-layout: fixed; } table.diff th:first-child { width: 24%; } table.diff th:last-child { width: 9%; }
td.value, td.call, pre, code { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 13px; }
td.value, td.call { word-break: break-word; }
tr.differs td { background: #fdecea; } tr.differs td.status { color: #b71c1c; font-weight: 600; }
tr.same td { color: #555; } tr.unknown td { color: #777; font-style: italic; }
tr.marked td { background: #fdecea; font-weight: 600; } tr.marked td:first-child { border-left: 4px solid #c62828; }
tr.gap td { color: #777; font-style: italic; text-align: center; }
tr.broken td { background: #fdecea; } tr.waived td { color: #777; }
pre { background: #f6f8fa; border: 1px solid #d4d4d4; padding: 10px 12px; overflow-x: auto; white-space: pre; }
pre.why { white-space: pre-wrap; word-break: break-word; }
pre.snippet { max-height: 520px; overflow: auto; }
.note { color: #555; font-style: italic; }
figure.chart-figure { margin: 8px 0; } svg.chart { max-width: 100%; height: auto; font-size: 12px; fill: #333; }
svg.chart text.marked-label { font-weight: 700; font-size: 13px; }
svg.chart text.axis-title { font-weight: 600; }
ul.legend { list-style: none; padding: 0; margin: 4px 0 0; display: flex; flex-wrap: wrap; gap: 4px 18px; }
ul.legend small { color: #666; }
.swatch { display: inline-block; width: 22px; height: 12px; margin-right: 6px; vertical-align: middle; }
.swatch.band { opacity: 0.55; } .swatch.line { height: 0; border-top: 3px solid; }
.swatch.limit { height: 0; border-top: 3px dashed; } .swatch.mark { width: 4px; background: #c62828; margin: 0 15px 0 6px; }
footer { margin-top: 36px; color: #666; font-size: 13px; border-top: 1px solid #ddd; padding-top: 8px; }
"""


def _short(text: str, limit: int = TEXT_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def render_page(report: ReportInput, drawn: Sequence[tuple[Case, Series, StateDiff]]) -> str:
    """The page of `report`, each case with its series and state diff."""
    failing = any(case.marked is not None for case, _, _ in drawn)
    body = [
        "<header><h1>cacheproof report</h1>",
        f'<p class="verdict {"fails" if failing else "passes"}">{escape(report.verdict)}</p></header>',
        _facts(report),
    ]
    if not drawn:
        body.append('<p class="note">No call sequence to draw: the check found no divergence.</p>')
    for number, (case, series, diff) in enumerate(drawn, start=1):
        body.append(_case(report, number, case, series, diff))
    body.append(_invariants(report, [case for case, _, _ in drawn]))
    body.append(f"<footer>Written by cacheproof {escape(__version__)} from <code>{escape(report.source)}</code>. "
                "One self-contained file: inline SVG and CSS, no script; it loads nothing.</footer>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>cacheproof report: {escape(report.verdict)}</title><style>{STYLE}</style></head>\n<body>\n"
        + "\n".join(body) + "\n</body></html>\n"
    )


def _facts(report: ReportInput) -> str:
    rows = "".join(f"<tr><th>{escape(label)}</th><td>{escape(value)}</td></tr>" for label, value in report.facts)
    return f'<section id="summary"><table class="facts">{rows}</table></section>'


def _case(report: ReportInput, number: int, case: Case, series: Series, diff: StateDiff) -> str:
    anchor = f"case-{number}"
    parts = [f'<section class="case" id="{anchor}">', f"<h2>{escape(_short(case.title, 400))}</h2>",
             chart(series, case.marked, case.title)]
    if case.marked is not None:
        call = case.calls[case.marked - 1]
        parts.append(f'<h3>The diverging call</h3><p class="diverging">call {case.marked} of {len(case.calls)}: '
                     f"<code>{escape(_short(to_python(call)))}</code></p>")
        heading = f"Spec against cache after call {case.marked}"
    else:
        parts.append('<p class="note">No call is marked: this trace records no divergence. A trace holds the '
                     "spec's outcomes; the call where a cache parts from them is marked when a monitor recorded it "
                     "(<code>observed</code>). To find it for a cache, run <code>cacheproof replay "
                     f"{escape(report.source)} --impl {PLACEHOLDER_IMPL}</code>.</p>")
        heading = f"The spec after the last call ({len(case.calls)})"
    parts.append(f"<h3>{heading}</h3>")
    if not diff.cache_known:
        parts.append("<p class=\"note only-spec\">Only the spec's side is known: the input records nothing of the "
                     "cache's state here.</p>")
    parts.append(_diff_table(diff))
    if case.why:
        parts.append("<h3>Why</h3><pre class=\"why\"><code>" + escape("\n".join(case.why)) + "</code></pre>")
    parts.append("<h3>The counterexample as code</h3>" + _code(report, case, series))
    parts.append(f"<h3>The calls</h3>{_calls(anchor, case, series)}</section>")
    return "".join(parts)


def _diff_table(diff: StateDiff) -> str:
    rows = []
    for row in diff.rows:
        if row.status == AS_WRITTEN:
            rows.append(f'<tr class="differs"><th>{escape(row.field)}</th>'
                        f'<td class="value" colspan="2">{escape(_short(row.spec, 2000))}</td><td class="status">differs</td></tr>')
        else:
            rows.append(f'<tr class="{row.status}"><th>{escape(row.field)}</th><td class="value">{escape(_short(row.spec))}</td>'
                        f'<td class="value">{escape(_short(row.cache))}</td><td class="status">{row.status}</td></tr>')
    return ('<table class="diff"><thead><tr><th>field</th><th>spec</th><th>cache</th><th></th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def _code(report: ReportInput, case: Case, series: Series) -> str:
    """The input's snippet; else the calls up to the marked one written as a snippet; else (too many
    calls) the replay command."""
    if case.snippet:
        return f'<pre class="snippet"><code>{escape(case.snippet)}</code></pre>'
    end = len(case.calls) if case.marked is None else case.marked
    if end == 0:
        return '<p class="note">The trace holds no call.</p>'
    if end > CODE_CALLS:
        return (f'<p class="note">{end} calls: too many to write out. Replay them against your cache: </p>'
                f'<pre class="snippet"><code>cacheproof replay {escape(report.source)} --impl '
                f"{escape(report.impl or PLACEHOLDER_IMPL)}</code></pre>")
    impl = report.impl or PLACEHOLDER_IMPL
    ending = snippet.DIVERGES if case.marked is not None else "the trace ends here"
    message = (*case.differences, *case.why, case.title)[0]
    code = snippet.render(impl, case.size, case.calls[:end], message, series.errors[:end], ending)
    note = "" if report.impl else f'<p class="note">The input names no implementation: put yours for {PLACEHOLDER_IMPL}.</p>'
    return f'{note}<pre class="snippet"><code>{escape(code)}</code></pre>'


def _calls(anchor: str, case: Case, series: Series) -> str:
    listed = listed_steps(len(case.calls), case.marked)
    rows = []
    if listed.start > 1:
        rows.append(f'<tr class="gap"><td colspan="3">calls 1 to {listed.start - 1} not listed (the chart shows them)</td></tr>')
    for step in listed:
        marked = step == case.marked
        attributes = f' class="marked" id="{anchor}-call-{step}"' if marked else ""
        outcome = series.outcomes.get(step, "")
        rows.append(f"<tr{attributes}><td>{step}{' &#9664; diverges' if marked else ''}</td>"
                    f'<td class="call">{escape(_short(to_python(case.calls[step - 1])))}</td>'
                    f'<td class="value">{escape(_short(outcome))}</td></tr>')
    if listed.stop <= len(case.calls):
        rows.append(f'<tr class="gap"><td colspan="3">calls {listed.stop} to {len(case.calls)} not listed</td></tr>')
    return ('<table class="calls"><thead><tr><th>#</th><th>call</th><th>the spec</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def _invariants(report: ReportInput, cases: Sequence[Case]) -> str:
    kind = get_kind(report.kind)
    waived: dict[str, Any] = waivers(report.semantics) if report.kind == "cache" else {}
    named = {name for case in cases for line in (*case.why, *case.differences) for name in _BROKEN.findall(line)}
    rows = []
    for invariant in kind.invariants:
        if invariant.name in waived:
            state, status = "waived", "waived under " + ", ".join(w.option for w in waived[invariant.name])
        elif invariant.name in named:
            state, status = "broken", "broken by the cache's step (the report's explanation)"
        else:
            state, status = "held", "held by the spec"
        rows.append(f'<tr class="{state}" id="invariant-{escape(invariant.name)}"><th>{escape(invariant.name)}</th>'
                    f"<td>{escape(invariant.rule)}</td><td>{escape(status)}</td></tr>")
    return ('<section id="invariants"><h2>Invariants checked</h2>'
            f'<p class="note">The invariants of the {escape(kind.name)} spec kind under these semantics: the checker '
            "runs the spec beside the implementation at every call, and "
            f"<code>cacheproof prove{escape(spec_flag(kind.name))}</code> proves them of the spec.</p>"
            '<table class="invariants"><thead><tr><th>name</th><th>rule</th><th>here</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></section>")
