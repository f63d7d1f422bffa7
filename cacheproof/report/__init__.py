"""`cacheproof report INPUT [-o OUT.html]`: one self-contained HTML page about a check report or a trace.

Layer: beside docs and bench (it reads the traces' readers and the spec). `inputs` reads the input,
`series` replays its calls on the spec for the figures over the calls, `state_diff` builds the
spec-against-cache table, `chart` draws the inline SVG, `page` writes the HTML, `command` is the
subcommand. docs/reports.md describes the page.
"""
