"""Encoder slot budgets for the checker's own tests, standard library only: a reference budget written
apart from the spec (`SlotBudget`, the kind's implementation in the core environment), a correct
variant the checker must never flag, and broken ones (one bug each) that `cacheproof check --spec
slots` must find. BROKEN maps each broken class to the invariant or answer that shows its bug.

The reference keeps what a scheduler's budget keeps: a free count, per request the slots of each
input it scheduled (None once freed), and the hashes to name at the next two step ends.
"""

from __future__ import annotations

import threading

from cacheproof.spec import InvalidArgumentError, WrongStateError

_NEVER = threading.Event()


def _int(value: object) -> bool:
    return type(value) is int


class SlotBudget:
    """A correct slot budget of `num_slots` slots, checking its callers (the contract's misuse
    "checked")."""

    def __init__(self, num_slots: int) -> None:
        self.num_slots = num_slots
        self.available = num_slots
        self.requests: dict[int, list] = {}  # request -> [item slots, or None once freed]
        self.scheduled: list[str] = []
        self.to_name: list[str] = []

    def schedule(self, request, item, n, *, budget, pending=0):
        self._check_schedule(request, item, n, budget, pending)
        if n > budget or self.available < n + pending:
            return False
        self.available -= n
        self.requests.setdefault(request, []).append(n)
        self.scheduled.append(item)
        return True

    def _check_schedule(self, request, item, n, budget, pending):
        if not _int(request) or not isinstance(item, str):
            raise InvalidArgumentError(f"schedule({request!r}, {item!r}): a request is an int, an item a str")
        if not (_int(n) and n > 0 and _int(budget) and budget >= 0 and _int(pending) and pending >= 0):
            raise InvalidArgumentError(f"schedule(n={n!r}, budget={budget!r}, pending={pending!r}): counts out of range")

    def free_input(self, request, input):
        if not _int(request) or not _int(input):
            raise InvalidArgumentError(f"free_input({request!r}, {input!r}): ints expected")
        slots = self.requests.get(request, [])
        if input < 0 or input >= len(slots) or slots[input] is None:
            raise WrongStateError(f"free_input({request}, {input}): not held")
        self.available += slots[input]
        slots[input] = None

    def free(self, request):
        if not _int(request):
            raise InvalidArgumentError(f"free({request!r}): a request is an int")
        self.available += sum(n for n in self.requests.pop(request, []) if n is not None)

    def end_step(self):
        named, self.to_name, self.scheduled = self.to_name, self.scheduled, []
        return named

    def reset(self):
        self.available = self.num_slots
        self.requests.clear()
        self.scheduled, self.to_name = [], []

    def free_slots(self):
        return self.available

    def pending_items(self):
        return tuple(self.scheduled), tuple(self.to_name)


class HeldSlotsBudget(SlotBudget):
    """Correct, counted another way: the free slots are computed from the held inputs at each read."""

    def free_slots(self):
        return self.num_slots - sum(n for slots in self.requests.values() for n in slots if n is not None)


class FreesTwice(SlotBudget):
    """free(request) gives back every input the request scheduled, freed ones again (what vLLM's
    EncoderDecoderCacheManager does): S1/S2 once an input is freed before its request."""

    def __init__(self, num_slots: int) -> None:
        super().__init__(num_slots)
        self.given_back: dict[int, list[int]] = {}

    def free(self, request):
        if not _int(request):
            raise InvalidArgumentError(f"free({request!r}): a request is an int")
        self.available += sum(n for n in self.requests.pop(request, []) if n is not None)
        self.available += sum(self.given_back.pop(request, []))

    def free_input(self, request, input):
        slots = self.requests.get(request, []) if _int(request) else []
        n = slots[input] if _int(input) and 0 <= input < len(slots) else None
        super().free_input(request, input)
        self.given_back.setdefault(request, []).append(n)

    def reset(self):
        super().reset()
        self.given_back.clear()


class NamesItemsAtOnce(SlotBudget):
    """end_step names this step's items, not the step before's: the runner drops an encoder output
    before the model used it (S3)."""

    def end_step(self):
        named, self.scheduled = self.scheduled, []
        return named


class RefusesAtEquality(SlotBudget):
    """A schedule of exactly the free slots is refused (vLLM mutant #134's `<`): the budget's last
    slots are never used."""

    def schedule(self, request, item, n, *, budget, pending=0):
        self._check_schedule(request, item, n, budget, pending)
        if n + pending == self.available:
            return False
        return super().schedule(request, item, n, budget=budget, pending=pending)


class LockedSlotBudget(SlotBudget):
    """Correct under threads: every call under one lock."""

    def __init__(self, num_slots: int) -> None:
        super().__init__(num_slots)
        self._lock = threading.RLock()

    def schedule(self, request, item, n, *, budget, pending=0):
        with self._lock:
            return super().schedule(request, item, n, budget=budget, pending=pending)

    def free_input(self, request, input):
        with self._lock:
            return super().free_input(request, input)

    def free(self, request):
        with self._lock:
            return super().free(request)

    def end_step(self):
        with self._lock:
            return super().end_step()

    def reset(self):
        with self._lock:
            return super().reset()

    def free_slots(self):
        with self._lock:
            return super().free_slots()


class FreeCountInSixBits(SlotBudget):
    """The free count kept in six bits: wrong only for budgets of 64 slots or more, which only the
    wide scope (`--thorough`) builds."""

    def free_slots(self):
        return self.available & 63


class EndStepHangs(SlotBudget):
    """end_step never returns (a deadlock on the scheduler's lock)."""

    def end_step(self):
        _NEVER.wait(600)
        return super().end_step()


class FreeSlotsOneShort(SlotBudget):
    """A correct budget whose view reports one free slot fewer than it has: its answers are right,
    only a comparison of views finds it."""

    def free_slots(self):
        return self.available - 1


BROKEN = {
    "FreesTwice": "S1",
    "NamesItemsAtOnce": "end_step",
    "RefusesAtEquality": "schedule",
}
"""Each broken budget here, with the invariant or the operation whose answer shows its bug."""


class CachingSlotBudget:
    """A correct caching budget (profile `contract-caching`, misuse "checked"): one entry per item
    with its size and a count of held inputs per request; entries no input holds wait in an ordered
    dict, the oldest evicted first when a new item needs room."""

    profile = "contract-caching"

    def __init__(self, num_slots: int) -> None:
        self.num_slots = num_slots
        self.sizes: dict[str, int] = {}
        self.users: dict[str, dict[int, int]] = {}
        self.unused: dict[str, None] = {}  # insertion-ordered: the eviction order
        self.requests: dict[int, list] = {}  # request -> [item, or None once freed]
        self.dropped: list[str] = []

    def _taken(self):
        return sum(self.sizes.values())

    def schedule(self, request, item, n, *, budget, pending=0):
        SlotBudget._check_schedule(self, request, item, n, budget, pending)
        if item in self.sizes:
            if self.sizes[item] != n:
                raise InvalidArgumentError(f"schedule({item!r}, {n}): cached with {self.sizes[item]} slots")
        else:
            reclaimable = sum(self.sizes[name] for name in self.unused)
            if n > budget or n + pending > self.num_slots - self._taken() + reclaimable:
                return False
            while n + pending > self.num_slots - self._taken():
                oldest = next(iter(self.unused))
                del self.unused[oldest], self.sizes[oldest], self.users[oldest]
                self.dropped.append(oldest)
            self.sizes[item], self.users[item] = n, {}
        self.unused.pop(item, None)
        self.users[item][request] = self.users[item].get(request, 0) + 1
        self.requests.setdefault(request, []).append(item)
        return True

    def _let_go(self, request, item):
        users = self.users[item]
        users[request] -= 1
        if users[request] == 0:
            del users[request]
        if not users:
            self.unused[item] = None

    def free_input(self, request, input):
        if not _int(request) or not _int(input):
            raise InvalidArgumentError(f"free_input({request!r}, {input!r}): ints expected")
        items = self.requests.get(request, [])
        if input < 0 or input >= len(items) or items[input] is None:
            raise WrongStateError(f"free_input({request}, {input}): not held")
        self._let_go(request, items[input])
        items[input] = None

    def free(self, request):
        if not _int(request):
            raise InvalidArgumentError(f"free({request!r}): a request is an int")
        for item in self.requests.pop(request, []):
            if item is not None:
                self._let_go(request, item)

    def end_step(self):
        named = [item for item in self.dropped if item not in self.sizes]
        self.dropped = []
        return named

    def reset(self):
        self.__init__(self.num_slots)

    def free_slots(self):
        return self.num_slots - self._taken()

    def pending_items(self):
        return (), tuple(item for item in self.dropped if item not in self.sizes)

    def cached_items(self):
        held = sorted(item for item in self.sizes if item not in self.unused)
        return tuple((item, self.sizes[item], len(self.users[item])) for item in [*self.unused, *held])

    def holding_requests(self):
        return tuple(sorted(request for request, items in self.requests.items() if any(i is not None for i in items)))


class EvictsNewestIdle(CachingSlotBudget):
    """Evicts the item that went idle last, not first: an output that was just used is dropped
    while older ones stay (an LRU that is an MRU)."""

    def schedule(self, request, item, n, *, budget, pending=0):
        self.unused = dict(reversed(self.unused.items()))
        try:
            return super().schedule(request, item, n, budget=budget, pending=pending)
        finally:
            self.unused = dict(reversed(self.unused.items()))


class IgnoresComputeBudget(CachingSlotBudget):
    """A miss is admitted over the encoder's compute budget (vLLM encoder_cache_manager #27's
    `return False` gone): the step runs more encoder work than it may."""

    def schedule(self, request, item, n, *, budget, pending=0):
        return super().schedule(request, item, n, budget=max(budget, n), pending=pending)


class KeepsFinishedRequests(CachingSlotBudget):
    """free_input leaves a request whose inputs are all freed in its table (vLLM
    encoder_cache_manager #92): an empty entry per finished request, a leak."""

    def holding_requests(self):
        return tuple(sorted(self.requests))


CACHING_BROKEN = {
    "EvictsNewestIdle": "cached_items",
    "IgnoresComputeBudget": "schedule",
    "KeepsFinishedRequests": "holding_requests",
}
"""Each broken caching budget, with the view or operation whose answer shows its bug."""
