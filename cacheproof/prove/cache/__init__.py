"""The tensor cache's z3 models: aggregate bytes, per-entry slots, liveness, refinement."""
