"""The KV block pool's spec: `BlockPoolSpec` (pool.py, with the request level of manager.py), its
operation table, invariants B1-B8, semantics and profiles (docs/block-pool-contract.md)."""
