"""Packed repeated double fields written straight from numpy arrays.

`message.values.extend(array.tolist())` makes one Python float per value and converts each
back: 44 ms per million values. A packed double field's wire bytes are the array's own
little-endian bytes, so here they are merged into the message (protobuf copies them in C,
1-2 ms per million). The message ends up exactly as `extend` would leave it. (Integer fields
are varints: encoding them in numpy is not much faster than `extend`, so they stay.)
"""

from __future__ import annotations

import numpy as np
from google.protobuf.message import Message

_LENGTH_DELIMITED = 2


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if not value:
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


def add_doubles(message: Message, field: str, values: np.ndarray) -> None:
    """Append `values` to `message`'s repeated double field named `field`."""
    data = np.ascontiguousarray(values, dtype="<f8").tobytes()
    if data:  # an empty packed field is not written at all
        number = message.DESCRIPTOR.fields_by_name[field].number
        message.MergeFromString(_varint(number << 3 | _LENGTH_DELIMITED) + _varint(len(data)) + data)
