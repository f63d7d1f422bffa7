"""The z3 prover: the aggregate and per-entry models, one-step induction, liveness, concrete
counterexamples, the block-id proof and the `prove` command.

Layer: imports `cacheproof.spec` and `cacheproof.check` (calls and values), never `trace/` or `docs/`.
"""
