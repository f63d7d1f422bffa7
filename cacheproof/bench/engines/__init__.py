"""Benchmarks of a built-in implementation against an engine's own class on one workload: the
block pool against vLLM's BlockPool, the radix cache against SGLang's RadixCache (each engine in
the engines venv; without it the built-in is measured alone)."""
