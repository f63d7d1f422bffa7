"""The z3 prover: `cache/` (the tensor cache's aggregate and per-entry models, liveness, concrete
counterexamples and the bounded refinement check), the block-id proof, one-step induction and the
`prove` command.

Layer: stands on `contract`, `cmdline` and `spec`; never imports `check`, `trace` or `docs`.
"""
