"""The differential checker: calls and values, one differential step, the Hypothesis state machine,
the run and its shrinking, cache factories and the `check` command.

Layer: imports `cacheproof.spec` and the top-level helpers only, never `trace/`, `prove/` or `docs/`.
"""
