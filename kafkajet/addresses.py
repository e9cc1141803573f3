"""Parsing of bootstrap server lists ("host:port,host2:port", "[::1]:9092", or (host, port) pairs)."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterable
from typing import Any

from kafkajet.errors import ConfigError

log = logging.getLogger("kafkajet.addresses")


# The listener names a broker's configuration writes before its addresses (PLAINTEXT://host:9092), which users
# copy into bootstrap.servers; librdkafka takes them there, and so does this parser.
SCHEMES = ("PLAINTEXT://", "SSL://", "SASL_PLAINTEXT://", "SASL_SSL://")


def parse_address(text: str) -> tuple[str, int]:
    """'host:port' or '[v6addr]:port', optionally after a listener scheme (PLAINTEXT://, SSL://, SASL_SSL://,
    SASL_PLAINTEXT://) -> (host, port); ConfigError naming the entry otherwise."""
    entry = text.strip()
    scheme = next((s for s in SCHEMES if entry.upper().startswith(s)), None)
    if scheme is not None:
        entry = entry[len(scheme):]  # the transport is security.protocol's to say, as in every Kafka client
    elif "://" in entry:
        raise ConfigError(f"bootstrap.servers entry {text!r}: {entry.split('://')[0]}:// is not a Kafka listener "
                          f"scheme; give host:port (a {', '.join(s[:-3] for s in SCHEMES)} prefix is accepted)")
    if entry.startswith("["):
        host, sep, rest = entry[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ConfigError(f"bootstrap.servers entry {text!r} is not of the form [ipv6]:port")
        port_text = rest[1:]
    else:
        host, sep, port_text = entry.rpartition(":")
        if not sep:
            raise ConfigError(f"bootstrap.servers entry {text!r} has no port (expected host:port)")
    if not host:
        raise ConfigError(f"bootstrap.servers entry {text!r} has no host (expected host:port)")
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"bootstrap.servers entry {text!r} has an invalid port {port_text!r}") from None
    if not 0 < port < 65536:
        raise ConfigError(f"bootstrap.servers entry {text!r} has a port out of range 1..65535")
    return host, port


def parse_servers(servers: Any) -> list[tuple[str, int]]:
    """Accept a comma-separated string, a sequence of 'host:port' strings, or (host, port) pairs."""
    if isinstance(servers, str):
        items: Iterable[Any] = [s for s in servers.split(",") if s.strip()]
    else:
        items = servers
    out: list[tuple[str, int]] = []
    for item in items:
        if isinstance(item, str):
            out.append(parse_address(item))
        elif isinstance(item, tuple | list) and len(item) == 2:
            out.append(parse_address(f"[{item[0]}]:{item[1]}" if ":" in str(item[0]) else f"{item[0]}:{item[1]}"))
        else:
            raise ConfigError(f"bootstrap.servers entry {item!r} is neither 'host:port' nor (host, port)")
    if not out:
        raise ConfigError("bootstrap.servers is empty: give at least one host:port")
    return out


def check_resolvable(servers: list[tuple[str, int]],
                     dns_lookup: str = "use_all_dns_ips") -> list[tuple[str, int]]:
    """The servers back if at least one host name resolves; ConfigError otherwise (Java's ClientUtils
    .parseAndValidateAddresses, when a client is built). A typo in the host would otherwise cost
    max.block.ms of silence before the first error. Hosts that do not resolve beside one that does are
    logged, as Java logs them, and kept: the name may resolve later.

    With client.dns.lookup=resolve_canonical_bootstrap_servers_only each host that resolves is replaced by
    the canonical names of its addresses (Java's getCanonicalHostName: the reverse lookup, or the address
    when there is none), so a DNS alias in front of the brokers reaches each under its own name (Kerberos
    principals name hosts)."""
    failures: list[tuple[str, str]] = []
    out: list[tuple[str, int]] = []
    for host, port in servers:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as e:
            reason = e.strerror if isinstance(e, socket.gaierror) and e.strerror else str(e)
            failures.append((format_address(host, port), reason))
            out.append((host, port))
            continue
        if dns_lookup != "resolve_canonical_bootstrap_servers_only":
            out.append((host, port))
            continue
        for *_, sockaddr in infos:
            try:
                name = socket.getnameinfo(sockaddr[:2], socket.NI_NAMEREQD)[0]
            except (socket.gaierror, OSError):
                name = str(sockaddr[0])
            if (name, port) not in out:
                out.append((name, port))
    if len(failures) == len(servers):
        raise ConfigError("No resolvable bootstrap urls given in bootstrap.servers: "
                          + ", ".join(f"{address} ({reason})" for address, reason in failures))
    for address, reason in failures:
        log.warning("Couldn't resolve server %s from bootstrap.servers as DNS resolution failed (%s)",
                    address, reason)
    return out


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
