"""The job server's secret store: the only secrets a job may use are the ones the operator put
here, each optionally bound to the hosts it may be sent to. Values live in memory only: never
in the store, a log line, a result or an error.

Two sources, both chosen by the operator, never by a submitter:
- a JSON file (mode 0600): `{"NAME": "value"}` or `{"NAME": {"value": "...", "hosts": [...]}}`;
- named environment variables (`allow_env`), read once when the store is built.
The rest of the process environment is out of reach: a job naming `AWS_SECRET_ACCESS_KEY` or
the server's own auth token gets the same "not in the secret store" as a name that exists
nowhere, so a submitter cannot even learn which variables are set.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from gym_metrics._util.keys import BoundKey, host_pattern
from gym_metrics.errors import FieldViolation, InvalidInputError

UNKNOWN = "not in the job server's secret store (the operator adds secrets with --secrets-file or --secret-env)"
"""The one answer for a name the store does not hold, whether or not some variable has it."""


class SecretStore:
    """Resolves secret names to `BoundKey`s. `secrets_file` is refused unless its mode is
    exactly 0600; `allow_env` maps environment variable names to the hosts each may be sent
    to (None: any host); an allowed variable that is unset or empty is refused at start."""

    def __init__(
        self, secrets_file: str | os.PathLike[str] | None = None, *,
        allow_env: Mapping[str, Iterable[str] | None] | None = None, environ: Mapping[str, str] | None = None,
    ) -> None:  # fmt: skip
        self._keys: dict[str, BoundKey] = {} if secrets_file is None else _read_file(Path(secrets_file))
        self._keys.update(_read_environment(allow_env or {}, os.environ if environ is None else environ))

    def __repr__(self) -> str:  # names at most, never values
        return f"SecretStore(names={sorted(self._keys)})"

    @property
    def names(self) -> list[str]:
        return sorted(self._keys)

    def check(self, names: Iterable[str]) -> None:
        """InvalidInputError naming each secret the store does not hold (before a job runs)."""
        missing = [FieldViolation(f"secrets.{n}", UNKNOWN) for n in dict.fromkeys(names) if n not in self._keys]
        if missing:
            raise InvalidInputError("unknown secrets", missing)

    def resolve(self, names: Iterable[str]) -> dict[str, BoundKey]:
        """Each named secret, for `gym_metrics._util.http.keys_from`; InvalidInputError naming any
        the store does not hold."""
        self.check(names := list(names))
        return {name: self._keys[name] for name in names}


def parse_allow_env(specs: Iterable[str]) -> dict[str, list[str] | None]:
    """`--secret-env` values, `NAME` or `NAME=HOST[,HOST...]`, as `allow_env`; InvalidInputError
    naming the flag for a bad one."""
    out: dict[str, list[str] | None] = {}
    for spec in specs:
        name, sep, hosts = spec.partition("=")
        where = [FieldViolation("secret_env", spec)]
        if not name.isidentifier():
            raise InvalidInputError("--secret-env takes NAME or NAME=HOST[,HOST...]", where)
        out[name] = [h for h in hosts.split(",") if h] if sep else None
        if sep and not out[name]:
            raise InvalidInputError(f"--secret-env {name}= names no host", where)
    return out


def _read_environment(allow: Mapping[str, Iterable[str] | None], environ: Mapping[str, str]) -> dict[str, BoundKey]:
    keys = {}
    for name, hosts in allow.items():
        value = environ.get(name)
        if not value:
            raise InvalidInputError("an allowed secret is not set", [FieldViolation("secret_env", f"environment variable {name} is unset or empty")])
        keys[name] = BoundKey(value, _hosts(hosts, f"secret_env.{name}"))
    return keys


def _hosts(hosts: Iterable[str] | None, where: str) -> frozenset[str] | None:
    if hosts is None:
        return None
    try:
        return frozenset(host_pattern(h) for h in hosts)
    except ValueError as exc:
        raise InvalidInputError("invalid secret host", [FieldViolation(where, str(exc))]) from None


def _read_file(path: Path) -> dict[str, BoundKey]:
    where = [FieldViolation("secrets_file", str(path))]
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError as exc:
        raise InvalidInputError(f"cannot read the secrets file: {exc.strerror}", where) from None
    if mode != 0o600:
        raise InvalidInputError(f"secrets file must have mode 0600 (owner read/write only), has {mode:04o}", where)
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError:
        raise InvalidInputError("secrets file is not JSON", where) from None  # no excerpt: it may quote a value
    if not isinstance(data, dict):
        raise InvalidInputError("secrets file must be a JSON object of name -> value or {value, hosts}", where)
    return {name: _entry(name, entry, path) for name, entry in data.items()}


def _entry(name: str, entry: Any, path: Path) -> BoundKey:
    """One file entry; errors name the entry, never quote its value."""
    where = f"secrets_file.{name}"
    if isinstance(entry, str) and entry:
        return BoundKey(entry)
    if isinstance(entry, dict) and set(entry) <= {"value", "hosts"} and isinstance(entry.get("value"), str) and entry["value"]:
        hosts = entry.get("hosts")
        if hosts is not None and not (isinstance(hosts, list) and hosts and all(isinstance(h, str) for h in hosts)):
            raise InvalidInputError(f"invalid secrets file {path}", [FieldViolation(f"{where}.hosts", "must be a non-empty list of host names")])
        return BoundKey(entry["value"], _hosts(hosts, f"{where}.hosts"))
    why = "must be a non-empty string, or {\"value\": \"...\", \"hosts\": [\"HOST\", ...]}"
    raise InvalidInputError(f"invalid secrets file {path}", [FieldViolation(where, why)])


__all__ = ["SecretStore", "UNKNOWN", "parse_allow_env"]
