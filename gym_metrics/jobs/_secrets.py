"""Secrets by name: from the process environment or a JSON map file that only its owner can
read (mode 0600). Values live in memory only: never in the store, a log line or a result."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

import orjson

from gym_metrics.errors import FieldViolation, InvalidInputError

class SecretStore:
    """Resolves secret names; `secrets_file` (a `{"NAME": "value"}` JSON map) is refused unless
    its mode is exactly 0600, so a readable-by-others key file never starts a server."""

    def __init__(self, secrets_file: str | os.PathLike[str] | None = None, *, environ: Mapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ
        self._file: dict[str, str] = {} if secrets_file is None else _read_map(Path(secrets_file))

    def __repr__(self) -> str:  # names at most, never values
        return f"SecretStore(file_names={sorted(self._file)})"

    def has(self, name: str) -> bool:
        return bool(self._environ.get(name)) or bool(self._file.get(name))

    def check(self, names: Iterable[str]) -> None:
        """InvalidInputError naming each secret that resolves to nothing (before a job runs)."""
        missing = [FieldViolation(f"secrets.{n}", "not in the server's environment or secrets file") for n in names if not self.has(n)]
        if missing:
            raise InvalidInputError("unknown secrets", missing)

    def resolve(self, names: Iterable[str]) -> dict[str, str]:
        """Each named secret's value (the environment wins over the file), for
        `gym_metrics._http.keys_from`; InvalidInputError naming any that is missing."""
        self.check(names := list(names))
        return {name: self._environ.get(name) or self._file[name] for name in names}


def _read_map(path: Path) -> dict[str, str]:
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
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise InvalidInputError("secrets file must be a JSON object of name -> string value", where)
    return data


__all__ = ["SecretStore"]
