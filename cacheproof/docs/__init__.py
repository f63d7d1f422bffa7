"""The generators of docs/invariants.md and docs/lifecycle.md, and the `docs` command.

Layer: the top; reads the spec and the prover's models.
"""
