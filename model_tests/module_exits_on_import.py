"""A cache module that calls sys.exit(5) when imported (a plugin registry that gives up): checked
with --impl model_tests.module_exits_on_import:factory, it is a usage error naming the module.
Nothing imports it except those tests."""

import sys

sys.exit(5)
