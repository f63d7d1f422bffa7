"""Where the browser of the HTML report's tests is (model_tests/test_report_browser.py), and what a
run without one says. Apart from that module because it skips on import without a browser: a test
that only needs these names (model_tests/test_new_user.py) must not skip with it.
"""

from __future__ import annotations

import os
import shutil

BROWSER_NAMES = ("chromium", "chromium-browser")
"""The commands looked up on PATH for the browser, first found first."""
BROWSER_MISSING = ("Chromium is missing, so the HTML report's browser tests do not run: install the system package "
                   "(`apt-get install -y chromium` on Debian/Ubuntu) to run them; under CI this is a failure")


def under_ci() -> bool:
    """Whether the environment variable CI says this is a CI run (set, and not "0" or "false")."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


def find_browser() -> str | None:
    """The browser's path: the first of `BROWSER_NAMES` on PATH, or None."""
    return next((path for path in map(shutil.which, BROWSER_NAMES) if path is not None), None)
