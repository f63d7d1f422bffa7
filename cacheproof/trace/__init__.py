"""Traces: the JSON-lines trace format, replay of a trace against the spec or a cache, and the
runtime monitor that records one.

Layer: imports `cacheproof.spec` and `cacheproof.check`, never `prove/` or `docs/`.
"""
