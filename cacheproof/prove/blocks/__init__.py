"""The block pool's prover (`cacheproof prove --spec blocks`): a z3 model of BlockPoolSpec's
pool-level state at N blocks, one-step induction of B1-B4, B6 (lookup), B7 and B8 over every
pool-level operation, the per-block argument for any number of blocks, counterexamples as call
sequences, and a bounded refinement check against the spec (docs/block-proofs.md)."""
