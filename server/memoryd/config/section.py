"""What every section of the settings is (`Section`), the units and bounds they share, and the
checks of an address that several sections make."""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from typing import Any

from memoryd.domain.digits import is_number
from memoryd.errors import StartupError

KIB = 1024


MIB = 1024 * KIB


UNBOUNDED = "unbounded"


# Content + metadata of one message: a message and its identifiers must fit one 4 MiB answer.
MAX_MESSAGE_BYTES = 3 * MIB


DEFAULT_HOME = "~/.memoryd"


# More server processes than this gains nothing on any machine memoryd is meant for.
MAX_WORKERS = 64


class Section:
    """What every [memoryd.<section>] table is: typed values, and the rules between them."""

    __slots__ = ()

    @classmethod
    def fields(cls) -> tuple[dataclasses.Field[Any], ...]:
        """The section's settings, in declaration order."""
        return dataclasses.fields(cls)  # type: ignore[arg-type]  # every Section is a dataclass

    def validate(self) -> None:
        """Refuse values that are each well typed but make no sense (StartupError)."""


# Settings that may be 0 although they are not durations in _ms / _seconds.
ZERO_ALLOWED = frozenset(
    {"review_interval_hours", "sample_ratio", "max_connections", "min_similarity", "min_relevance"}
)


_HOST_LABEL = r"[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?"


_HOST_NAME = re.compile(rf"\.?{_HOST_LABEL}(\.{_HOST_LABEL})*\.?")


def is_host_name(text: str) -> bool:
    """A DNS name (a leading dot: every name below it) or an IP address ([v6] or bare)."""
    try:
        ipaddress.ip_address(text.removeprefix("[").removesuffix("]"))
    except ValueError:
        return _HOST_NAME.fullmatch(text) is not None
    return True


def check_listen(value: str, label: str) -> str:
    """HOST:PORT, or StartupError naming `label`."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not is_number(port) or int(port) > 65535:
        raise StartupError(
            f"{label} must be HOST:PORT (for example 127.0.0.1:50051), got {value!r}"
        )
    return value
