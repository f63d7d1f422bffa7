"""The differential checker: `programs/` (every spec kind's programs, drawn by Hypothesis and run
beside the spec: the run, its phases, shrinking and the `check` command) and `concurrent/`
(`check --threads`: scenarios, histories, linearizability).

Layer: stands on `contract`, `sandbox`, `cmdline` and `spec`; never imports `trace`, `prove` or `docs`.
"""
