"""The shared contract vocabulary: calls, values, outcomes and their comparison, every difference at
a diverging step and why, call sequences and their shrinking, the trace record, runnable snippets,
and what can stop a run other than a divergence.

Layer: imports `cacheproof.spec` only; `check`, `prove`, `trace` and `sandbox` stand on it.
"""
