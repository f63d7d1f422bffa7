"""The HTML page of a mutation duel: one self-contained file in the style of the report page
(cacheproof.report.page: inline CSS, no script, nothing loaded): the facts (each check's arguments,
numbered in the order they run), the table of counts, every mutant with who kills it and the number
of the check that killed it, and the diff of each mutant cacheproof misses."""

from __future__ import annotations

from html import escape

from cacheproof.mutate.duel import Duel, result_line
from cacheproof.report.page import STYLE
from cacheproof.version import __version__


def render_page(duel: Duel) -> str:
    """The page of `duel` (complete or interrupted)."""
    counts = duel.counts()
    verdict = ("cacheproof kills every mutant the tests kill" if duel.test_command else "cacheproof kills every mutant run") \
        + (": holds" if duel.holds() else ": does NOT hold") + (" (interrupted)" if duel.interrupted else "")
    checks = duel.check_commands()
    facts = [("module", duel.module), ("source", duel.source_path),
             *((f"check {number}", " ".join(command[3:])) for number, command in enumerate(checks, start=1)),
             ("tests", duel.test_command or "none given"),
             ("mutants", f"{len(duel.results)} run of {duel.chosen} chosen ({duel.generated} generated)")]
    body = [
        f"<header><h1>cacheproof mutate {escape(duel.module)}</h1>",
        f'<p class="verdict {"passes" if duel.holds() else "fails"}">{escape(verdict)}</p></header>',
        '<table class="facts">' + "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts) + "</table>",
        "<h2>Counts</h2>",
        '<table class="figures">' + "".join(f"<tr><th>{escape(k)}</th><td>{v}</td></tr>" for k, v in counts.items()) + "</table>",
        "<h2>Mutants</h2><table><tr><th>#</th><th>line</th><th>change</th><th>who kills</th><th>killing check</th></tr>",
    ]
    for result in duel.sorted_results():
        mark = ' class="differs"' if not result.cacheproof.killed else ""
        body.append(f"<tr{mark}><td>{result.mutant.number}</td><td>{result.mutant.line}</td>"
                    f"<td>{escape(result.mutant.operator)}: {escape(result.mutant.description)}</td>"
                    f"<td>{escape(result.category)}</td><td>{result.killing_check or ''}</td></tr>")
    body.append("</table>")
    missed = duel.missed_by_cacheproof()
    if missed:
        body.append("<h2>Missed by cacheproof</h2>")
    for result in missed:
        body.append(f"<h3>{escape(result_line(result, len(checks)))}</h3><pre>{escape(result.diff)}</pre>")
    body.append(f"<footer>Written by cacheproof {escape(__version__)} mutate. One self-contained file; it loads nothing.</footer>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>cacheproof mutate {escape(duel.module)}</title><style>{STYLE}</style></head>\n<body>\n"
        + "\n".join(body) + "\n</body></html>\n"
    )
