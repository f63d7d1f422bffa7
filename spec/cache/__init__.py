"""The tensor cache's spec: `CacheSpec` (model.py), its operation table, rules, per-entry steps,
transition table, invariants I1-I6, semantics and profiles (docs/contract.md)."""
