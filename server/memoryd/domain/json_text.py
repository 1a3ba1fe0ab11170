"""JSON object text sent by clients (message and memory metadata): what is accepted.

Accepted is the text of one JSON object (RFC 8259) of at most `max_bytes` UTF-8 bytes, nested at
most MAX_DEPTH levels, whose numbers fit (integers of at most MAX_INTEGER_DIGITS digits, other
numbers finite as doubles) and whose strings are Unicode (no unpaired UTF-16 surrogate escape
such as "\\ud800", which no UTF-8 text can hold). Everything else is InvalidArgument with the
reason; parsing never raises anything else, so no metadata can reach a CHECK (json_valid) or an
encoder that would refuse it after the request was accepted.
"""

from __future__ import annotations

import json
import math
from typing import Any

from memoryd.domain.quoting import clipped
from memoryd.errors import InvalidArgument, Reason

MAX_DEPTH = 64
# CPython refuses to convert longer digit strings (sys.get_int_max_str_digits).
MAX_INTEGER_DIGITS = 4300


class _Refused(ValueError):
    """A number the parser met that memoryd does not accept; the text says why."""


def parse_object(
    text: str, field: str, max_bytes: int, *, setting: str | None = None
) -> dict[str, Any]:
    """The object `text` holds; anything else is refused with the reason.

    `setting` names the configuration key of `max_bytes`, for the message.
    """
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        where = f" ({setting})" if setting else ""
        raise InvalidArgument(
            f"{field} is {size} bytes; the limit is {max_bytes}{where}",
            reason=Reason.VALUE_TOO_LONG,
            field=field,
        )
    try:
        value = json.loads(
            text, parse_constant=_refuse_constant, parse_int=_integer, parse_float=_finite
        )
    except json.JSONDecodeError as error:
        raise InvalidArgument(
            f"{field} is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}",
            field=field,
        ) from None
    except _Refused as error:
        raise InvalidArgument(f"{field} is not valid JSON: {error}", field=field) from None
    except RecursionError:
        raise InvalidArgument(
            f"{field} is nested more than {MAX_DEPTH} levels deep", field=field
        ) from None
    if not isinstance(value, dict):
        raise InvalidArgument(
            f"{field} must be a JSON object, got {_json_type(value)}", field=field
        )
    if _depth(value) > MAX_DEPTH:
        raise InvalidArgument(f"{field} is nested more than {MAX_DEPTH} levels deep", field=field)
    if "\\u" in text:  # only escapes can produce a lone surrogate; skip the check otherwise
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as error:
            bad = error.object[error.start : error.end]
            escape = "".join(f"\\u{ord(character):04x}" for character in bad)
            raise InvalidArgument(
                f"{field} holds an unpaired UTF-16 surrogate ({escape}), which is not a "
                "Unicode character",
                field=field,
            ) from None
    return value


def dump(value: dict[str, Any]) -> str:
    """The compact text of an accepted object (non-ASCII kept as is)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _refuse_constant(name: str) -> object:
    message = f"{name} is not a JSON number"
    raise _Refused(message)


def _integer(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INTEGER_DIGITS:
        message = (
            f"an integer of {len(digits.lstrip('-'))} digits is longer than the "
            f"{MAX_INTEGER_DIGITS} digits accepted"
        )
        raise _Refused(message)
    return int(digits)


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        message = f"the number {clipped(text)} is out of range (not a finite double)"
        raise _Refused(message)
    return number


def _depth(value: object) -> int:
    """How deeply arrays and objects nest (1 for a flat object), without recursion."""
    deepest = 0
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        item, level = pending.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest
        pending.extend((child, level + 1) for child in children)
    return deepest


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"
