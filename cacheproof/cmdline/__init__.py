"""What every command shares: flag types with plain-word errors, output files checked before any
work and written atomically, progress bars and the summary table.

Layer: imports nothing of cacheproof but `cacheproof.spec`.
"""
