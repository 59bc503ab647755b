"""Bearer keys for the HTTP clients: read by name, and inside a job only from the secrets the
job server resolved for it, each sent only to the hosts it is bound to.

Outside a job (`evaluate`, `collect` on a user's machine) a key named by `api_key_env` is read
from the process environment, as the user asked. Inside `keys_from(...)` (a job on the job
server) the environment is never consulted: a submitter chooses the names and the URLs, so a
fallback would let them send any variable of the server to any host.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from gym_metrics._util.masking import without_userinfo
from gym_metrics.errors import FieldViolation, InvalidInputError

_DEFAULT_PORTS = {"http": 80, "https": 443}
CLEARTEXT = "http://"
"""The prefix of a host pattern that lets its key go over plain http (`http://judge:8000`)."""
_LOOPBACK_NAMES = {"localhost", "ip6-localhost"}


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, maybe in brackets) is this machine's loopback: the
    loopback names themselves or a loopback address, never a name that merely starts like one
    (`localhost-judge.example.org`, `127.evil.example.org` are other machines)."""
    host = host.strip("[]").lower()
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class BoundKey:
    """A secret's value and the hosts it may be sent to (None: any host). Patterns are
    `host`, `host:port` or `*.domain` (any subdomain), lowercase (see `host_pattern`). A bound
    key goes over https only, or plain http to a loopback host, unless its pattern starts with
    `http://`: a submitter choosing `http://` must not have a key sent in the clear."""

    value: str = field(repr=False)
    hosts: frozenset[str] | None = None

    def allows(self, url: str) -> bool:
        if self.hosts is None:
            return True
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        try:
            port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
        except ValueError:
            return False
        clear = parts.scheme != "https" and not is_loopback(host)
        for pattern in self.hosts:
            if pattern.startswith(CLEARTEXT):
                pattern = pattern[len(CLEARTEXT) :]
            elif clear:
                continue
            name, _, want_port = pattern.rpartition(":") if _has_port(pattern) else (pattern, "", "")
            if want_port and str(port) != want_port:
                continue
            name = name.strip("[]")
            if host == name or (name.startswith("*.") and host.endswith(name[1:])):
                return True
        return False


def _has_port(pattern: str) -> bool:
    return pattern.rsplit("]", 1)[-1].count(":") == 1


def host_pattern(text: str) -> str:
    """A host pattern checked and lowercased: `host`, `host:port`, `[v6]:port`, `*.domain`,
    each may start with `http://` (plain http allowed too); ValueError saying what is wrong
    (another scheme, a path, credentials, a bad port)."""
    pattern = text.strip().lower()
    if pattern.startswith(CLEARTEXT):
        return CLEARTEXT + host_pattern(pattern[len(CLEARTEXT) :])
    try:
        parts = urlsplit("//" + pattern)
        parts.port  # noqa: B018  # raises ValueError for a bad port
    except ValueError:
        raise ValueError(f"{without_userinfo(text)!r} is not HOST or HOST:PORT") from None
    if not parts.hostname or parts.path or parts.query or parts.fragment or "@" in pattern or "://" in text:
        raise ValueError(f"{without_userinfo(text)!r} is not HOST or HOST:PORT (no path or credentials; the one scheme allowed is http://)")
    if "*" in pattern.lstrip("*.") or (pattern.startswith("*") and not pattern.startswith("*.")):
        raise ValueError(f"{without_userinfo(text)!r}: a wildcard is only allowed as a leading '*.'")
    return pattern


_KEYS: ContextVar[Mapping[str, BoundKey] | None] = ContextVar("gym_metrics_keys", default=None)


@contextmanager
def keys_from(keys: Mapping[str, BoundKey]) -> Iterator[None]:
    """In this context (this thread, this task and the tasks it starts), a key named by
    `api_key_env` is looked up in `keys` ONLY: a job server hands each job the secrets it
    resolved, without writing them into the process environment or reading it."""
    token = _KEYS.set(keys)
    try:
        yield
    finally:
        _KEYS.reset(token)


def read_key(var: str | None, what: str, url: str, at: str = "config") -> BoundKey | None:
    """The bearer key named `var` (None: no key) for requests to `url`: from `keys_from`, or
    from the environment outside it. Unset, or bound to other hosts than `url`'s, is a config
    error raised before any request, naming `at.api_key_env` or `at.url`."""
    if var is None:
        return None
    keys = _KEYS.get()
    if keys is not None:
        key = keys.get(var)
        if key is None:
            raise InvalidInputError(f"{what} API key not found", [FieldViolation(f"{at}.api_key_env", f"secret {var} was not resolved for this job")])
        _check_header_safe(key.value, var, what, at)
        if not key.allows(url):
            parts = urlsplit(url)
            host = parts.netloc.rpartition("@")[2]
            why = f"secret {var} is bound to other hosts than {host!r}"
            if parts.scheme == "http" and key.allows(parts._replace(scheme="https").geturl()):
                why = f"secret {var} goes to {host!r} over https only (bind it as http://{host} to allow plain http)"
            raise InvalidInputError(f"{what} API key may not be sent there", [FieldViolation(f"{at}.url", why)])
        return key
    value = os.environ.get(var)
    if not value:
        raise InvalidInputError(
            f"{what} API key not found",
            [FieldViolation(f"{at}.api_key_env", f"environment variable {var} is not set or empty")],
        )
    _check_header_safe(value, var, what, at)
    return BoundKey(value)


def _check_header_safe(value: str, var: str, what: str, at: str) -> None:
    """Refuse a key that cannot go in an `Authorization` header (never quoting it): it passed
    the config, then every row retried and failed "cannot reach the judge: LocalProtocolError"
    (a newline) or with a UnicodeEncodeError (a non-ASCII character)."""
    why = None
    if any(ch in "\r\n" for ch in value):
        why = "holds a line break (a key file's trailing newline?)"
    elif not value.isascii():
        why = "holds a non-ASCII character"
    elif any(not (ch.isprintable() or ch == "\t") for ch in value):
        why = "holds a control character"
    elif value != value.strip(" \t"):
        why = "starts or ends with whitespace"
    if why is not None:
        raise InvalidInputError(
            f"{what} API key cannot be sent in an HTTP header",
            [FieldViolation(f"{at}.api_key_env", f"the key in {var} {why}")],
        )


__all__ = ["BoundKey", "host_pattern", "keys_from", "read_key"]
