"""The HTML page: one self-contained file, inline CSS and SVG, no script, nothing fetched.

Its Content-Security-Policy (`default-src 'none'`) forbids any load, so the page shows the same
offline as online. Sections: the summary (input, spec kind, implementation, profile, semantics,
seed, verdict), then per case a short heading, its first difference, the invariants the
implementation's own state breaks with their witnesses, its chart (`chart`: the spec's series and
the implementation's beside it), the diverging call, the spec-against-cache table (`state_diff`),
the explanation lines, the counterexample as code (wrapped), the calls up to the diverging one (the
marked row has the id `case-N-call-STEP`), and last the invariants of the spec kind with their
rules and what the report says of each. A conforming check report's page draws the outcome
coverage per operation (`coverage`) and the run's figures instead of cases.
"""

from __future__ import annotations

from html import escape
from typing import Any, Sequence

from cacheproof.cmdline.kind_words import spec_flag
from cacheproof.contract import snippet
from cacheproof.contract.calls import to_python
from cacheproof.report.chart import chart
from cacheproof.report.coverage import coverage_chart
from cacheproof.report.inputs import CHECK_REPORT, Case, ReportInput
from cacheproof.report.series import Series, implementation_row, listed_steps
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

HEADING_LIMIT = 120
"""A case's heading is cut to this many characters (its whole first difference is under it)."""

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
pre { background: #f6f8fa; border: 1px solid #d4d4d4; padding: 10px 12px; white-space: pre-wrap; overflow-wrap: anywhere; }
pre.why { white-space: pre-wrap; word-break: break-word; }
pre.snippet { max-height: 520px; overflow: auto; }
.note { color: #555; font-style: italic; }
p.message { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 13px; overflow-wrap: anywhere; }
ul.broken { margin: 6px 0 10px; padding-left: 22px; } ul.broken li { color: #b71c1c; margin: 2px 0; }
ul.broken li strong { color: #7f0000; }
svg.coverage { max-width: 100%; height: auto; font-size: 12px; fill: #333; }
table.figures { width: auto; } table.figures th { width: 180px; }
figure.chart-figure { margin: 8px 0; } svg.chart { max-width: 100%; height: auto; font-size: 12px; fill: #333; }
svg.chart text.marked-label { font-weight: 700; font-size: 13px; }
svg.chart text.axis-title { font-weight: 600; }
ul.legend { list-style: none; padding: 0; margin: 4px 0 0; display: flex; flex-wrap: wrap; gap: 4px 18px; }
ul.legend small { color: #666; }
.swatch { display: inline-block; width: 22px; height: 12px; margin-right: 6px; vertical-align: middle; }
.swatch.band { opacity: 0.55; } .swatch.line { height: 0; border-top: 3px solid; }
.swatch.limit { height: 0; border-top: 3px dashed; } .swatch.dotted { height: 0; border-top: 3px dotted #333; } .swatch.mark { width: 4px; background: #c62828; margin: 0 15px 0 6px; }
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
        body.append('<p class="note">No call sequence to draw: the check found no divergence. What the run '
                    "reached is drawn below.</p>")
        body.append(_run(report))
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
    own = None if case.marked is None else implementation_row(report.kind, series, case.state_diff, case.complete)
    parts = [f'<section class="case" id="{anchor}">', f"<h2>{escape(_short(case.heading or case.title, HEADING_LIMIT))}</h2>",
             f'<p class="message">{escape(_short(case.title, 2000))}</p>']
    if case.broken:
        parts.append(f'<h3>Your implementation breaks {escape(", ".join(name for name, _ in case.broken))}</h3>'
                     '<ul class="broken">' + "".join(
                         f'<li id="{anchor}-breaks-{escape(name)}"><strong>{escape(name)}</strong>: {escape(witness)} '
                         f'(<a href="#invariant-{escape(name)}">the rule</a>)</li>' for name, witness in case.broken)
                     + "</ul>")
    parts.append(chart(series, case.marked, case.title, own, [name for name, _ in case.broken]))
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
    broken: dict[str, list[str]] = {}
    for number, case in enumerate(cases, start=1):
        for name, witness in case.broken:
            broken.setdefault(name, []).append(f"divergence {number}, call {case.marked}: {witness}")
    rows = []
    for invariant in kind.invariants:
        if invariant.name in waived:
            state, status = "waived", "waived under " + ", ".join(w.option for w in waived[invariant.name])
        elif invariant.name in broken:
            state, status = "broken", "broken by your implementation's state at " + "; ".join(broken[invariant.name])
        elif cases:
            state, status = "held", "not broken by your implementation's state at the diverging calls"
        elif report.form == CHECK_REPORT:
            state, status = "held", "held: your implementation's state matched the spec's at every call checked"
        else:
            state, status = "held", "held by the spec over this trace"
        rows.append(f'<tr class="{state}" id="invariant-{escape(invariant.name)}"><th>{escape(invariant.name)}</th>'
                    f"<td>{escape(invariant.rule)}</td><td>{escape(status)}</td></tr>")
    return ('<section id="invariants"><h2>Invariants checked</h2>'
            f'<p class="note">The invariants of the {escape(kind.name)} spec kind under these semantics: the checker '
            "runs the spec beside the implementation at every call, and "
            f"<code>cacheproof prove{escape(spec_flag(kind.name))}</code> proves them of the spec.</p>"
            '<table class="invariants"><thead><tr><th>name</th><th>rule</th><th>here</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></section>")


def _run(report: ReportInput) -> str:
    """A conforming run: the outcome coverage per operation, drawn, and the run's figures."""
    parts = ['<section id="run"><h2>What the run reached</h2>']
    if report.coverage is not None:
        parts.append("<h3>Outcomes reached per operation</h3>" + coverage_chart(report.coverage))
    else:
        parts.append('<p class="note">This report holds no outcome coverage.</p>')
    if report.figures:
        rows = "".join(f"<tr><th>{escape(label)}</th><td>{escape(value)}</td></tr>" for label, value in report.figures)
        parts.append(f'<h3>The run</h3><table class="figures">{rows}</table>')
    return "".join(parts) + "</section>"
