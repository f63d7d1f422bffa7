"""Announcements: what a call tells an observer besides its answer and the state it leaves (a KV
cache's events), read as views of the last call (`SpecKind.announcements`).

`announcing_calls(fresh)` makes the decorator of a kind's operations: a call starts with
`self._events = fresh()`, which its steps fill, and a call that raises leaves a fresh one again,
since a call that raises changes nothing and so announces nothing.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

Operation = TypeVar("Operation", bound=Callable[..., Any])


def announcing_calls(fresh: Callable[[], Any]) -> Callable[[Operation], Operation]:
    """The decorator of a spec kind's operations whose announcements `fresh()` starts (see the module)."""
    def announcing(operation: Operation) -> Operation:
        @functools.wraps(operation)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            self._events = fresh()
            try:
                return operation(self, *args, **kwargs)
            except BaseException:
                self._events = fresh()
                raise
        return call  # type: ignore[return-value]
    return announcing
