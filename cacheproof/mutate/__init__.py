"""`cacheproof mutate`: mutation testing of an installed module, cacheproof check against the
user's own tests (operators, install, sides, duel, page, command)."""
