"""The differential checker: `sequential/` (the Hypothesis state machine beside the spec, the run,
its scope and the `check` command) and `concurrent/` (`check --threads`: scenarios, histories,
linearizability).

Layer: stands on `contract`, `sandbox`, `cmdline` and `spec`; never imports `trace`, `prove` or `docs`.
"""
