"""Sequential checking: spec and cache side by side under a Hypothesis state machine."""
