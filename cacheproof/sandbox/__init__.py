"""Running the user's cache so that whatever it does the checker goes on: loading a factory,
guarded calls with a timeout, a child process (`--isolate`), and replaying a failure that may be a
hang or a crash.

Layer: imports `cacheproof.contract`, `cacheproof.cmdline` and `cacheproof.spec`; `check` and `trace`
stand on it.
"""
