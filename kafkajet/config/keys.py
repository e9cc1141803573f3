"""The key framework (Java's ConfigDef): what a key is, the validators that convert and check a value, and
the one place a value meets its key's validator (secrets kept out of the messages)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkajet.addresses import parse_servers
from kafkajet.errors import ConfigError

INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str  # int, bool, str, list, enum, object
    default: Any
    doc: str
    validator: Callable[[str, Any], Any] | None = None  # returns the normalised value or raises ConfigError
    secret: bool = False
    required: bool = False
    # Set when this client accepts the key but does not read it (a Java setting, or a shared one that means
    # nothing here): what happens instead. Shown in the docs; tests/unit/test_config_keys_read.py holds every
    # other key to being read by the client's code.
    not_read: str = ""


def _int_range(lo: int, hi: int = 2**63 - 1) -> Callable[[str, Any], Any]:
    def check(key: str, v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise ConfigError(f"{key}={v!r}: expected an integer")
        try:
            n = int(v) if not isinstance(v, float) or v.is_integer() else None
        except ValueError:
            n = None
        if n is None:
            raise ConfigError(f"{key}={v!r}: expected an integer")
        if not lo <= n <= hi:
            raise ConfigError(f"{key}={n}: must be in [{lo}, {hi}]")
        return n

    return check


def _float_range(lo: float, hi: float) -> Callable[[str, Any], Any]:
    def check(key: str, v: Any) -> float:
        try:
            x = float(v) if not isinstance(v, bool) else None
        except (TypeError, ValueError):
            x = None
        if x is None:
            raise ConfigError(f"{key}={v!r}: expected a number")
        if not lo <= x <= hi:
            raise ConfigError(f"{key}={x}: must be in [{lo}, {hi}]")
        return x

    return check


def _bool(key: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    raise ConfigError(f"{key}={v!r}: expected true or false")


def _choice(*options: str) -> Callable[[str, Any], Any]:
    def check(key: str, v: Any) -> str:
        s = str(v).strip().lower()
        if s not in options:
            raise ConfigError(f"{key}={v!r}: must be one of {', '.join(options)}")
        return s

    return check


def _acks(key: str, v: Any) -> int:
    s = str(v).strip().lower()
    table = {"all": -1, "-1": -1, "0": 0, "1": 1}
    if s not in table:
        raise ConfigError(f"{key}={v!r}: must be one of all, -1, 0, 1")
    return table[s]


def _servers(key: str, v: Any) -> list[tuple[str, int]]:
    return parse_servers(v)


def _str(key: str, v: Any) -> str:
    if not isinstance(v, str):
        raise ConfigError(f"{key}={v!r}: expected a string")
    return v


def _callable_or_name(key: str, v: Any) -> Any:
    if callable(v) or isinstance(v, str):
        return v
    raise ConfigError(f"{key}={v!r}: expected a callable or a built-in name")


def _interceptors(key: str, v: Any) -> list[Any]:
    items = [] if v is None else list(v) if isinstance(v, (list, tuple)) else [v]
    for icp in items:
        missing = [m for m in ("on_send", "on_acknowledgement", "close") if not callable(getattr(icp, m, None))]
        if missing:
            raise ConfigError(f"{key}: {icp!r} lacks {', '.join(missing)}")
    return items


def _transactional_id(key: str, v: Any) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str) or not v:
        raise ConfigError(f"{key}: expected a non-empty string naming this producer's transactions, got {v!r}")
    return v


def _optional_int(lo: int, hi: int) -> Callable[[str, Any], Any]:
    inner = _int_range(lo, hi)
    return lambda key, v: None if v is None else inner(key, v)


def _gzip_level(key: str, v: Any) -> int | None:
    # Java's GzipCompression.LevelValidator: 1-9, or -1 (Deflater.DEFAULT_COMPRESSION).
    if v is not None and str(v).strip() == "-1":
        return -1
    level: int | None = _optional_int(1, 9)(key, v)
    return level


def _validate(k: ConfigKey, value: Any) -> Any:
    if k.validator is None:
        return value
    if not k.secret:
        return k.validator(k.name, value)
    try:
        return k.validator(k.name, value)
    except ConfigError as e:
        # Validators quote the value they reject; a secret's value must never reach a message or a log.
        msg = str(e)
        if repr(value) in msg or (isinstance(value, str) and value and value in msg):
            msg = f"{k.name}: invalid value of type {type(value).__name__} (not shown: it is a secret)"
        raise ConfigError(msg) from None


def _only(*allowed: str, why: str) -> Callable[[str, Any], Any]:
    """A Java key of which kafkajet has one behaviour (or a few): those values are taken (compared without
    case), any other is refused with `why`, which says what to use instead."""
    by_lower = {a.lower(): a for a in allowed}

    def check(key: str, v: Any) -> Any:
        if isinstance(v, bool):
            v = str(v).lower()
        s = str(v).strip()
        if s.lower() not in by_lower:
            raise ConfigError(f"{key}={s}: {why}")
        return by_lower[s.lower()]

    return check


def _no_classes(why: str) -> Callable[[str, Any], Any]:
    """A Java list of class names (interceptor.classes, config.providers): empty is taken, as Java's default;
    a class is refused with `why`."""

    def check(key: str, v: Any) -> list[str]:
        items = [x.strip() for x in (v.split(",") if isinstance(v, str) else list(v)) if str(x).strip()]
        if items:
            raise ConfigError(f"{key}={', '.join(map(str, items))}: {why}")
        return []

    return check


def _choice_upper(*options: str) -> Callable[[str, Any], Any]:
    """An enum Java spells in capitals (ssl.truststore.type=PEM), taken in any case."""
    inner = _choice(*(o.lower() for o in options))
    return lambda key, v: inner(key, v).upper()


def _list(key: str, v: Any) -> list[str]:
    return [x.strip() for x in (v.split(",") if isinstance(v, str) else list(v)) if str(x).strip()]


def _only_list(*allowed: str, why: str) -> Callable[[str, Any], Any]:
    """A Java list of class names of which kafkajet has the behaviour of `allowed` (or of none)."""

    def check(key: str, v: Any) -> list[str]:
        items = _list(key, v)
        other = [x for x in items if x not in allowed]
        if other:
            raise ConfigError(f"{key}={', '.join(other)}: {why}")
        return items

    return check
