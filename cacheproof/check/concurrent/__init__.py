"""Concurrent checking (`check --threads N`): scenarios, recorded histories, linearizability."""
