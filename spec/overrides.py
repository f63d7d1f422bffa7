"""`--semantics FIELD=VALUE,...`: the override text every kind's semantics read, one parser for all.

A kind's semantics is a frozen dataclass whose fields are its design choices, each with a table of
valid values. `overridden` applies an override text to one; `option_value` reads one field's value
as a command line writes it (the value's `str`, any case). A wrong text is an
`InvalidArgumentError` of one line naming the field, the value given and the values allowed.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any, Callable, ClassVar, Iterator, Mapping

from cacheproof.spec.errors import InvalidArgumentError


def override_items(text: str) -> Iterator[tuple[str, str]]:
    """(field, raw value) for each `FIELD=VALUE` of `text`, comma-separated; an item without `=` is
    an InvalidArgumentError."""
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, raw = item.partition("=")
        if not sep:
            raise InvalidArgumentError(f"--semantics {item!r}: write FIELD=VALUE")
        yield name.strip(), raw.strip()


def overridden(semantics: Any, text: str, parse_value: Callable[[str, str], Any]) -> Any:
    """`semantics` with each `FIELD=VALUE` of `text` applied; `parse_value(field, raw)` reads a value
    (and refuses an unknown field or value)."""
    return replace(semantics, **{name: parse_value(name, raw) for name, raw in override_items(text)})


def option_value(options: Mapping[str, tuple[Any, ...]], name: str, raw: str,
                 all_fields: tuple[str, ...] | None = None) -> Any:
    """The value of field `name` among `options` (field -> valid values) written as `raw`;
    InvalidArgumentError naming the fields (`all_fields`, default those of `options`), or the
    field, `raw` and the valid values."""
    if name not in options:
        raise InvalidArgumentError(f"unknown semantics field {name!r}; fields: {', '.join(all_fields or tuple(options))}")
    for choice in options[name]:
        if written(choice) == raw.lower():
            return choice
    raise InvalidArgumentError(f"{name}={raw!r}: valid values are {', '.join(written(c) for c in options[name])}")


def written(value: Any) -> str:
    """A plain field value as `--semantics` writes it."""
    return str(value).lower()


def written_differences(semantics: Any) -> dict[str, str]:
    """The fields of a kind's semantics that differ from its contract (`differences`), as
    `--semantics` writes them (`as_written`): what reports and headers record."""
    written_values = semantics.as_written()
    return {name: written_values[name] for name in semantics.differences()}


class OptionSemantics:
    """What a kind's semantics of plain choices shares (`KindSemantics`): mixed into a frozen
    dataclass whose every field takes one of `OPTIONS[field]`, the defaults the contract's.

    A value outside its field's options (a bool is not an int here) is an InvalidArgumentError
    naming the class, the field and the valid values, raised when the semantics are built."""

    OPTIONS: ClassVar[Mapping[str, tuple[Any, ...]]] = {}

    def __post_init__(self) -> None:
        for name, valid in self.OPTIONS.items():
            value = getattr(self, name)
            if not any(value == choice and type(value) is type(choice) for choice in valid):
                raise InvalidArgumentError(
                    f"{type(self).__name__}.{name}={value!r}: valid values are {', '.join(map(repr, valid))}"
                )

    def differences(self) -> dict[str, Any]:
        """The fields that differ from the contract's choice, by name."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != f.default}

    def with_overrides(self, text: str) -> Any:
        """These semantics with `FIELD=VALUE,...` applied; an unknown field or value raises
        InvalidArgumentError naming it and the valid ones."""
        return overridden(self, text, lambda name, raw: option_value(self.OPTIONS, name, raw))

    def as_written(self) -> dict[str, str]:
        """Every field's value as `--semantics` writes it, in field order."""
        return {f.name: written(getattr(self, f.name)) for f in fields(self)}
