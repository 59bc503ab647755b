"""Masking a bearer key wherever a remote or a library may put it: in error bodies, parsed
answers and log records, in every form it can be written in.

A remote that echoes a key rarely sends it back as it was sent: JSON writers escape it
(`\\/`, or every character as `\\uXXXX`), URLs percent-encode it, and an `Authorization`
header shown back is often base64 (`QmVhcmVy...`, "Bearer <key>"). `key_forms` lists those
forms; `scrub` masks them all, after decoding `\\u` escapes, so no form reaches a message.
Every key a client reads is `remember`ed, and `MaskingFilter` masks those keys in every log
record a CLI handler writes (httpx and httpcore log headers at debug).
"""

from __future__ import annotations

import base64
import functools
import logging
import re
from typing import Any, Final
from urllib.parse import quote

import orjson

MIN_SCRUBBED_KEY: Final = 4
"""Keys shorter than this are not masked: masking every "ab" would garble each message, and a
key that short protects nothing (it is logged as a warning when read)."""
MIN_BASE64_CORE: Final = 8
"""A base64 form is masked only when at least this many of its characters depend on the key
alone (keys of about 8 bytes and more): a shorter run would mask chance matches."""
MASK: Final = "***"

_U_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")


@functools.lru_cache(maxsize=256)
def key_forms(key: str) -> tuple[str, ...]:
    """The key as a body, URL or header may carry it: as is; JSON-escaped (slashes escaped or
    not); percent-encoded (upper- and lowercase hex); base64 and base64url at each of the three
    byte alignments it can start at (only the characters the key alone decides, so "Bearer
    <key>" or any other prefix is caught too). Longest first, so a form never masks part of a
    longer one."""
    escaped = orjson.dumps(key).decode()[1:-1]
    forms = {key, escaped, escaped.replace("/", "\\/")}
    for percent in (quote(key, safe=""), quote(key, safe="/")):
        forms.add(percent)
        forms.add(re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), percent))
    raw = key.encode()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + raw).decode()
        first = -(-8 * offset // 6)  # the first character with no bit of the zero prefix
        last = 8 * (offset + len(raw)) // 6  # past the last character with no bit of what follows
        core = encoded[first:last]
        if len(core) >= MIN_BASE64_CORE:
            forms.add(core)
            forms.add(core.replace("+", "-").replace("/", "_"))
    return tuple(sorted(forms, key=len, reverse=True))


def _unescape_u(text: str) -> str:
    """`text` with JSON's `\\uXXXX` escapes (outside the surrogate range) and `\\/` decoded."""

    def one(match: re.Match[str]) -> str:
        code = int(match.group(1), 16)
        return match.group(0) if 0xD800 <= code <= 0xDFFF else chr(code)

    return _U_ESCAPE.sub(one, text).replace("\\/", "/")


def scrub(text: str, key: str | None, limit: int | None = None, *, truncated: bool = False) -> str:
    """`text` with every copy of `key` (in any of `key_forms`) masked as `***`, then cut to
    `limit` characters: masking first, so a cut can never keep a prefix of the key. A text
    that spells the key with `\\u` escapes is shown with those escapes decoded, then masked.
    `truncated`: `text` is only the start of a longer text (a body read in part), so a key
    prefix it ends with (at least MIN_SCRUBBED_KEY characters) is masked too. Keys shorter
    than MIN_SCRUBBED_KEY are left (see there); a server echoing only part of a key (its first
    few characters, as some do on purpose) is not masked."""
    if key and len(key) >= MIN_SCRUBBED_KEY:
        forms = key_forms(key)
        if "\\" in text:
            decoded = _unescape_u(text)
            if decoded != text and any(form in decoded for form in forms):
                text = decoded
        for form in forms:
            if form in text:
                text = text.replace(form, MASK)
        if truncated:
            for n in range(min(len(key) - 1, len(text)), MIN_SCRUBBED_KEY - 1, -1):
                if text.endswith(key[:n]):
                    text = text[:-n] + MASK
                    break
    return text if limit is None or len(text) <= limit else text[:limit]


def scrub_tree(value: Any, key: str | None) -> Any:
    """A parsed JSON answer with `key` masked (`scrub`) in every string, object keys too."""
    if isinstance(value, str):
        return scrub(value, key)
    if isinstance(value, list):
        return [scrub_tree(v, key) for v in value]
    if isinstance(value, dict):
        return {scrub(k, key) if isinstance(k, str) else k: scrub_tree(v, key) for k, v in value.items()}
    return value


def may_hold(raw: bytes | bytearray, key: str) -> bool:
    """Whether the JSON body `raw` may spell `key` once parsed: it holds one of its forms, or
    escapes (`\\u`, `\\/`) that could write it. False lets a caller skip walking the answer."""
    return b"\\u" in raw or b"\\/" in raw or any(form.encode() in raw for form in key_forms(key))


_REMEMBERED: dict[str, None] = {}
"""Every key a client of this process read (insertion-ordered, for a stable mask order)."""


def remember(key: str) -> None:
    """Mask `key` in every log record `MaskingFilter` sees from now on."""
    if len(key) >= MIN_SCRUBBED_KEY:
        _REMEMBERED[key] = None


_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s]*@")
"""A URL's user and password: everything up to the authority's last `@` (a password may hold an
unescaped `@`; urllib splits the host off at the last one too)."""


def without_url_credentials(text: str) -> str:
    """`text` with the user and password of every URL in it masked (`http://***@host/`): a
    tracking URI given with basic auth comes back in its client's error messages."""
    return _URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{MASK}@", text)


_USERINFO = re.compile(r"(?i)^([a-z][a-z0-9+.-]*://)?[^/?#\s]*@")
"""An address's user and password, with or without a scheme (`u:pw@host:1`, `http://u:pw@host`)."""


def without_userinfo(text: str) -> str:
    """`text`, an address or URL as given on a command line, with the user and password before
    its host masked even without a scheme (`u:pw@h:1` -> `***@h:1`), and every URL's in it
    (`without_url_credentials`): a flag's error message quotes what was given."""
    if "@" not in text:
        return text
    return without_url_credentials(_USERINFO.sub(lambda m: f"{m.group(1) or ''}{MASK}@", text, count=1))


def url_password(url: str | None) -> str | None:
    """The password of `url` (percent-decoded), None when it has none: a library may quote it
    outside the URL (its own messages, a decoded form)."""
    from urllib.parse import unquote, urlsplit

    try:
        password = urlsplit(url or "").password
    except ValueError:
        return None
    return unquote(password) if password else None


def _masked(text: str) -> str:
    """`text` without URL credentials and without any `remember`ed key."""
    if "@" in text:
        text = without_url_credentials(text)
    for key in tuple(_REMEMBERED):
        text = scrub(text, key)
    return text


class MaskingFilter(logging.Filter):
    """A handler filter that masks URL credentials (`without_url_credentials`: httpx logs each
    request's URL, userinfo included, at debug) and every `remember`ed key in a record's text
    (its message with its arguments, and its exception text): libraries log request and answer
    headers at debug, and a remote may send a key back in one."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: the handler's own format reports it, as without this filter
            return True
        masked = _masked(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = _masked(record.exc_text)
        return True


__all__ = ["MASK", "MIN_SCRUBBED_KEY", "MaskingFilter", "key_forms", "may_hold", "remember", "scrub", "scrub_tree", "url_password", "without_url_credentials", "without_userinfo"]
