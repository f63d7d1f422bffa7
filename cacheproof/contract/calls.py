"""A call on a cache as plain data: what the checker generates, prints, stores and replays.

Values inside a call are `ValueRecipe`s, made concrete for each cache by `value_for`, so one call
sequence drives the spec and any cache alike. JSON form: `{"op", "args", "kwargs"}`, a recipe as
`{"nbytes": n, "tag": t, "element_size": e}` (no "element_size" for a recipe without one), a tuple
as `{"tuple": [...]}`, bytes (keys such as b"1") as `{"bytes": "<hex>"}`; other values are JSON's
own. Keys that format alike stay distinct: 1, "1", b"1", ("img", 1) and ("img", "1") each decode
to themselves. A recipe is a size, never the bytes.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

from cacheproof.contract.values import recipe_problem, value_or_user_error, values_equal
from cacheproof.spec.cache.values import element_size_for


class ValueRecipe(NamedTuple):
    """A value of nbytes bytes of `element_size`-byte elements made from tag (see
    `cacheproof.contract.values.value_for`); element_size None: a recipe that records none (a trace
    written before recipes had one), made as before."""

    nbytes: int
    tag: int
    element_size: int | None = None

    def problem(self) -> str | None:
        """Why this is no recipe (`cacheproof.contract.values.recipe_problem`), or None."""
        return recipe_problem(self.nbytes, self.tag, self.element_size)

    def resized(self, nbytes: int) -> "ValueRecipe":
        """This recipe at `nbytes` bytes, of 1-byte elements where its element size no longer fits
        them (a shrinker lowering a byte count keeps a valid recipe)."""
        recipe = self._replace(nbytes=nbytes)
        return recipe if recipe.problem() is None else recipe._replace(element_size=1)

    def python(self, cache_name: str = "cache") -> str:
        """The recipe as Python: `value_for(cache, nbytes, tag)`, with `element_size=` when it has one."""
        size = "" if self.element_size is None else f", element_size={self.element_size}"
        return f"value_for({cache_name}, {self.nbytes}, {self.tag}{size})"

    def value(self, cache: Any, capacity_bytes: int | None = None) -> Any:
        """The value `cache` is given for this recipe (`value_or_user_error`)."""
        return value_or_user_error(cache, self.nbytes, self.tag, capacity_bytes, self.element_size)


def drawn_recipe(nbytes: int, tag: int) -> ValueRecipe:
    """The recipe the checker makes of a drawn size and tag: its element size picked by the tag among
    those dividing nbytes (`cacheproof.spec.cache.values.element_size_for`; tag 0, and an odd or
    empty nbytes, give 1)."""
    return ValueRecipe(nbytes, tag, element_size_for(nbytes, tag))


class Call(NamedTuple):
    """One operation with its arguments, e.g. Call("acquire", (3, 8), {"retain": False})."""

    op: str
    args: tuple = ()
    kwargs: dict = {}


def invoke(cache: Any, call: Call, values_from: Any = None, capacity_bytes: int | None = None) -> Any:
    """Run `call` on `cache` and return its result (exceptions propagate).

    Value recipes are made by `values_from` (default: `cache` itself), so the spec can be handed
    values equal to those the cache under test gets; a recipe above `capacity_bytes` (default:
    `cache.capacity_bytes`, if it has one) is never built (see `value_for`). A call without a
    recipe is passed on as it is, its capacity never read.
    """
    args, kwargs = call.args, call.kwargs
    if any(isinstance(a, ValueRecipe) for a in args) or kwargs and any(
            isinstance(a, ValueRecipe) for a in kwargs.values()):
        maker = cache if values_from is None else values_from
        if capacity_bytes is None:
            capacity_bytes = getattr(cache, "capacity_bytes", None)
        args = tuple(_concrete(maker, a, capacity_bytes) for a in args)
        kwargs = {name: _concrete(maker, a, capacity_bytes) for name, a in kwargs.items()}
    if call.op == "contains":
        return args[0] in cache
    return getattr(cache, call.op)(*args, **kwargs)


def _concrete(cache: Any, argument: Any, capacity_bytes: int | None) -> Any:
    if isinstance(argument, ValueRecipe):
        return argument.value(cache, capacity_bytes)
    return argument


def to_json(call: Call) -> dict:
    return {
        "op": call.op,
        "args": [encode_value(a) for a in call.args],
        "kwargs": {name: encode_value(a) for name, a in call.kwargs.items()},
    }


def from_json(data: dict) -> Call:
    return Call(
        data["op"],
        tuple(decode_value(a) for a in data.get("args", [])),
        {name: decode_value(a) for name, a in data.get("kwargs", {}).items()},
    )


def encode_value(value: Any) -> Any:
    """One argument or result in the JSON form (recipes and tuples tagged)."""
    if isinstance(value, ValueRecipe):
        if value.element_size is None:
            return {"nbytes": value.nbytes, "tag": value.tag}
        return {"nbytes": value.nbytes, "tag": value.tag, "element_size": value.element_size}
    if isinstance(value, tuple):
        return {"tuple": [encode_value(v) for v in value]}
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    return value


def decode_value(value: Any) -> Any:
    """The inverse of `encode_value`."""
    if isinstance(value, dict) and set(value) in ({"nbytes", "tag"}, {"nbytes", "tag", "element_size"}):
        return ValueRecipe(value["nbytes"], value["tag"], value.get("element_size"))
    if isinstance(value, dict) and set(value) == {"tuple"}:
        return tuple(decode_value(v) for v in value["tuple"])
    if isinstance(value, dict) and set(value) == {"bytes"}:
        return bytes.fromhex(value["bytes"])
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    return value


def to_python(call: Call, cache_name: str = "cache") -> str:
    """The call as a Python expression, values written as `value_for(cache, nbytes, tag)` (with
    `element_size=` where the recipe has one)."""
    args = [_python(a, cache_name) for a in call.args]
    args += [f"{name}={_python(a, cache_name)}" for name, a in call.kwargs.items()]
    if call.op == "contains":
        return f"{args[0]} in {cache_name}"
    return f"{cache_name}.{call.op}({', '.join(args)})"


def _python(value: Any, cache_name: str) -> str:
    if isinstance(value, ValueRecipe):
        return value.python(cache_name)
    return repr(value)


def recipe_of(value: Any, calls: Sequence[Call], target: Any) -> ValueRecipe | None:
    """The recipe, among those `calls` store (commit and put, latest first), whose value made for
    `target` equals `value` (the value a get or pop returned: which stored recipe it is)."""
    for call in reversed(calls):
        if call.op in ("commit", "put") and len(call.args) == 2 and isinstance(call.args[1], ValueRecipe):
            recipe = call.args[1]
            if values_equal(value, recipe.value(target)):
                return recipe
    return None
