import sys

from cacheproof.cli import main

sys.exit(main())
