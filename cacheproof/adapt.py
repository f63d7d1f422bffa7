"""The adapter kit: what adapters over an engine's cache keep writing by hand, written once.

An adapter gives a peer's cache the contract's interface (docs/contract.md) so that
`cacheproof check --impl` can run it. Most of one is translation, and these helpers are that
translation, each with its rule stated in its docstring:

- results: `value_or_missing` (a peer's None for a miss becomes the contract's UnknownKeyError),
  `evicted_keys` (whatever a peer returns for its victims becomes the list of evicted keys) and
  `keys_removed` (the victims of a peer that does not report them, from its keys before and after);
- errors: `ErrorRule` and `translated_errors` (a peer's exceptions become contract errors by type
  and message);
- state: `snapshot_from_table` (snapshot() from a peer's internal ordered table) and
  `stats_from_snapshot` (stats() from that snapshot);
- sizes and values: `SizeUnit` (sizes a peer counts in slots, tokens or pages, as bytes) and
  `as_tensor`/`make_tensor` (the checker's values as the torch tensors a peer takes);
- references: `References` (a peer that refers to holders by request id gets one per acquire) and
  `Requests` (request ids shared by several acquires, each an input of its request);
- engines: `AdapterError`, `engine_call`, `require_members`, `module_names` (the adapter's
  expectations of an engine's class, failing as usage errors, never as the cache's outcome),
  `Atomic` (a look-up and the call it chooses under one lock) and `factory_profile` (the profile
  an adapter's factory carries).

docs/adapters.md walks through an adapter built from them. Only `cacheproof.spec` is imported:
an adapter module stays importable without the checker.
"""

from __future__ import annotations

import inspect
import re
import sys
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from cacheproof.spec import CacheError, CacheStats, EntryState, EntryView, InvalidArgumentError, UnknownKeyError
from cacheproof.spec.cache.values import ELEMENT_FILL_MODULUS, dtype_name_for, value_size

# Results ------------------------------------------------------------------------------------------


def value_or_missing(operation: str, key: Hashable, value: Any) -> Any:
    """`value`, unless it is None: then UnknownKeyError naming the operation and the key.

    Rule: for a peer whose get/pop answer a miss with None, under the contract's get_missing=error.
    (Under get_missing=none, return the peer's None as it is.) A cached None cannot be told from a
    miss this way; a peer that may cache None needs a membership test instead.
    """
    if value is None:
        raise UnknownKeyError(f"{operation}({key!r}): the key is absent")
    return value


def evicted_keys(victims: Any) -> list[Hashable]:
    """The evicted keys a peer reported, as the contract's list, in the peer's order.

    Rule: None (nothing evicted) is []; a mapping gives its keys in order (a peer returning
    {key: value}); a list, tuple or generator of keys is listed as it is; a list of (key, value)
    pairs gives the first item of each. A set is refused with TypeError: its order is arbitrary and
    the contract's order (oldest first) is compared.
    """
    if victims is None:
        return []
    if isinstance(victims, Mapping):
        return list(victims)
    if isinstance(victims, (set, frozenset)):
        raise TypeError("evicted_keys: a set has no order; the contract lists evicted keys oldest first")
    listed = list(victims)
    if listed and all(isinstance(item, tuple) and len(item) == 2 for item in listed):
        return [item[0] for item in listed]
    return listed


def keys_removed(before: Iterable[Hashable], after: Iterable[Hashable], *, keep: Hashable = None) -> list[Hashable]:
    """The keys of `before` missing from `after`, in `before`'s order, `keep` (the key just stored) aside.

    Rule: for a peer that evicts silently (a put that pops its oldest entries and returns a bool),
    list its keys (oldest first) before the call and after it; the keys that left are its victims.
    O(len(before) + len(after)).
    """
    remaining = set(after)
    return [key for key in before if key not in remaining and key != keep]


# Errors -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ErrorRule:
    """A peer's exception that stands for a contract error.

    `raised`: the peer's exception class (or a tuple of them), matched with isinstance;
    `error`: the contract error class it becomes (UnknownKeyError, WrongStateError, ...);
    `message`: None (any message) or a regular expression searched in str(exception), for a peer
    that raises one class (ValueError, RuntimeError, AssertionError) for several reasons.
    """

    raised: type[BaseException] | tuple[type[BaseException], ...]
    error: type[CacheError]
    message: str | None = None

    def matches(self, exception: BaseException) -> bool:
        if not isinstance(exception, self.raised):
            return False
        return self.message is None or re.search(self.message, str(exception)) is not None


@contextmanager
def translated_errors(rules: Iterable[ErrorRule], operation: str, key: Any = None) -> Iterator[None]:
    """Run the block; an exception the first matching rule names is raised as that rule's contract
    error, its message "operation(key): peer's ClassName: peer's message", chained to the original.

    Rule: rules are tried in order and the first match wins, so list a message-specific rule before
    a catch-all of the same class. An exception no rule matches propagates unchanged (the checker
    reports it as the cache's outcome); contract errors raised inside the block pass through as
    they are.
    """
    rules = tuple(rules)
    try:
        yield
    except CacheError:
        raise
    except Exception as exception:
        for rule in rules:
            if rule.matches(exception):
                where = operation if key is None else f"{operation}({key!r})"
                raise rule.error(f"{where}: {type(exception).__name__}: {exception}") from exception
        raise


# State --------------------------------------------------------------------------------------------

Field = str | Callable[[Any], Any] | Any
"""How to read one field of a peer's record: an attribute name (str), a function of the record,
or, for anything else, a constant."""


def snapshot_from_table(
    table: Mapping[Hashable, Any] | Iterable[tuple[Hashable, Any]],
    *,
    nbytes: Field,
    refcount: Field = 0,
    state: Field = EntryState.READY,
    retain: Field = True,
    newest_first: bool = False,
) -> tuple[EntryView, ...]:
    """The contract's snapshot() (EntryViews, oldest first) from a peer's internal table.

    `table` is an ordered mapping key -> record (an OrderedDict, a dict in insertion order), or
    (key, record) pairs, oldest first unless `newest_first`. Each field is read by `Field` rules:
    `nbytes="size_bytes"` reads record.size_bytes, `refcount=len` counts a set of request ids,
    `state=lambda r: EntryState.READY if r.value is not None else EntryState.RESERVED`; a constant
    is used for every entry (a plain LRU: refcount 0, READY, retained). `state` reads as an
    EntryState or a bool (True: READY, False: RESERVED). Rule: the record is read, never changed, and
    the table is walked once: O(entries).
    """
    items = table.items() if isinstance(table, Mapping) else table
    views = tuple(
        EntryView(key, _state(_read(state, record)), _read(refcount, record), _read(nbytes, record),
                  _read(retain, record))
        for key, record in items
    )
    return tuple(reversed(views)) if newest_first else views


def stats_from_snapshot(capacity_bytes: int, snapshot: Iterable[EntryView]) -> CacheStats:
    """The contract's stats() byte counts computed from a snapshot, by the contract's definitions.

    Rule: reserved = referenced RESERVED entries' bytes; pinned = READY entries with refcount > 0;
    idle = entries with refcount 0 (READY, or an abandoned reservation kept under
    abandoned_reservation="kept"); ready = pinned + idle; free = capacity - ready; entries = the count. The
    counters (hits, misses, ...) are 0: the checker does not compare them. A peer whose own counters
    disagree with its table is then checked only through the table.
    """
    reserved = pinned = idle = entries = 0
    for view in snapshot:
        entries += 1
        if view.refcount == 0:
            idle += view.nbytes
        elif view.state is EntryState.RESERVED:
            reserved += view.nbytes
        else:
            pinned += view.nbytes
    return CacheStats(
        capacity_bytes=capacity_bytes, ready_bytes=pinned + idle, reserved_bytes=reserved, pinned_bytes=pinned,
        idle_bytes=idle, free_bytes=capacity_bytes - pinned - idle, entries=entries,
    )


def _read(field: Field, record: Any) -> Any:
    if isinstance(field, str):
        return getattr(record, field)
    if callable(field) and not isinstance(field, type):
        return field(record)
    return field


def _state(value: Any) -> EntryState:
    if isinstance(value, EntryState):
        return value
    if isinstance(value, bool):
        return EntryState.READY if value else EntryState.RESERVED
    raise TypeError(f"snapshot_from_table: state {value!r} is not an EntryState or a bool (True: READY)")


# Sizes --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SizeUnit:
    """A peer's unit of capacity (an encoder slot, a token, a page) worth `nbytes` bytes.

    Rule: exact. A byte count converts to units only when it is a whole number of them; otherwise
    InvalidArgumentError names the key, the bytes and the unit, and nothing is called on the peer.
    The checker draws small byte sizes, so check with `SizeUnit(1)` (one unit per byte) and run
    the engine with its real unit (hidden size x element size for an embedding slot).
    """

    nbytes: int = 1
    name: str = "slot"

    def __post_init__(self) -> None:
        if not isinstance(self.nbytes, int) or isinstance(self.nbytes, bool) or self.nbytes < 1:
            raise InvalidArgumentError(f"SizeUnit: nbytes must be an int >= 1, got {self.nbytes!r}")

    def units(self, nbytes: int, key: Any = None) -> int:
        """`nbytes` in units; InvalidArgumentError when it is not a whole number of them."""
        count, rest = divmod(nbytes, self.nbytes)
        if rest:
            named = "" if key is None else f"{key!r}: "
            raise InvalidArgumentError(
                f"{named}{nbytes} bytes are not a whole number of {self.name}s of {self.nbytes} bytes"
            )
        return count

    def bytes(self, units: int) -> int:
        """`units` in bytes."""
        return units * self.nbytes

    def units_of(self, value: Any, key: Any = None) -> int:
        """The size of a value (cacheproof.spec.cache.values.value_size) in units."""
        size = value_size(value)
        if size is None:
            raise InvalidArgumentError(f"{'' if key is None else repr(key) + ': '}{type(value).__name__} has no size")
        return self.units(size, key)


def as_tensor(value: Any) -> Any:
    """`value` as a torch tensor with the same bytes: a tensor as it is; bytes, bytearray, memoryview
    or a numpy array (the checker's oversized stand-in values) as a new uint8 tensor of those bytes.

    Rule: the size is kept (value_size of the result equals value_size of the value), so a peer
    that sizes by numel x element_size sees the size the spec sees. torch is imported on first use.
    """
    import numpy
    import torch

    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        array = numpy.frombuffer(bytes(value), dtype=numpy.uint8)
    else:  # contiguous first: a broadcast view of several-byte elements has no uint8 view
        array = numpy.ascontiguousarray(value).reshape(-1).view(numpy.uint8)
    return torch.from_numpy(array.copy())


def make_tensor(nbytes: int, tag: int, element_size: int | None = None) -> Any:
    """The checker's value recipe (nbytes, tag, element_size) as a torch tensor: an adapter's
    `make_value` for a peer that stores tensors. Without an element size, uint8 filled with
    tag % 256; with one, a dtype of that size picked by tag (`spec.cache.values.dtype_name_for`:
    float16, bfloat16, float32... as engines cache), filled with tag % ELEMENT_FILL_MODULUS."""
    import torch

    if element_size is None:
        return torch.full((nbytes,), tag % 256, dtype=torch.uint8)
    dtype = getattr(torch, dtype_name_for(element_size, tag))
    return torch.full((nbytes // element_size,), tag % ELEMENT_FILL_MODULUS, dtype=dtype)


# References ---------------------------------------------------------------------------------------


class _Holders:
    """The holders of each key, most recent last: `give_back(key)` returns the most recent and forgets
    it (None when key has none); `forget(key)` drops them all (None: of every key)."""

    def __init__(self) -> None:
        self._holders: dict[Hashable, list[Any]] = {}

    def give_back(self, key: Hashable) -> Any:
        holders = self._holders.get(key)
        if not holders:
            return None
        holder = holders.pop()
        if not holders:
            del self._holders[key]
        return holder

    def forget(self, key: Hashable | None = None) -> None:
        """Drop the holders of key (None: of every key), as when the peer drops the entry."""
        if key is None:
            self._holders.clear()
        else:
            self._holders.pop(key, None)


class References(_Holders):
    """Synthetic holder ids for a peer that counts references as a set of request ids.

    Rule: each `take(key)` makes a new id ("req-1", "req-2", ...), never reused, and records it as
    a holder of key; `give_back(key)` returns the most recent holder of key and forgets it, or None
    when key has none (the contract's release then decides: an error or a no-op). So the n-th
    acquire and the n-th release of a key pass the peer n distinct ids, as n requests would.
    """

    def __init__(self, prefix: str = "req-") -> None:
        self._prefix = prefix
        self._made = 0
        super().__init__()

    def take(self, key: Hashable) -> str:
        self._made += 1
        holder = f"{self._prefix}{self._made}"
        self._holders.setdefault(key, []).append(holder)
        return holder

    def count(self, key: Hashable) -> int:
        return len(self._holders.get(key, ()))


class Requests(_Holders):
    """Request ids for a peer that counts references per request and per input of a request (vLLM's
    encoder cache: a request's `mm_features[input_id]`), shared by several acquires.

    Rule: `take(key)` is one acquire: its request is the next of `requests` ids in turn ("req-0",
    "req-1", ...; None: a new request each time, as `References`), and its input id is the next of
    that request's, so with n requests the (n+1)-th acquire comes from a request that made one
    already, and one request may hold the same key twice at two inputs (vLLM #54284).
    `give_back(key)` returns the most recent (request, input) holding key and forgets it, or None;
    `undo(key)` forgets the last take of key (an acquire the peer refused); `holding(request)` says
    whether the request holds any key still.
    """

    def __init__(self, requests: int | None = 2, prefix: str = "req-") -> None:
        self._requests, self._prefix = requests, prefix
        self._made = 0
        self.inputs: dict[str, list[tuple[Hashable, int]]] = {}  # request -> its inputs (key, size)
        super().__init__()

    def take(self, key: Hashable, size: int = 0) -> tuple[str, int]:
        number = self._made if self._requests is None else self._made % self._requests
        self._made += 1
        request = f"{self._prefix}{number}"
        inputs = self.inputs.setdefault(request, [])
        inputs.append((key, size))
        holder = (request, len(inputs) - 1)
        self._holders.setdefault(key, []).append(holder)
        return holder

    def undo(self, key: Hashable) -> None:
        self.give_back(key)

    def holding(self, request: str) -> bool:
        """Whether `request` still holds some key (an input taken and not given back)."""
        return any(holder[0] == request for holders in self._holders.values() for holder in holders)


# Engines ------------------------------------------------------------------------------------------


class AdapterError(BaseException):
    """An adapter's expectation of an engine's class failed: a member it uses is missing, a call does
    not fit the member's signature, or a name it takes from the class's module is not there.

    Rule: the checker reports it as a usage error (exit 2) naming the member or the signature, never
    as the cache's outcome: it says the adapter and the engine's version disagree, not that the
    engine is wrong. A BaseException, so neither the engine's `except Exception` nor Hypothesis
    swallows it.
    """


def _owner_name(owner: Any) -> str:
    cls = owner if isinstance(owner, type) else type(owner)
    return f"{cls.__module__}.{cls.__qualname__}"


def engine_member(owner: Any, name: str) -> Any:
    """getattr(owner, name); AdapterError naming the class and the member when it has none.

    Rule: only the look-up is guarded; an AttributeError raised by a property's own code is
    reported the same way (the member cannot be read, which is the adapter's expectation failing).
    """
    try:
        return getattr(owner, name)
    except AttributeError as error:
        raise AdapterError(f"{_owner_name(owner)} has no member {name!r} ({error})") from error


_SIGNATURES: dict[tuple[type, str], inspect.Signature | None] = {}


def engine_call(owner: Any, name: str, /, *args: Any, **kwargs: Any) -> Any:
    """owner.name(*args, **kwargs), with the adapter's expectation checked first.

    Rule: a missing member, or arguments that do not bind to the member's signature, raise
    AdapterError naming the member and its signature before anything is called; whatever the call
    itself raises (a TypeError inside the engine's method included) is the engine's outcome and
    passes through. Signatures are read once per class and member.
    """
    method = engine_member(owner, name)
    slot = (type(owner), name)
    if slot not in _SIGNATURES:
        try:
            _SIGNATURES[slot] = inspect.signature(method)
        except (TypeError, ValueError):  # a builtin without a signature: nothing to check
            _SIGNATURES[slot] = None
    signature = _SIGNATURES[slot]
    if signature is not None:
        try:
            signature.bind(*args, **kwargs)
        except TypeError as error:
            raise AdapterError(
                f"{_owner_name(owner)}.{name}{signature} does not take the adapter's arguments: {error}"
            ) from None
    return method(*args, **kwargs)


def require_members(cls: type, names: Iterable[str], what: str = "") -> None:
    """AdapterError listing every name of `names` that `cls` lacks (checked when the adapter is built).

    Rule: only class attributes are looked at (methods, properties); instance attributes set in
    `__init__` are checked where they are read, with `engine_member`.
    """
    missing = [name for name in names if not hasattr(cls, name)]
    if missing:
        raise AdapterError(
            f"{_owner_name(cls)} lacks {', '.join(map(repr, missing))}{what}: the adapter expects "
            "another version of the class"
        )


def module_names(cls: type, *names: str) -> tuple[Any, ...]:
    """The names an adapter needs (a result type, an enum) from `cls`'s own module, in order.

    Rule: taken from the module that defines the class, so a stand-in or a patched class brings
    its own; a missing name is AdapterError naming the module and the name.
    """
    module = sys.modules.get(cls.__module__)
    found = []
    for name in names:
        if module is None or not hasattr(module, name):
            raise AdapterError(f"module {cls.__module__} (of {cls.__qualname__}) has no {name!r}")
        found.append(getattr(module, name))
    return tuple(found)


class Atomic:
    """A look-up and the call it chooses, under one lock: `with atomic: ...`.

    Rule: the lock is the engine's own (attribute `lock_name`, default `_lock`) when it is a
    re-entrant lock, so the engine's methods, which take it again, run inside the adapter's block;
    otherwise (an engine without a lock, driven by one thread, as vLLM's and SGLang's schedulers
    drive theirs) it is a lock of the adapter's, which serialises the adapter's calls as that
    thread does. Without it, "is the key present? then release it" reads a state that another
    thread changes before the release, and the checker reports a history the engine never made.
    """

    _RLOCK = type(threading.RLock())

    def __init__(self, engine: Any, lock_name: str = "_lock") -> None:
        own = getattr(engine, lock_name, None)
        self.lock = own if isinstance(own, self._RLOCK) else threading.RLock()

    def __enter__(self) -> None:
        self.lock.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.lock.release()


def factory_profile(factory: Any) -> str | None:
    """The profile name an adapter's factory carries: its `profile` attribute, a str or a function
    returning one (an adapter whose profile depends on the installed class), or None.

    Rule: `cacheproof check` uses it when no --profile is given; a function is called once, and an
    ImportError it raises (the engine is not installed) propagates to the caller.
    """
    profile = getattr(factory, "profile", None)
    if callable(profile):
        profile = profile()
    return profile
