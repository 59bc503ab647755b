"""What counts as an agent's deliverable in its output folder (`nemo_gym.deliverables`): every
file but the run state an agent keeps beside its work (history, metadata, log, the reference
files it was given)."""

from __future__ import annotations

from pathlib import Path

IGNORE_FILES = frozenset(
    {"finish_params.json", "history.json", "history.pkl", "inprogress_history.json", "metadata.json", "log.txt", "reference_files"}
)


def is_deliverable(path: Path) -> bool:
    """A file the agent produced as output (not a folder, not run state)."""
    return path.is_file() and path.name not in IGNORE_FILES


__all__ = ["IGNORE_FILES", "is_deliverable"]
