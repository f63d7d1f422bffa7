"""`SlotBudgetSpec`: the reference model of an encoder slot budget (vLLM's EncoderDecoderCacheManager,
and under caching "lru" its parent EncoderCacheManager as the scheduler drives it).

Each operation is written as a TLA+ action: argument checks, then the guard on the state, then the
updates; every check runs before the first update, so a call that raises changes nothing. Checks
run in a fixed order: InvalidArgumentError (the request, then the other arguments in order, then
under caching a cached item of another size) before WrongStateError.

State: the free slots; per request, its inputs in the order scheduled, each (item, slots, held).
Under caching "none": the items scheduled in this step and those of the step before, one per
scheduling; nothing is cached, so two requests that schedule one item each take its slots, and an
item is named by end_step once per scheduling. Under caching "lru": the cached items, each with
its slots and, per request, how many of its held inputs use it; the idle items (cached, held by no
request) in the order they became idle; the items evicted since the last end_step, once per
eviction. A cached item's slots stay taken until it is evicted.
"""

from __future__ import annotations

from cacheproof.spec.arguments import is_int
from cacheproof.spec.errors import InvalidArgumentError, WrongStateError
from cacheproof.spec.slots import invariants as slot_invariants
from cacheproof.spec.slots.semantics import SLOT_CONTRACT, SlotSemantics


class SlotBudgetSpec:
    """The executable spec of an encoder slot budget of `num_slots` slots (encoder embeddings), under
    `semantics` (spec/slots/semantics.py)."""

    def __init__(self, num_slots: int, semantics: SlotSemantics = SLOT_CONTRACT) -> None:
        if not is_int(num_slots) or num_slots < 1:
            raise InvalidArgumentError(f"num_slots must be an int >= 1, got {num_slots!r}")
        self.num_slots = num_slots
        self.semantics = semantics
        self._free = num_slots
        self._inputs: dict[int, list[list]] = {}  # request -> [[item, slots, held], ...]
        self._this_step: list[str] = []
        self._last_step: list[str] = []
        self._cached: dict[str, list] = {}  # item -> [slots, {request: held inputs of the item}] (caching "lru")
        self._idle: list[str] = []  # the cached items no request holds, the first to be evicted first
        self._evicted: list[str] = []  # the items evicted since the last end_step, once per eviction

    @property
    def _caches(self) -> bool:
        return self.semantics.caching == "lru"

    def schedule(self, request: int, item: str, n: int, *, budget: int, pending: int = 0) -> bool:
        """True when `n` <= `budget` (the encoder's compute budget left in this step) and `n` +
        `pending` (slots of inputs the caller admitted in this pass and has not scheduled yet) <= the
        free slots: the request gets a new input of `item` holding `n` slots, and `item` joins this
        step's items. False, changing nothing, otherwise.

        Under caching "lru": a cached item is a hit, True whatever the budgets (its output is
        computed): the new input holds the item, which takes no more slots and is no longer idle;
        InvalidArgumentError, changing nothing, when the item is cached with other than `n` slots
        (vLLM's scheduler rejects such a request: a client reused a hash for other content). A miss
        is admitted as above, but where the free slots fall short and the free and idle slots
        together do not, idle items are evicted, the first idle first, until `n` + `pending` fit."""
        self._check_request("schedule", request)
        if not isinstance(item, str):
            raise InvalidArgumentError(f"schedule(item={item!r}): an item is named by its hash, a str")
        for name, value, least in (("n", n, 1), ("budget", budget, 0), ("pending", pending, 0)):
            if not is_int(value) or value < least:
                raise InvalidArgumentError(f"schedule({name}={value!r}): must be an int >= {least}")
        cached = self._cached.get(item)
        if cached is not None:
            if cached[0] != n:
                raise InvalidArgumentError(f"schedule({request}, {item!r}, n={n}): item {item!r} is cached with "
                                           f"{cached[0]} slots; an item's hash names one output, of one size")
            self._hold(request, item, n)
            return True
        idle_slots = sum(self._cached[idle][0] for idle in self._idle)
        if n > budget or n + pending > self._free + idle_slots:
            return False
        while n + pending > self._free:
            evicted = self._idle.pop(0)
            self._free += self._cached.pop(evicted)[0]
            self._evicted.append(evicted)
        self._free -= n
        if self._caches:
            self._cached[item] = [n, {}]
        else:
            self._this_step.append(item)
        self._hold(request, item, n)
        return True

    def _hold(self, request: int, item: str, n: int) -> None:
        """A new held input of `item` for the request; under caching the item is held by one more
        input of the request, and is no longer idle."""
        self._inputs.setdefault(request, []).append([item, n, True])
        if self._caches:
            if item in self._idle:
                self._idle.remove(item)
            holders = self._cached[item][1]
            holders[request] = holders.get(request, 0) + 1

    def _release(self, request: int, entry: list) -> None:
        """The request's input `entry` is freed: its slots come back, or under caching its item is
        held by one input fewer, and goes idle (the last to be evicted) when none holds it."""
        entry[2] = False
        if not self._caches:
            self._free += entry[1]
            return
        holders = self._cached[entry[0]][1]
        holders[request] -= 1
        if not holders[request]:
            del holders[request]
        if not holders:
            self._idle.append(entry[0])

    def free_input(self, request: int, input: int) -> None:
        """Give back the slots of the request's input number `input` (0 the first it scheduled);
        WrongStateError when it holds no such input (never scheduled, or freed already)."""
        self._check_request("free_input", request)
        if not is_int(input):
            raise InvalidArgumentError(f"free_input(input={input!r}): an input is an int, its index")
        inputs = self._inputs.get(request, [])
        if not 0 <= input < len(inputs) or not inputs[input][2]:
            raise WrongStateError(f"free_input({request}, {input}): request {request} holds no input {input}")
        self._release(request, inputs[input])

    def free(self, request: int) -> None:
        """Free every input the request holds, in the order scheduled, and forget the request;
        nothing changes for a request that holds none. Under misuse "trusted" and caching "none",
        WrongStateError for a request one of whose inputs is freed already (the caller's misuse:
        such a budget gives that input back again; a caching budget knows what a request holds, as
        it drops the request's references)."""
        self._check_request("free", request)
        inputs = self._inputs.get(request, [])
        if self.semantics.misuse == "trusted" and not self._caches and not all(held for _, _, held in inputs):
            raise WrongStateError(f"free({request}): request {request} freed an input already")
        for entry in inputs:
            if entry[2]:
                self._release(request, entry)
        self._inputs.pop(request, None)

    def end_step(self) -> list[str]:
        """End the step: the items scheduled in the step before this one, once per scheduling, in
        order; this step's items are named at the next end_step. Under caching "lru": the items
        evicted since the last end_step and not cached again since, once per eviction, in order."""
        if self._caches:
            answer, self._evicted = self._named_evictions(), []
            return answer
        answer, self._last_step, self._this_step = self._last_step, self._this_step, []
        return answer

    def _named_evictions(self) -> list[str]:
        return [item for item in self._evicted if item not in self._cached]

    def reset(self) -> None:
        """Every slot free, every request forgotten, no item left to name."""
        self._free = self.num_slots
        self._inputs.clear()
        self._this_step, self._last_step = [], []
        self._cached.clear()
        self._idle.clear()
        self._evicted.clear()

    # Views and the Model protocol ---------------------------------------------------------------

    def free_slots(self) -> int:
        """The slots no scheduled, unfreed input holds; under caching "lru", no cached item."""
        return self._free

    def pending_items(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(the items scheduled in this step, those of the step before): the next end_step names the
        second, the one after it the first. Under caching "lru": ((), what the next end_step names)."""
        if self._caches:
            return (), tuple(self._named_evictions())
        return tuple(self._this_step), tuple(self._last_step)

    def cached_items(self) -> tuple[tuple[str, int, int], ...]:
        """The cached items, each (item, slots, requests holding it): the idle ones in the order
        they would be evicted, then the held ones by item; () under caching "none"."""
        held = sorted(item for item, (_, holders) in self._cached.items() if holders)
        return tuple((item, self._cached[item][0], len(self._cached[item][1])) for item in (*self._idle, *held))

    def holding_requests(self) -> tuple[int, ...]:
        """The requests that hold an input, ascending: a budget keeps nothing for any other."""
        return tuple(sorted(request for request, inputs in self._inputs.items() if any(held for _, _, held in inputs)))

    def snapshot(self) -> tuple:
        """(free slots, ((request, ((item, slots, held), ...)), ...) by request, this step's items,
        the step before's items, ((item, slots, ((request, held inputs), ...)), ...) the cached
        items idle first as `cached_items`, the items evicted since the last end_step)."""
        requests = tuple((request, tuple(tuple(entry) for entry in inputs))
                         for request, inputs in sorted(self._inputs.items()))
        cached = tuple((item, slots, tuple(sorted(self._cached[item][1].items())))
                       for item, slots, _ in self.cached_items())
        return (self._free, requests, tuple(self._this_step), tuple(self._last_step), cached,
                tuple(self._evicted))

    def state_key(self) -> tuple:
        """The snapshot: it decides every later answer and view."""
        return self.snapshot()

    def copy(self) -> "SlotBudgetSpec":
        """An independent spec in the same state."""
        twin = SlotBudgetSpec(self.num_slots, self.semantics)
        twin._free = self._free
        twin._inputs = {request: [list(entry) for entry in inputs] for request, inputs in self._inputs.items()}
        twin._this_step, twin._last_step = list(self._this_step), list(self._last_step)
        twin._cached = {item: [slots, dict(holders)] for item, (slots, holders) in self._cached.items()}
        twin._idle, twin._evicted = list(self._idle), list(self._evicted)
        return twin

    def check_invariants(self) -> None:
        """Raise `InvariantViolation` if the state breaks S1, S2 or S4 (spec/slots/invariants.py)."""
        slot_invariants.check_state(self.num_slots, self.snapshot(), self._caches)

    def inputs_of(self, request: int) -> tuple[tuple[str, int, bool], ...]:
        """The request's inputs (item, slots, held), in the order scheduled (for the call generator)."""
        return tuple(tuple(entry) for entry in self._inputs.get(request, ()))

    def live_requests(self) -> tuple[int, ...]:
        """The requests with an input, ascending (for the call generator)."""
        return tuple(sorted(self._inputs))

    def __repr__(self) -> str:
        return f"SlotBudgetSpec(num_slots={self.num_slots}, free={self._free}, requests={len(self._inputs)})"

    def _check_request(self, operation: str, request: object) -> None:
        if not is_int(request):
            raise InvalidArgumentError(f"{operation}(request={request!r}): a request id is an int")
