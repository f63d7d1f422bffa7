"""`python -m cacheproof` and the `cacheproof` command (`run`).

A Ctrl-C while the command line's modules load ends the run as one during a command does: one line
on stderr, exit 130, no traceback. (One pressed while the interpreter itself starts, before this
module runs, ends it as it ends any Python program.)
"""

import sys

from cacheproof.cmdline.statuses import INTERRUPTED_STATUS


def run() -> int:
    """The `cacheproof` command line (`cacheproof.cli.main`), loaded inside the Ctrl-C guard."""
    try:
        from cacheproof.cli import main
    except KeyboardInterrupt:
        print("cacheproof: interrupted", file=sys.stderr)
        return INTERRUPTED_STATUS
    return main()


if __name__ == "__main__":
    sys.exit(run())
