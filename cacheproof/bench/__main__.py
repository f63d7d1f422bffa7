"""`python -m cacheproof.bench KIND ...`: the same as `cacheproof bench KIND ...` (statuses, messages)."""

import sys

from cacheproof.cli import main

sys.exit(main(["bench", *sys.argv[1:]]))
