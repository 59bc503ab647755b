"""A full disk never leaves a short metrics file behind a success: an unbuffered write on a
full disk takes what fits and reports it only by its count (the next one raises ENOSPC); the
metrics writer ignored the count, and collect and aggregate exited 0 with a cut file."""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

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


def test_a_short_write_is_written_on_or_fails() -> None:
    disk = NearlyFullDisk(room=3000)
    writer = BackgroundWriter(disk, block=1024)  # type: ignore[arg-type]
    with pytest.raises(OSError) as full:
        with writer:
            for _ in range(10):
                writer.write(b"x" * 1000)
    assert full.value.errno == errno.ENOSPC and len(disk.data) == 3000

    roomy = NearlyFullDisk(room=10**6)
    with BackgroundWriter(roomy, block=1024) as writer:  # type: ignore[arg-type]
        for _ in range(10):
            writer.write(b"y" * 1000)
    assert bytes(roomy.data) == b"y" * 10_000


@pytest.mark.skipif(sys.platform != "linux", reason="tmpfs mounts are Linux's")
def test_aggregate_on_a_full_disk_fails_and_leaves_no_metrics_file(tmp_path: Path) -> None:
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root): the unit test above covers the writer")
    try:
        src = tmp_path / "r.jsonl"
        src.write_text("".join(f'{{"agent_ref": {{"name": "a"}}, "_ng_task_index": {t}, "_ng_rollout_index": 0, "reward": 1, "pad": "{"p" * 200}"}}\n'
                               for t in range(2000)))  # fmt: skip
        done = subprocess.run([sys.executable, "-m", "gym_metrics.cli", "aggregate", str(src), "-o", str(mount / "m.json"), "-q"],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode != 0 and "No space left" in done.stderr, done.stderr
        assert not (mount / "m.json").exists()
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)
