import argparse
import sys

from cacheproof.bench import add_arguments, run

_parser = argparse.ArgumentParser(prog="python -m cacheproof.bench")
add_arguments(_parser)
try:
    sys.exit(run(_parser.parse_args()))
except KeyboardInterrupt:
    print("cacheproof bench: interrupted", file=sys.stderr)
    sys.exit(130)
