"""`cacheproof report INPUT [-o OUT.html]`: the HTML page of a check report or a trace.

INPUT is a `cacheproof check --json` report (any spec kind), a trace of the tensor cache
(`check --trace-out`, a monitor's trace) or a program trace (the block pool's). The page is one
file that loads nothing (docs/reports.md). Without -o the page is INPUT with its suffix replaced
by `.html` (r.json -> r.html, cache.trace -> cache.html), beside it. Exit 0 when the page is written, 2 on a usage error: an
input that is none of these (the message names the path and what is wrong), or an OUT that cannot
be written (checked before any work).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cacheproof.cmdline.output_paths import OutputPathError, refuse_unwritable, write_atomically
from cacheproof.report.inputs import ReportInput, ReportInputError, read_input
from cacheproof.report.page import render_page
from cacheproof.report.series import replay_series
from cacheproof.contract.explaining.names import Names
from cacheproof.report.state_diff import state_diff


EXIT_STATUSES = {0: "the page is written"}
EXAMPLE = "cacheproof report report.json          # writes report.html"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", type=Path, metavar="INPUT",
                        help="a `cacheproof check --json` report, or a trace (--trace-out, a monitor's, a block pool's)")
    parser.add_argument("-o", "--out", type=Path, metavar="OUT.html",
                        help="the HTML file to write; default: INPUT with the suffix .html (r.json -> r.html)")
    parser.add_argument("--quiet", action="store_true", help="print nothing on success")


def page_of(report: ReportInput) -> str:
    """The page: every case replayed on the spec (`series`), its state diff, rendered (`page`). The
    state diffs' values are named alike on the whole page (a first pass notes every hash)."""
    replayed = [(case, replay_series(report.kind, case.size, report.semantics, case.calls, case.marked))
                for case in report.cases]
    first = Names()
    for case, series in replayed:
        state_diff(report.kind, case, series, first)
    names = first.settled()
    return render_page(report, [(case, series, state_diff(report.kind, case, series, names)) for case, series in replayed])


def default_out(input_path: Path) -> Path:
    """Where the page goes without -o: INPUT with its suffix replaced by .html, beside it."""
    return input_path.with_suffix(".html")


def run(args: argparse.Namespace) -> int:
    if args.out is None:
        args.out = default_out(args.input)
        if args.out == args.input:
            print(f"cacheproof report: the input {str(args.input)!r} already ends in .html, so the page would "
                  "overwrite it; name the page with -o OUT.html (nothing was written)", file=sys.stderr)
            return 2
    if refuse_unwritable("report", {"--out": args.out}):
        return 2
    try:
        report = read_input(args.input)
    except ReportInputError as error:
        print(f"cacheproof report: {error}", file=sys.stderr)
        return 2
    try:
        write_atomically(args.out, page_of(report))
    except OutputPathError as error:
        print(f"cacheproof report: {error}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(f"wrote {args.out}: {report.verdict} ({len(report.cases)} "
              f"{'case' if len(report.cases) == 1 else 'cases'} drawn)")
    return 0
