"""The radix cache's proofs: the z3 model of its tree, the induction proofs and the refinement check."""
