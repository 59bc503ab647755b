from collections.abc import Sequence

from typing_extensions import Buffer

def fill(pieces: Sequence[bytes], columns: Sequence[tuple[Buffer, Buffer, Buffer]], rows: int) -> bytes: ...
