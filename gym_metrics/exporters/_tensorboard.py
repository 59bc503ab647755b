"""`--export tensorboard[=DIR]`: key and agent metrics as TensorBoard scalars in
`DIR/<stem>/` (default DIR `runs`), written with tensorboard's own event-file writer (no
TensorFlow, no torch)."""

from __future__ import annotations

import time
from pathlib import Path

from gym_metrics.exporters._base import Exporter, ExportRun, register_exporter

DEFAULT_DIR = "runs"


@register_exporter("tensorboard")
class TensorboardExporter(Exporter):
    """One event file per export. A resumed collect writes to the same run directory at the
    next step (step = event files already there), so TensorBoard shows both. TensorBoard has
    no artifacts: the metrics file's path is in the scalars' run directory name only."""

    extra = "tensorboard"
    requires = ("tensorboard",)

    def export(self, run: ExportRun) -> str:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        logdir = Path(self.target or DEFAULT_DIR) / run.name
        logdir.mkdir(parents=True, exist_ok=True)
        step = len(list(logdir.glob("events.out.tfevents.*")))
        values = run.flat()
        writer = EventFileWriter(str(logdir), filename_suffix=f".gm{step}")
        try:
            summary = Summary(value=[Summary.Value(tag=tag, simple_value=float(value)) for tag, value in values.items()])
            writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))
        finally:
            writer.close()
        return f"tensorboard {logdir} (step {step}, {len(values)} scalars{run.skipped_note()})"
