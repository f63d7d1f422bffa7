"""The spec-kind interface: what the checker, prover, traces and docs read from a spec.

A spec kind is one family of specs (the tensor cache, the KV block pool). It is described by plain
data: the operation table (name, arguments with their domains, result, errors, whether it mutates),
the invariant table, the size parameter its models are built with, and a `new` that builds a fresh
model. A model is the executable spec itself: one method per operation, plus the `Model` protocol
below (snapshot, invariant check, a hashable state for memoised searches, a copy).

Layers above read these tables and never name an operation or a spec class; adding a kind is
implementing this interface and registering it in `spec.kinds` (docs/architecture.md's checklist).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Hashable, NamedTuple, Protocol, Sequence


@dataclass(frozen=True)
class Argument:
    """One argument of an operation: its name, its domain (a word the kind's generators and docs
    know, e.g. "key", "nbytes", "value", "flag", "blocks"), whether it is passed by keyword, and
    its default as Python writes it (None: it has none, a call always passes it)."""

    name: str
    domain: str
    keyword: bool = False
    default: str | None = None


STORED_VALUE = "the value"
"""The `Operation.result` of an operation that returns a value stored by an earlier call (get, pop)."""


@dataclass(frozen=True)
class Operation:
    """One row of an operation table.

    `form` says how a call is written: "method" is `model.name(*args, **kwargs)`, "contains" is
    `args[0] in model`. `result` names the result's domain in words; `errors` the error classes the
    operation may raise (by class name, so the table stays plain data); `mutates` whether it may
    change the state (a read-only operation never does, whatever it returns).
    """

    name: str
    arguments: tuple[Argument, ...]
    result: str
    errors: tuple[str, ...]
    mutates: bool
    form: str = "method"
    summary: str = ""

    @property
    def positional(self) -> tuple[Argument, ...]:
        return tuple(a for a in self.arguments if not a.keyword)

    @property
    def keywords(self) -> frozenset[str]:
        return frozenset(a.name for a in self.arguments if a.keyword)

    @property
    def keyed(self) -> bool:
        """Whether the first argument names a key (the entry the call is about)."""
        return bool(self.arguments) and self.arguments[0].domain == "key"

    @property
    def stores_value(self) -> bool:
        """Whether a call stores a value: an argument of the domain "value" (its size is what the
        lifecycle reads; a trace records it as a recipe)."""
        return any(a.domain == "value" for a in self.arguments)

    @property
    def returns_value(self) -> bool:
        """Whether the result is a value stored by an earlier call (result `STORED_VALUE`): traces
        record it as that value's recipe, or as "some value" when the recipe is unknown."""
        return self.result == STORED_VALUE

    @property
    def outcomes(self) -> tuple[str, ...]:
        """Every outcome a call of this operation can have, as `outcome_name` names them: an
        operation whose result is a bool returns True or False, any other returns; then each error."""
        returns = ("returns True", "returns False") if self.result == "bool" else ("returns",)
        return (*returns, *self.errors)


def outcome_name(result: Any, error: str | None) -> str:
    """The outcome of one call, one of `Operation.outcomes`: the class name of the error it raised,
    "returns True" or "returns False" for a bool result, else "returns"."""
    if error is not None:
        return error
    return f"returns {result}" if type(result) is bool else "returns"


class KindSemantics(Protocol):
    """What every kind's semantics offers (a frozen dataclass of design choices, the defaults the
    contract's): the command line's `--semantics`, reports and `cacheproof profiles` read these."""

    def with_overrides(self, text: str) -> "KindSemantics":
        """These semantics with `FIELD=VALUE,...` applied (`spec.overrides`); InvalidArgumentError,
        one line naming the field, the value and the valid values, for an unknown field or value."""

    def differences(self) -> dict[str, Any]:
        """The fields that differ from the contract's choice, by name."""

    def as_written(self) -> dict[str, str]:
        """Every field's value as `--semantics` writes it, in field order."""


@dataclass(frozen=True)
class Profile:
    """A named semantic profile: the semantics of one design, the operations a cache or pool of that
    design has, and a summary (the kinds' profiles tables hold these). `keys` names the key domain
    its caches are checked with when no --keys is given (the tensor cache's kind: a name of
    `cacheproof.contract.keys.KEY_DOMAINS`, "str" for a cache keyed by hash strings; None: each
    scope's own keys)."""

    name: str
    semantics: KindSemantics
    operations: tuple[str, ...]
    summary: str
    keys: str | None = None


class Model(Protocol):
    """What every executable spec offers besides its operations."""

    def snapshot(self) -> Any:
        """The abstract state as plain, comparable data."""

    def check_invariants(self) -> None:
        """Raise `InvariantViolation` if the state breaks a named state invariant."""

    def state_key(self) -> Hashable:
        """The abstract state as a hashable value: equal keys, equal futures (memoised searches)."""

    def copy(self) -> "Model":
        """An independent model in the same state."""


class Naming(Protocol):
    """How one report names values (`cacheproof.contract.explaining.names.Names` is the one implementation):
    a kind's view readings write their parts with it, so that within one report a hash always has
    the same short form and the same nouns name blocks and requests."""

    def hash(self, value: Any) -> str:
        """A hash, short: "#1a2b3c…" (the same hash always the same form in one report)."""

    def thing(self, noun: str, value: Any) -> str:
        """One thing named by its noun: "block 3", "request 2"."""

    def things(self, noun: str, values: Any) -> str:
        """Several, in the order given: "blocks 1, 2, 2", "blocks 2-27, 1", "none"."""

    def value(self, value: Any) -> str:
        """Any other value, as Python writes it."""


@dataclass(frozen=True)
class ViewPart:
    """One part of a view's answer, as a difference report shows it: what it is about (`subject`:
    "free queue (head first)", "block 3", "request 2 holdings"), its value in words, and what a
    difference in it concerns: the names of the kind's invariants (`concerns`), and `rule`, a rule
    of the kind's contract that no named invariant states.

    A part read as several `pieces` (a block's ref count and its hash: `ViewPart.joined`) is shown
    whole, and a difference in it concerns what the pieces that differ concern."""

    subject: str
    text: str
    concerns: tuple[str, ...] = ()
    rule: str = ""
    pieces: tuple["ViewPart", ...] = ()

    @classmethod
    def joined(cls, subject: str, pieces: Sequence["ViewPart"], rule: str = "") -> "ViewPart":
        """One part of `pieces` (each named by its subject, its text a phrase: "ref 1", "no
        hash"), written as their texts joined: "ref 1, no hash"."""
        concerns = tuple(dict.fromkeys(name for piece in pieces for name in piece.concerns))
        return cls(subject, ", ".join(piece.text for piece in pieces), concerns, rule, tuple(pieces))

    def concerns_against(self, other: "ViewPart | None") -> tuple[str, ...]:
        """What a difference between this part and `other` (of the same subject) concerns: those
        of the pieces that differ when both are read in the same pieces, else all of this part's."""
        mine = [piece.subject for piece in self.pieces]
        if other is None or not self.pieces or mine != [piece.subject for piece in other.pieces]:
            return self.concerns
        differing = [piece for piece, theirs in zip(self.pieces, other.pieces) if piece.text != theirs.text]
        return tuple(dict.fromkeys(name for piece in differing for name in piece.concerns))


ViewReading = Callable[[Any, Naming], "Sequence[ViewPart] | None"]
"""How a view's answer reads: its parts, in the order a report lists them, or None for an answer
not of the view's shape (a broken implementation's; it is then shown whole)."""


class ViewReader(NamedTuple):
    """How the differential step reads a view: `read(target, model)` for the model or an
    implementation (the model's semantics may say what is compared), and `python(model)`, the same
    read of an implementation named `cache` as a Python expression, with the `imports` it needs
    (what a counterexample's snippet asserts on). `method`: the implementation's method the view
    calls (None: the view's name); an implementation without it is not compared on the view when
    it is `optional` (a plain LRU cache has no stats()), and differs from the spec otherwise.
    `answer(result, model)`: where given, how the method's result is read for the comparison (`read`
    is then the same on the method's result); a result it cannot read (it raises, with a text such as
    "which has no field capacity_bytes") is an answer of another shape than the contract's.
    `compared(result)`: where given with `answer`, the part of the method's result the answer is made
    of (`answer` reads nothing else of it): where the implementation's part equals the model's, the
    view agrees and neither answer is made (the tensor cache's stats: the compared fields as a tuple,
    not the dict a report shows). `model_compared(model)`: the model's part read from the model
    itself, where it has a cheaper way than its method's result (default: `compared` of that)."""

    read: Callable[[Any, Any], Any]
    python: Callable[[Any], str]
    imports: str = ""
    method: str | None = None
    optional: bool = False
    answer: Callable[[Any, Any], Any] | None = None
    compared: Callable[[Any], Any] | None = None
    model_compared: Callable[[Any], Any] | None = None


def optional_method_views(*names: str) -> dict[str, ViewReader]:
    """Views each read by calling the implementation's method of the view's name with no argument
    (`cache.NAME()`), each optional: an implementation without the method is compared on the other
    views (`SpecKind.view_readers`)."""
    return {name: ViewReader(lambda target, model, name=name: getattr(target, name)(),
                             lambda model, name=name: f"cache.{name}()", optional=True)
            for name in names}


class LookupRaised(Exception):
    """A view's reader asked the target one question (`0 in cache`: `where`, as Python writes it)
    and the target raised `error`: a report names that question rather than the view
    (`contract.steps.view_of`: "0 in cache raised RuntimeError: ...")."""

    def __init__(self, where: str, error: BaseException) -> None:
        super().__init__(where, error)
        self.where = where
        self.error = error


@dataclass(frozen=True)
class Partitioning:
    """How a kind's concurrent calls split into independent parts (P-compositionality, as Porcupine's
    `Partition`): calls of different parts never change each other's outcomes, in any order, so a
    history is searched part by part (`SpecKind.parts`).

    `part(operation, args)` is the part a call belongs to (e.g. its key), or None when it touches
    every part (evict, clear). `independent(model, calls)` says whether the parts stay independent
    through every order of `calls` (as (operation, args) pairs) run from `model`'s state, e.g. no
    call can evict another part's entry because the capacity is never reached."""

    part: Callable[[str, tuple], Hashable | None]
    independent: Callable[[Any, Sequence[tuple[str, tuple]]], bool]


@dataclass(frozen=True)
class SpecKind:
    """One spec kind: its tables and how to build its models.

    `new(size, semantics)` builds a fresh model; `size_name` says what the size counts
    ("capacity_bytes", "num_blocks"). `profiles` maps a semantic profile's name to its `Profile`
    (semantics and operation subset); `invariants` is the named invariant table; `views` names the
    read-only methods whose answers a differential check compares after every call.
    `key_domains` names the key domains `check --keys` may choose for this kind, the one its
    generator draws by default first (the names of `cacheproof.contract.keys.KEY_DOMAINS`), and
    `keys_are` says what its keys are ("entry keys", "request ids"); `--keys` naming another domain
    is a usage error that names these.

    What a difference report needs of the kind (`cacheproof.contract.explaining.steps`; both optional, a
    kind without them gets each differing view whole and the spec's rule for the call):
    `readings` maps a view to its `ViewReading` (its parts, and the invariants each concerns);
    `judge(call, size, before, after, raised, result, semantics)` makes the step its invariants'
    `holds` judge, from the views (by name) before and after a call of an implementation under the
    spec's `semantics` (a view the implementation lacks is not in them).
    `shapes` says, per view with a reading, the shape of its answer in words: an implementation
    whose answer the reading cannot follow made a usage mistake, reported once with this shape
    (`cacheproof.contract.explaining.shapes`), not a divergence.

    `view_readers` maps a view that is no plain method, or whose answer is compared in part, to its
    `ViewReader` (the tensor cache's len(), its stats' byte fields, its snapshot in the semantics'
    order); the others are called as methods.

    `state_every` says how many calls apart a differential replay (`cacheproof replay --impl`) and
    the runtime monitor compare the whole state by default: 1, after every call, with the kind's
    `views` (a view is cheap); None, every max(16, 2 x entries) calls, entries being `len(model)`
    (the tensor cache, whose views cost O(entries); a kind choosing None gives its model an O(1)
    `__len__`), the call that broke the state then found by bisection (`cacheproof.trace.replay`).

    `partitioning` says how a concurrent history splits into independent parts (`Partitioning`);
    None: never (the kind's module says why).

    `probe_size` is the size of the implementation `check` builds before any example runs, to see
    what its factory returns and which operations it has (a usage error names it: "f(64) returned
    None").

    `lookups` names the views that ask the implementation about the spec's own state (the tensor
    cache's `membership`: `key in cache` for each key the spec holds): a sequential program, a
    replay and the monitor compare them after every call, after `views` (`compared_views`); a merge
    of states never reads them, nor the final state of a concurrent run, whose spec state is one
    candidate order's among several.

    `announcements` names the views that show what the last call announced rather than a state
    (the block pool's KV cache events): a sequential program, a replay and the monitor compare them
    after every call, after `views` and `lookups` (`compared_views`); a merge of states never reads
    them, nor the final state of a concurrent run, where "the last call" has no one order.

    `types` maps each argument domain and each result of the operation table to the Python type
    the kind's contract document writes in its signatures (`cacheproof.docs.signatures` generates
    them from the table); a kind without it has no generated signatures.
    """

    name: str
    summary: str
    operations: tuple[Operation, ...]
    size_name: str
    new: Callable[..., Any]
    invariants: tuple[Any, ...]
    profiles: dict[str, Any] = field(default_factory=dict)
    default_profile: str = "contract"
    views: tuple[str, ...] = ("snapshot",)
    key_domains: tuple[str, ...] = ("int",)
    keys_are: str = "keys"
    readings: dict[str, ViewReading] = field(default_factory=dict)
    judge: Callable[..., Any] | None = None
    shapes: dict[str, str] = field(default_factory=dict)
    state_every: int | None = 1
    types: dict[str, str] = field(default_factory=dict)
    view_readers: dict[str, ViewReader] = field(default_factory=dict)
    partitioning: Partitioning | None = None
    probe_size: int = 4
    lookups: tuple[str, ...] = ()
    announcements: tuple[str, ...] = ()

    def read_view(self, target: Any, view: str, model: Any) -> Any:
        """`view` of `target` (the model or an implementation) as the differential step compares it:
        by its reader in `view_readers`, given the model (whose semantics may say what is compared),
        else the answer of the method of that name."""
        reader = self.view_readers.get(view)
        return getattr(target, view)() if reader is None else reader.read(target, model)

    def operation(self, name: str) -> Operation:
        """The table row of `name` (KeyError naming the kind and its operations otherwise)."""
        for row in self.operations:
            if row.name == name:
                return row
        raise KeyError(f"spec kind {self.name!r} has no operation {name!r}; it has {', '.join(self.names)}")

    def parts(self, model: Any, calls: Sequence[tuple[str, tuple]]) -> list[list[int]] | None:
        """The indices of `calls` ((operation, args) pairs run concurrently from `model`'s state)
        grouped into independent parts, in order of first appearance, as `partitioning` declares;
        None when the history does not split: the kind declares no partitioning, a call touches
        every part or names an unhashable part, the parts may interfere, or there is one part."""
        if self.partitioning is None:
            return None
        groups: dict[Hashable, list[int]] = {}
        for index, (operation, args) in enumerate(calls):
            part = self.partitioning.part(operation, args)
            try:
                groups.setdefault(part, []).append(index)
            except TypeError:  # an unhashable key: a bad call, checked with the whole history
                return None
            if part is None:
                return None
        if len(groups) < 2 or not self.partitioning.independent(model, calls):
            return None
        return list(groups.values())

    @cached_property
    def compared_views(self) -> tuple[str, ...]:
        """What a sequential differential step compares after every call: the views, the lookups,
        then the announcements."""
        return self.views + self.lookups + self.announcements

    @cached_property
    def names(self) -> tuple[str, ...]:
        """Every operation name, in table order."""
        return tuple(row.name for row in self.operations)

    @cached_property
    def default_operations(self) -> tuple[str, ...]:
        """The operations checked when none are named: the default profile's (every operation
        where the kind has no profiles)."""
        profile = self.profiles.get(self.default_profile)
        return self.names if profile is None else tuple(profile.operations)

    @cached_property
    def mutating(self) -> tuple[str, ...]:
        return tuple(row.name for row in self.operations if row.mutates)

    @cached_property
    def error_names(self) -> frozenset[str]:
        """The contract's error class names: every error some operation of the table may raise. An
        implementation's error is a contract error when a class of its MRO bears one of these
        names (its own classes count: errors are matched by name); any other error is a crash."""
        return frozenset(error for row in self.operations for error in row.errors)


class BrokenInvariant(NamedTuple):
    """An invariant a step breaks: its name, its rule, and the witness (the concrete values that
    break it, in words: "block 1 has ref 0 while request 2 holds it")."""

    name: str
    rule: str
    witness: str


def broken_by(invariants: Sequence[Any], step: Any) -> list[BrokenInvariant]:
    """The invariants of `invariants` (a kind's table: each with `name`, `rule`, `holds(step)` and
    `witness(step)`) that `step` breaks, in table order, each with its witness. An invariant whose
    predicate cannot judge the step (it raises on values a broken implementation answered) is left
    out; a witness that cannot be written falls back to the rule."""
    found = []
    for invariant in invariants:
        try:
            holds = invariant.holds(step)
        except Exception:  # noqa: BLE001 - an implementation's values may defeat a predicate
            continue
        if holds:
            continue
        try:
            witness = invariant.witness(step)
        except Exception:  # noqa: BLE001 - the rule still names what is broken
            witness = invariant.rule
        found.append(BrokenInvariant(invariant.name, invariant.rule, witness))
    return found
