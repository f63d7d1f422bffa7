"""Every difference at a diverging call of any spec kind, and why each matters.

A `contract.steps.StepDifference` says which views differ; this says how, in words a reader can
follow, and what each difference concerns. Nothing here names a kind: what is special to one is
read from its `SpecKind`:

- each differing view is split into parts by the kind's reading of it (`SpecKind.readings`: the
  block pool's free queue, each block's ref count and hash, each request's holdings) and only the
  parts that differ are listed, each with the invariants it concerns; a view the kind gives no
  reading for (or an answer not of its shape) is listed whole;
- the spec's rule for the call: the spec's own error message when it raises (its messages name the
  rule), else the operation's summary in the kind's operation table;
- the invariants the implementation's own step breaks, each with its witness (the values that
  break it), when the kind can build the step its invariants judge (`SpecKind.judge`) from the
  views before and after the call; these are said first (`contract.explaining.broken`);
- the rule of each invariant the differences concern, once.

Values are written by one `contract.explaining.names.Names` per report (`explain_all`), so a hash reads the
same in every explanation of the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

from cacheproof.contract.calls import Call, invoke
from cacheproof.contract.explaining.broken import line as broken_line
from cacheproof.contract.explaining.names import Names
from cacheproof.contract.steps import StepDifference
from cacheproof.spec.kind import BrokenInvariant, SpecKind, ViewPart, broken_by

ABSENT = "absent"
IMPLEMENTATION = "this implementation"


@dataclass(frozen=True)
class DivergingCall:
    """What explaining a difference needs besides it: the spec's views (by name) before and after
    the call, the spec's error message when the call raises on it, and the semantics the spec ran
    under (the kind's judge may judge fewer invariants under some)."""

    size: int
    difference: StepDifference
    before: dict[str, Any]
    after: dict[str, Any]
    spec_message: str | None = None
    semantics: Any = None


@dataclass(frozen=True)
class Explanation:
    """A difference in words: `broken`, one line per invariant the implementation's own step
    breaks, with its witness; `differences`, one line per difference (the outcome, each part of a
    view that differs, with the invariants it concerns); and `why`, the spec's rule for the call,
    the rules of the invariants broken and of those the differences concern."""

    differences: tuple[str, ...]
    why: tuple[str, ...]
    broken: tuple[str, ...] = ()

    def lines(self) -> tuple[str, ...]:
        """Every line, the invariants broken first."""
        return (*self.broken, *self.differences, *self.why)

    @property
    def reasons(self) -> tuple[str, ...]:
        """The invariants broken, then why: every line but the differences."""
        return (*self.broken, *self.why)


def diverging_call(kind: SpecKind, size: int, semantics: Any, calls: Sequence[Call],
                   difference: StepDifference) -> DivergingCall:
    """`calls` replayed on a fresh spec of `kind` (the earlier calls as the checker made them), its
    views read before and after the last call, whose `difference` is explained."""
    model = kind.new(size, semantics)
    for call in calls[:-1]:
        try:
            invoke(model, call)
        except Exception:  # noqa: BLE001 - a call the spec rejects changes nothing
            pass
    before = _views(kind, model)
    message = None
    try:
        invoke(model, calls[-1])
    except Exception as error:  # noqa: BLE001 - the spec's rejection is its rule in words
        message = str(error)
    return DivergingCall(size, difference, before, _views(kind, model), message, semantics)


def explain_all(kind: SpecKind, steps: Sequence[DivergingCall]) -> list[Explanation]:
    """Each of `steps` explained, the values of all of them named by one `Names` (one report)."""
    first = Names()
    for step in steps:
        explain(kind, step, first)
    names = first.settled()
    return [explain(kind, step, names) for step in steps]


def explain(kind: SpecKind, step: DivergingCall, names: Names) -> Explanation:
    """One diverging call in words (see `Explanation`)."""
    difference = step.difference
    lines: list[str] = []
    concerned: dict[str, None] = {}
    rules: dict[str, None] = {}
    if difference.outcome_differs:
        lines.append(f"outcome: spec {difference.expected.describe()}; {IMPLEMENTATION} {difference.actual.describe()}")
    for view, wanted, seen in difference.views:
        for part_line, found in _view_lines(kind, view, wanted, seen, names):
            lines.append(part_line)
            concerned.update(dict.fromkeys(found.concerns))
            if found.part is not None and found.part.rule:
                rules[found.part.rule] = None
    rule = _spec_rule(kind, step)
    why = [] if rule is None else [rule]
    broken = _broken(kind, step)
    why += [f"{invariant.name}: {invariant.rule}" for invariant in broken]
    named = {invariant.name for invariant in broken}
    why += [f"the differences concern {invariant.name}: {invariant.rule}"
            for invariant in kind.invariants if invariant.name in concerned and invariant.name not in named]
    why += [f"the differences concern the contract's rule: {rule}" for rule in rules]
    return Explanation(tuple(lines), tuple(why), tuple(broken_line(invariant) for invariant in broken))


class PartDifference(NamedTuple):
    """One part of a view where the spec and the implementation differ, in words (ABSENT where one
    of them has no such part); `part` is the reading's (None: the view shown whole), `concerns`
    what the difference concerns (`ViewPart.concerns_against`)."""

    subject: str
    spec: str
    implementation: str
    part: ViewPart | None
    concerns: tuple[str, ...] = ()


def part_differences(kind: SpecKind, view: str, wanted: Any, seen: Any, names: Names) -> list[PartDifference]:
    """Each part of `view` that differs, the spec's answer `wanted` against the implementation's
    `seen`; the view whole (subject "", part None) when the kind gives no reading of it, either
    answer is not of its shape, or the parts hide the difference (a type, an order)."""
    reading = kind.readings.get(view)
    spec_parts = _parts(reading, wanted, names)
    own_parts = _parts(reading, seen, names)
    if spec_parts is None or own_parts is None:
        return [PartDifference("", _whole(wanted, spec_parts), _whole(seen, own_parts), None)]
    spec_by, own_by = {p.subject: p for p in spec_parts}, {p.subject: p for p in own_parts}
    found = []
    for subject in dict.fromkeys([*spec_by, *own_by]):
        spec_part, own_part = spec_by.get(subject), own_by.get(subject)
        spec_text = ABSENT if spec_part is None else spec_part.text
        own_text = ABSENT if own_part is None else own_part.text
        if spec_text != own_text:
            found.append(PartDifference(subject, spec_text, own_text, spec_part or own_part,
                                        _concerns(spec_part, own_part)))
    return found or [PartDifference("", repr(wanted), repr(seen), None)]


def _view_lines(kind: SpecKind, view: str, wanted: Any, seen: Any, names: Names) -> list[tuple[str, PartDifference]]:
    """(line, its part) for each part of `view` that differs (`part_differences`)."""
    lines = []
    for found in part_differences(kind, view, wanted, seen, names):
        where = f"{view}(), {found.subject}" if found.subject else f"{view}()"
        concerns = f" (concerns {', '.join(found.concerns)})" if found.concerns else ""
        lines.append((f"{where}: spec {found.spec}; {IMPLEMENTATION} {found.implementation}{concerns}", found))
    return lines


def _concerns(spec_part: ViewPart | None, own_part: ViewPart | None) -> tuple[str, ...]:
    if spec_part is None:
        return own_part.concerns
    return spec_part.concerns_against(own_part)


def _parts(reading: Any, answer: Any, names: Names) -> Sequence[ViewPart] | None:
    if reading is None:
        return None
    try:
        return reading(answer, names)
    except Exception:  # noqa: BLE001 - an answer the reading cannot follow is shown whole
        return None


def _whole(answer: Any, parts: Sequence[ViewPart] | None) -> str:
    """An answer in one piece: its parts joined, or as Python writes it."""
    if parts is None:
        return repr(answer)
    return "; ".join(f"{part.subject} {part.text}" for part in parts) or "nothing"


def _spec_rule(kind: SpecKind, step: DivergingCall) -> str | None:
    """The spec's rule for the call: its error message, else the operation's summary."""
    operation = step.difference.call.op
    if step.spec_message:
        return f"the spec's rule for {operation}: {step.spec_message}"
    try:
        summary = kind.operation(operation).summary
    except KeyError:
        return None
    return f"the spec's rule for {operation}: {summary}" if summary else None


def _broken(kind: SpecKind, step: DivergingCall) -> list[BrokenInvariant]:
    """The invariants the implementation's own step breaks, judged on its views: the spec's before
    (it agreed there), the spec's after with the answers that differ put in; a view the
    implementation lacks is left out of both (its state there is unknown: a judge that needs it
    says nothing)."""
    if kind.judge is None or step.difference.actual.crash is not None:
        return []
    difference = step.difference
    unread = set(difference.unread)
    before = {view: answer for view, answer in step.before.items() if view not in unread}
    after = {view: answer for view, answer in {**step.after, **{view: seen for view, _, seen in difference.views}}.items()
             if view not in unread}
    try:
        judged = kind.judge(difference.call, step.size, before, after,
                            difference.actual.error is not None, difference.actual.result, step.semantics)
    except Exception:  # noqa: BLE001 - views the kind cannot judge: nothing is said of them
        return []
    return broken_by(kind.invariants, judged)


def _views(kind: SpecKind, model: Any) -> dict[str, Any]:
    return {view: kind.read_view(model, view, model) for view in kind.views}
