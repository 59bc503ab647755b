"""`gym-metrics export --atif`: a rollouts file as one ATIF v1.7 file per rollout and a
manifest, published whole or not at all (NeMo Gym's `gym eval export --format atif` layout:
`<task>-<rollout>.json`, `manifest.jsonl` with each file's SHA-256)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from gym_metrics.recording._atif import agent_name, rollout_to_atif
from gym_metrics.recording._atif_json import AtifRefused, atif_bytes, read_rows

MANIFEST = "manifest.jsonl"
REFUSED = "refused.jsonl"


@dataclass
class AtifExport:
    """What an export wrote: its directory, how many trajectories, and the rows it refused
    (line number, reason; only with `skip_refused`, else a refusal raises)."""

    output: Path
    exported: int
    refused: list[tuple[int, str]] = field(default_factory=list)


class AtifExportError(ValueError):
    """The export wrote nothing; `problems` are (line number or 0, reason), every one found."""

    def __init__(self, message: str, problems: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.problems = problems


def export_atif(
    rollouts: Path,
    output: Path,
    *,
    session_id: str,
    agent_version: str,
    exporter_version: str,
    lenient: bool = False,
    skip_refused: bool = False,
    progress: Optional[Callable[[int], None]] = None,
) -> AtifExport:
    """Writes `output/` (which must not exist) from `rollouts` (JSONL rows with `ng_trajectory`).
    Every row is checked before the directory appears: a refused row fails the export (every
    refusal listed), unless `skip_refused`, which exports the rest and lists the refused rows
    in `refused.jsonl`. One agent per file (the agent version is the run's). Memory stays one
    row: each trajectory is written as it is made. `progress(rows_read)` every 1,000 rows."""
    if not rollouts.is_file():
        raise AtifExportError(f"rollouts file not found: {rollouts}", [])
    if os.path.lexists(output):
        raise AtifExportError(f"output path already exists: {output} (the export never overwrites; pick a new directory)", [])
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.tmp-", dir=output.parent))
    try:
        manifest, refused, keys, agents = [], [], set(), set()
        with rollouts.open("rb") as lines:
            for number, row in read_rows(lines):
                if progress is not None and number % 1000 == 0:
                    progress(number)
                try:
                    if isinstance(row, AtifRefused):
                        raise row
                    key = tuple(row.get(k) for k in ("_ng_task_index", "_ng_rollout_index"))
                    trajectory = rollout_to_atif(row, session_id=session_id, agent_version=agent_version,
                                                 exporter_version=exporter_version, lenient=lenient, parsed=True)  # fmt: skip
                    if key in keys:
                        raise AtifRefused(f"line {number}", f"duplicate rollout key (task {key[0]}, rollout {key[1]})")
                    body = atif_bytes(trajectory, f"line {number}")
                except AtifRefused as exc:
                    text = str(exc)
                    refused.append((number, text[len(f"line {number}: "):] if text.startswith(f"line {number}: ") else text))
                    continue
                keys.add(key)
                agents.add(agent_name(row))
                name = f"{key[0]}-{key[1]}.json"
                (staging / name).write_bytes(body)
                manifest.append({"_ng_rollout_index": key[1], "_ng_task_index": key[0], "expected_sha256": hashlib.sha256(body).hexdigest(),
                                 "trajectory_path": name})  # fmt: skip
        if refused and not skip_refused:
            shown = "\n".join(f"- line {n}: {why}" for n, why in refused[:20])
            more = f"\n... and {len(refused) - 20} more" if len(refused) > 20 else ""
            raise AtifExportError(f"ATIF export refused {len(refused)} row(s); nothing written:\n{shown}{more}", refused)
        if not manifest:
            raise AtifExportError(f"{rollouts} has no row to export" + (f" ({len(refused)} refused)" if refused else ""), refused)
        if len(agents) != 1:
            raise AtifExportError(f"one agent per export (the agent version is the run's); {rollouts} has {len(agents)}: "
                                  f"{', '.join(sorted(map(str, agents)))}", [])  # fmt: skip
        (staging / MANIFEST).write_text("".join(json.dumps(m, separators=(",", ":")) + "\n" for m in manifest), encoding="utf-8")
        if refused:
            (staging / REFUSED).write_text("".join(json.dumps({"line": n, "reason": why}) + "\n" for n, why in refused), encoding="utf-8")
        if os.path.lexists(output):
            raise AtifExportError(f"output path was created during the export: {output}", [])
        staging.chmod(0o755)
        os.replace(staging, output)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return AtifExport(output, len(manifest), refused)
