"""Traces: the JSON-lines trace format, replay of a trace against the spec or a cache, and the
runtime monitor that records one.

Layer: stands on `contract`, `sandbox`, `cmdline` and `spec`; never imports `check`, `prove` or `docs`.
"""
