"""`--export mlflow[=TRACKING_URI]`: key and agent metrics as MLflow metrics, the metrics file
(and report) as artifacts, in a run named after the output stem; a resumed collect logs into
the run its first export started (found by the `gym_metrics.output_key` tag)."""

from __future__ import annotations

import os
import time
from typing import Any
from urllib.parse import urlparse

from gym_metrics.exporters._base import MLFLOW_KEY_LIMIT, Exporter, ExportRun, mlflow_key, register_exporter

EXPERIMENT_ENV = "MLFLOW_EXPERIMENT_NAME"
DEFAULT_EXPERIMENT = "gym-metrics"
OUTPUT_KEY_TAG = "gym_metrics.output_key"
"""A hash of the metrics file's absolute path: no path or secret leaves the machine in it."""
STEP_TAG = "gym_metrics.export_step"
BATCH = 1000
"""MLflow's most metrics per log_batch call."""
HTTP_BOUNDS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "20", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}
"""A tracker that is down or never answers fails the export within about a minute a request
(MLflow's own defaults, 120 s x 7 retries with doubling waits, held a command for 4 to 16
minutes); each is MLflow's own variable, so one already set wins."""


def is_file_store(uri: str) -> bool:
    """A `file:` URI or a plain path (MLflow's FileStore)."""
    scheme = urlparse(uri).scheme
    return scheme in ("", "file") or len(scheme) == 1  # "C:\\..." on Windows


@register_exporter("mlflow")
class MlflowExporter(Exporter):
    """Logs into MLflow through `MlflowClient` (no global fluent state is touched). The
    experiment is $MLFLOW_EXPERIMENT_NAME, else `gym-metrics`; the URI, when not given, is
    MLflow's own default ($MLFLOW_TRACKING_URI, ...)."""

    extra = "mlflow"
    requires = ("mlflow",)

    def export(self, run: ExportRun) -> str:
        import mlflow
        from mlflow.entities import Metric
        from mlflow.tracking import MlflowClient

        uri = self.target or mlflow.get_tracking_uri()
        if is_file_store(uri):
            # MLflow >= 3.17 refuses file stores unless told; asking for one by URI is telling.
            os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
        for name, value in HTTP_BOUNDS.items():
            os.environ.setdefault(name, value)
        client = MlflowClient(tracking_uri=uri)
        experiment_id = _experiment(client, os.environ.get(EXPERIMENT_ENV) or DEFAULT_EXPERIMENT)
        run_id, step = _run(client, experiment_id, run)
        now = int(time.time() * 1000)
        metrics = [Metric(k, float(v), now, step) for k, v in run.flat(mlflow_key, MLFLOW_KEY_LIMIT).items()]
        try:
            for start in range(0, len(metrics), BATCH):
                client.log_batch(run_id, metrics=metrics[start : start + BATCH])
            for path in run.artifacts:
                client.log_artifact(run_id, str(path))
        except BaseException:
            try:  # a run left RUNNING would look alive for good
                client.set_terminated(run_id, "FAILED")
            except Exception:
                pass
            raise
        client.set_terminated(run_id, "FINISHED")
        return f"mlflow run {run_id} ({run.name}, {len(metrics)} metrics{run.skipped_note()})"


def _experiment(client: Any, name: str) -> str:
    found = client.get_experiment_by_name(name)
    return str(found.experiment_id if found is not None else client.create_experiment(name))


def _run(client: Any, experiment_id: str, run: ExportRun) -> tuple[str, int]:
    """The run to log into and the step: a resumed export's earlier run at the next step,
    else a new run at step 0."""
    if run.resume:
        found = client.search_runs(
            [experiment_id], filter_string=f"tags.`{OUTPUT_KEY_TAG}` = '{run.key}'",
            max_results=1, order_by=["attributes.start_time DESC"],
        )  # fmt: skip
        if found:
            earlier = found[0]
            step = int(earlier.data.tags.get(STEP_TAG, "0")) + 1
            client.set_tag(earlier.info.run_id, STEP_TAG, str(step))
            client.update_run(earlier.info.run_id, status="RUNNING")
            return str(earlier.info.run_id), step
    tags = {OUTPUT_KEY_TAG: run.key, STEP_TAG: "0", "gym_metrics.output_stem": run.name}
    created = client.create_run(experiment_id, tags=tags, run_name=run.name)
    return str(created.info.run_id), 0
