"""A full disk never leaves a short metrics file behind a success: an unbuffered write on a
full disk takes what fits and reports it only by its count (the next one raises ENOSPC); the
metrics writer ignored the count, and collect and aggregate exited 0 with a cut file."""

from __future__ import annotations

import errno

import pytest

from gym_metrics.aggregate.render._writer import BackgroundWriter


class NearlyFullDisk:
    """A file of `room` bytes, written as the kernel writes a full disk: a short count, then ENOSPC."""

    name = "nearly-full"

    def __init__(self, room: int) -> None:
        self.room, self.data = room, bytearray()

    def write(self, blob: bytes | memoryview) -> int:
        if not self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        taken = bytes(blob[: self.room])
        self.data += taken
        self.room -= len(taken)
        return len(taken)

    def fileno(self) -> int:
        return -1


def test_a_short_last_write_is_written_on_or_fails() -> None:
    """The last write taking only what fits was the silent case: no later write raised."""
    disk = NearlyFullDisk(room=2500)
    writer = BackgroundWriter(disk, block=1024)  # type: ignore[arg-type]
    with pytest.raises(OSError) as full:
        with writer:
            writer.write(b"x" * 3000)  # one blob: 2,500 bytes fit
    assert full.value.errno == errno.ENOSPC and len(disk.data) == 2500

    roomy = NearlyFullDisk(room=10**6)
    with BackgroundWriter(roomy, block=1024) as writer:  # type: ignore[arg-type]
        for _ in range(10):
            writer.write(b"y" * 1000)
    assert bytes(roomy.data) == b"y" * 10_000
