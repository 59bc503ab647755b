"""`--export wandb[=PROJECT]`: key and agent metrics as one W&B history step and the run's
summary, the metrics file (and report) saved with the run. WANDB_MODE=offline works with no
network (`wandb sync` uploads later)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from gym_metrics.exporters._base import Exporter, ExportRun, register_exporter

PROJECT_ENV = "WANDB_PROJECT"
DEFAULT_PROJECT = "gym-metrics"


@register_exporter("wandb")
class WandbExporter(Exporter):
    """The W&B run id derives from the output's path, so a resumed collect (or a repeated
    export of the same output) logs into the same run, as its next step. The project is the
    target, else $WANDB_PROJECT, else `gym-metrics`. No config is logged (nothing from the
    command line can leak a key)."""

    extra = "wandb"
    requires = ("wandb",)

    def export(self, run: ExportRun) -> str:
        import wandb

        project = self.target or os.environ.get(PROJECT_ENV) or DEFAULT_PROJECT
        settings = wandb.Settings(  # no metadata: the command line (a URL with a password), paths, git, code, machine
            console="off", quiet=True, silent=True, x_disable_stats=True, x_disable_meta=True, x_disable_machine_info=True,
            disable_git=True, disable_code=True, save_code=False, disable_job_creation=True, x_save_requirements=False,
        )  # fmt: skip
        session = wandb.init(
            project=project, name=run.name, id=f"gm-{run.key[:24]}", resume="allow",
            dir=os.environ.get("WANDB_DIR") or None, settings=settings, reinit="create_new",
        )  # fmt: skip
        try:
            values = run.flat()
            session.log(values)
            session.summary.update(values)
            for path in run.artifacts:  # a copy in the run's files (uploaded at sync), not a symlink
                shutil.copy2(path, Path(session.dir) / path.name)
            where = f"wandb run {session.id} ({project}/{run.name}, {len(values)} metrics{run.skipped_note()})"
        except BaseException:
            session.finish(exit_code=1)
            raise
        session.finish()
        # finish() can return before wandb's service has written the run's log (seen with
        # 0.31 offline: a header-only .wandb file); teardown waits for it.
        wandb.teardown()
        return where
