"""A counterexample as Python that fails when run, at the observation where the checker saw it.

The snippet builds the implementation, makes each call (those the spec expects to raise inside
`with raises("ErrorName"):`), and ends with the diverging call: for a divergence (`program_snippet`)
the spec's outcome asserted, then one assertion per view that differs, each naming the spec's
answer, so the first one that fails is the first difference the checker saw. A call that hangs or
kills the process ends the snippet as it is (`render`: running it hangs or dies there); an
inspection that raises is called last, and raises.
"""

from __future__ import annotations

import enum
import re
from typing import Any, Mapping, Sequence

from cacheproof.contract import calls as call_format
from cacheproof.contract.calls import Call, ValueRecipe, recipe_of
from cacheproof.spec.kind import ViewReader

DIVERGES = "diverges here"

MEMBERSHIP = re.compile(r"(.+) in cache: spec (True|False), this cache")
"""A divergence message about `key in cache`: the key as written, and the spec's answer."""

_INSPECTIONS = {"snapshot()": "cache.snapshot()", "stats()": "cache.stats()", "len()": "len(cache)"}
_FAILED_INSPECTION = re.compile(
    r"(?P<code>cache\.\w+\(\)|len\(cache\)|snapshot\(\)|stats\(\)|len\(\)|\S+ in cache) "
    r"(?P<what>raised|returned|did not return|killed the process)\b.*, after "
)
_ENDINGS = {"raised": "raises", "returned": "returns what the contract does not allow",
            "did not return": "does not return", "killed the process": "kills the process"}


def failed_inspection(message: str) -> tuple[str, str] | None:
    """(code, ending) when `message` says an inspection after the last call failed ("snapshot() raised
    ..., after cache.put(...)", "3 in cache did not return within 10 s, after ...", and any kind's view:
    "cache.tables() did not return within 1 s, after ..."): the line the
    snippet ends with, e.g. ("cache.snapshot()", "raises"); None when the call itself failed."""
    found = _FAILED_INSPECTION.match(message)
    if found is None:
        return None
    code = _INSPECTIONS.get(found["code"], found["code"])
    return (f"print({code})" if found["what"] == "returned" else code), _ENDINGS[found["what"]]


def result_check(call: Call, expected: Any, recipe: ValueRecipe | None = None) -> str:
    """A Python condition on `result` that holds exactly when the checker takes the cache's result
    for the spec's `expected` (docs/contract.md, How results are compared). `recipe`: for a value
    returned by get or pop, the recipe of the call that stored it."""
    if recipe is not None:
        return f"values_equal(result, {recipe.python()})"
    if expected is None or isinstance(expected, bool):
        return f"result is {expected!r}"
    if isinstance(expected, enum.Enum):
        return f"getattr(result, 'name', result) == {expected.name!r}"
    if isinstance(expected, list):
        return f"isinstance(result, list) and result == {expected!r}"
    return f"type(result) is {type(expected).__name__} and result == {expected!r}"


def render(
    impl: str,
    capacity_bytes: int,
    calls: Sequence[Call],
    message: str,
    spec_errors: Sequence[str | None] = (),
    ending: str = DIVERGES,
    title: str = "cacheproof counterexample",
) -> str:
    """The snippet for `calls` on `factory(capacity_bytes)` from `impl` ("module:factory")."""
    module, _, factory = impl.partition(":")
    body = []
    errors = list(spec_errors) or [None] * len(calls)
    for call, error in zip(calls[:-1], errors):
        body.append(_call_line(call, error))
    body.extend(_ending(calls[-1], errors[-1], message, ending))
    imports = "from cacheproof.contract.values import raises, value_for"
    if "values_equal(" in "\n".join(body):
        imports += ", values_equal"
    lines = [f"# {title}: {message}", imports]
    if any("comparable_snapshot(" in line for line in body):
        lines.append("from cacheproof.spec.cache.kind import comparable_snapshot, normalize_snapshot")
    elif any("normalize_snapshot(" in line for line in body):
        lines.append("from cacheproof.spec.cache.kind import normalize_snapshot")
    lines += [f"from {module} import {factory} as factory", "", f"cache = factory({capacity_bytes})"]
    return "\n".join(lines + body) + "\n"


def _call_line(call: Call, error: str | None, marker: str = "") -> str:
    line = call_format.to_python(call)
    if error is not None:
        return f"with raises({error!r}):\n    {line}{marker}"
    return f"{line}{marker}"


def _ending(call: Call, error: str | None, message: str, ending: str) -> list[str]:
    """The failing call and what follows it: an inspection that failed first is made again last
    (`failed_inspection`); otherwise the call itself, marked (running it hangs, dies or diverges
    there), and for a divergence of `key in cache` that membership printed beside the spec's answer."""
    marker = f"  # <- {ending}"
    failed = failed_inspection(message)
    if failed is not None:
        code, what = failed
        last = _call_line(call, error) if error is not None else f"print({call_format.to_python(call)})"
        return [last, f"{code}  # <- {what}"]
    printed = f"print({call_format.to_python(call)}){marker}"
    lines = [_call_line(call, error, marker) if error is not None else printed]
    membership = MEMBERSHIP.match(message)
    if membership is not None:
        lines.append(f"print({membership.group(1)} in cache)  # <- the spec says {membership.group(2)}")
    return lines


def _escaped(text: str) -> str:
    """`text` inside a double-quoted f-string: quotes, backslashes and braces escaped."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("{", "{{").replace("}", "}}")


def program_snippet(impl: str, size: int, calls: Sequence[Call], spec_errors: Sequence[str | None],
                    difference: Any, kind: str, readers: Mapping[str, ViewReader] | None = None,
                    model: Any = None) -> str:
    """A diverging program of any spec kind (`cacheproof.contract.steps.StepDifference` at its last
    call) as Python that fails when run: the calls, those the spec rejects inside `with raises(...)`,
    then the diverging call with the spec's outcome asserted, then each differing view asserted,
    read as the kind's `readers` read it of `model` (a fresh model under the run's semantics), else
    by its method. Where the implementation's make_value failed making the last call's value, the
    snippet ends making that value, which raises there."""
    module, _, factory = impl.partition(":")
    readers = readers or {}
    body = [_call_line(call, error) for call, error in zip(calls[:-1], spec_errors)]
    last, expected = calls[-1], difference.expected
    marker = f"  # <- {DIVERGES}"
    recipe = next((argument for argument in last.args if isinstance(argument, ValueRecipe)), None)
    if difference.user_code is not None and recipe is not None:
        body.append(f"value = {recipe.python()}  # <- raises: {difference.user_code.partition(' raised ')[0]}, "
                    f"making the value of {call_format.to_python(last)}")
    elif expected.error is not None:
        body.append(_call_line(last, expected.error, marker))
    else:
        stored = recipe_of(expected.result, calls[:-1], model) \
            if last.op in ("get", "pop") and expected.result is not None and model is not None else None
        body += [f"result = {call_format.to_python(last)}{marker}",
                 f"assert {result_check(last, expected.result, stored)}, f\"spec: {_escaped(repr(expected.result))}; "
                 f"this implementation: {{result!r}}\""]
    used = [name for name in ("value_for", "values_equal") if f"{name}(" in "\n".join(body)]
    imports = ["from cacheproof.contract.values import " + ", ".join(["raises", *used])]
    for view, expected_view, _ in difference.views:
        reader = readers.get(view)
        seen = f"cache.{view}()" if reader is None else reader.python(model)
        if reader is not None and reader.imports and reader.imports not in imports:
            imports.append(reader.imports)
        body += [f"spec_{view} = {expected_view!r}",
                 f"assert {seen} == spec_{view}, f\"spec: {{spec_{view}}}; this implementation: {{({seen})}}\""]
    lines = [f"# cacheproof counterexample ({kind}): {difference.describe()}", *imports,
             f"from {module} import {factory} as factory", "", f"cache = factory({size})", *body]
    return "\n".join(lines) + "\n"
