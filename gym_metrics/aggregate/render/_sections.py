"""Add sections to the agents of a metrics file already written (`health` after a collect):
each agent's new section goes last in its entry, replacing one of that name written there
before; every other byte of the file stays as it was.

The file's agent entries are found by the layout `write_json` gives them (an entry opens with
`  {` and its `agent_ref` on the next line and closes with `  }` on a line of its own; JSON
strings hold no raw newline). A file of another layout is parsed and written again whole, two
spaces an indent, its values unchanged."""

from __future__ import annotations

import json
import mmap
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from gym_metrics._util.jsonio import loads
from gym_metrics.errors import InvalidInputError

_ENTRY = re.compile(rb'\n  \{\n    "agent_ref": ([^\n]*),\n')
_END = b"\n  }"


def _dump(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).replace(b"\n", b"\n    ")


def _spans(text: mmap.mmap | bytes) -> list[tuple[str, int, int]] | None:
    """(agent name, start, end) of each entry, `end` where its closing line starts; None when
    the layout is not write_json's."""
    out: list[tuple[str, int, int]] = []
    at = 0
    while (found := _ENTRY.search(text, at)) is not None:
        try:
            name = orjson.loads(found.group(1)).get("name")
        except (orjson.JSONDecodeError, AttributeError):
            return None
        end = text.find(_END, found.end())
        if end < 0 or not isinstance(name, str):
            return None
        out.append((name, found.end(), end))
        at = end + len(_END)
    closing = bytes(text[at:]).strip()
    return out if out and closing == b"]" and bytes(text[: out[0][1]]).lstrip().startswith(b"[") else None


def agent_names(path: str | Path) -> list[str]:
    """The agents of the metrics file at `path`, in the file's order."""
    path = Path(path)
    if path.stat().st_size == 0:
        raise InvalidInputError(f"{path}: empty, not an aggregate metrics file")
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as text:
        spans = _spans(text)
        if spans is not None:
            return [name for name, _, _ in spans]
        return [str(entry["agent_ref"].get("name")) for entry in _document(path, bytes(text))]


def _cut(text: mmap.mmap | bytes, start: int, end: int, names: Mapping[str, Any]) -> int | None:
    """Where the entry's trailing sections named in `names` start (`end` when it ends with
    none); None when such a section comes before another key (the file is then rewritten)."""
    cut = end
    while (at := text.rfind(b',\n    "', start, cut)) >= 0:
        colon = text.find(b'": ', at, cut)
        try:
            key = orjson.loads(text[at + 6 : colon + 1]) if colon > 0 else None
        except orjson.JSONDecodeError:
            return None
        if key not in names:
            break
        cut = at
    if any(text.find(b",\n    " + orjson.dumps(name) + b": ", start, cut) >= 0 for name in names):
        return None
    return cut


def add_agent_sections(path: str | Path, sections: Mapping[str, Mapping[str, Any]]) -> Path:
    """Add (or replace) `sections[agent]` ({section name: JSON-able value}) in each agent's
    entry of the metrics file at `path`; agents not named are left as they are. Written
    atomically (temp file + rename)."""
    path = Path(path)
    if path.stat().st_size == 0:
        raise InvalidInputError(f"{path}: empty, not an aggregate metrics file")
    tmp = path.with_name(f".{path.name}.tmp")
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as text:
        spans = _spans(text)
        cuts = [_cut(text, start, end, sections.get(name, {})) for name, start, end in spans] if spans is not None else [None]
        if spans is None or None in cuts:
            _rewrite(path, tmp, bytes(text), sections)
            return path
        with tmp.open("wb") as out:
            at = 0
            for (name, _, end), cut in zip(spans, cuts):
                out.write(text[at:cut])
                for key, value in sections.get(name, {}).items():
                    out.write(b",\n    " + orjson.dumps(key) + b": " + _dump(value))
                at = end
            out.write(text[at:])
    tmp.replace(path)
    return path


def _document(path: Path, text: bytes) -> list[dict[str, Any]]:
    try:
        doc = loads(text)  # exactly: orjson reads an integer past 64 bits as a float
    except ValueError as exc:
        raise InvalidInputError(f"{path}: not JSON ({exc})") from None
    if not isinstance(doc, list) or not all(isinstance(a, dict) and isinstance(a.get("agent_ref"), dict) for a in doc):
        raise InvalidInputError(f"{path}: not an aggregate metrics file (a JSON array of agents with agent_ref)")
    return doc


def _rewrite(path: Path, tmp: Path, text: bytes, sections: Mapping[str, Mapping[str, Any]]) -> None:
    doc = _document(path, text)
    for entry in doc:
        entry.update(sections.get(str(entry["agent_ref"].get("name")), {}))
    try:
        body = orjson.dumps(doc, option=orjson.OPT_INDENT_2)
    except TypeError:  # an integer past 64 bits: Python's json writes it as it was
        body = json.dumps(doc, indent=2, ensure_ascii=False).encode()
    tmp.write_bytes(body + b"\n")
    tmp.replace(path)
