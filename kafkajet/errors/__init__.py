"""One exception hierarchy for everything kafkajet raises: `from kafkajet.errors import ...`.

`base` holds the root and the client-side classes; `broker` is generated from Kafka's error table (one class
per broker error code, with `code`, `retriable` and `invalid_metadata`). Every class reports itself as
`kafkajet.errors.<Name>`, the one place users import it from.
"""

from __future__ import annotations

from kafkajet.errors.base import *  # noqa: F403
from kafkajet.errors.base import BrokerError, UnknownBrokerErrorCode
from kafkajet.errors.broker import *  # noqa: F403
from kafkajet.errors.broker import BROKER_ERROR_CLASSES
from kafkajet.errors.broker import RequestTimedOutError as RequestTimedOutError
from kafkajet.errors.broker import UnsupportedVersionError as UnsupportedVersionError

NO_ERROR = 0  # the protocol's "no error" code: no exception class stands for it

_BY_CODE: dict[int, type[BrokerError]] = {cls.code: cls for cls in BROKER_ERROR_CLASSES}
_BY_NAME: dict[str, type[BrokerError]] = {cls.name: cls for cls in BROKER_ERROR_CLASSES}


def error_for_code(code: int) -> type[BrokerError] | None:
    """The class for a broker error code; None for 0 (no error); UnknownBrokerErrorCode if unknown."""
    if code == NO_ERROR:
        return None
    return _BY_CODE.get(code, UnknownBrokerErrorCode)


def error_for_name(name: str) -> type[BrokerError]:
    """The class for a broker error name such as "NOT_LEADER_OR_FOLLOWER"."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown broker error name {name!r}") from None


def make_error(code: int, message: str | None = None) -> BrokerError | None:
    """An exception instance for a broker error code (None for 0); unknown codes keep their number."""
    cls = error_for_code(code)
    if cls is None:
        return None
    if cls is UnknownBrokerErrorCode:
        return cls(message or f"unknown broker error code {code}", code=code)
    return cls(message)


def _publish_here() -> None:
    # Tracebacks and reprs name the public module, not the file a class happens to be defined in.
    for value in list(globals().values()):
        if isinstance(value, type) and issubclass(value, BaseException) and value.__module__.startswith(__name__):
            value.__module__ = __name__


_publish_here()
