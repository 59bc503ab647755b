"""`--export` on the command line: exports after the file is written, a missing extra is
exit 2 before any work, a failed export is exit 1 with the metrics file kept."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from _exporter_helpers import need
from gym_metrics import resolve_server
from gym_metrics.cli import main


def _sample() -> Path:
    sample = resolve_server("math_exact")().sample
    assert sample is not None
    return Path(sample)


@pytest.mark.slow  # needs the tensorboard extra: only the default venv of .ci/run has it
def test_aggregate_exports_to_tensorboard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    need("tensorboard")
    out = tmp_path / "eval_aggregate_metrics.json"
    code = main(["aggregate", str(_sample()), "-o", str(out), "-q", "--export", f"tensorboard={tmp_path / 'tb'}"])
    assert code == 0 and out.is_file()
    assert list((tmp_path / "tb" / "eval").glob("events.out.tfevents.*"))
    assert "exported -> tensorboard" in capsys.readouterr().out


def test_a_missing_extra_exits_2_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if the extra were not installed
    out = tmp_path / "m_aggregate_metrics.json"
    assert main(["aggregate", str(_sample()), "-o", str(out), "--export", "wandb"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'gym-metrics[wandb]'" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_an_unknown_exporter_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["aggregate", str(_sample()), "--export", "nope"]) == 2
    assert "unknown exporter 'nope'" in capsys.readouterr().err


def test_a_failed_export_exits_1_and_keeps_the_metrics_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gym_metrics.exporters import EXPORTERS, Exporter, ExportRun, register_exporter

    snapshot = EXPORTERS.snapshot()
    try:

        @register_exporter("broken")
        class Broken(Exporter):
            def export(self, run: ExportRun) -> str:  # as MLflow's client names its tracking URI, credentials and all
                raise ConnectionError(f"tracking server {self.target} went away")

        out = tmp_path / "eval_aggregate_metrics.json"
        code = main(["aggregate", str(_sample()), "-o", str(out), "-q", "--export", "broken=https://alice:S3CRETpassw0rd@mlflow.example/"])
    finally:
        EXPORTERS.restore(snapshot)
    assert code == 1 and out.is_file()
    err = capsys.readouterr().err
    assert "export broken failed (ConnectionError: tracking server https://***@mlflow.example/ went away)" in err and "the metrics file is kept" in err
    assert "S3CRET" not in err


@pytest.mark.slow
def test_the_report_goes_to_mlflow_as_an_artifact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = tmp_path / "eval_aggregate_metrics.json"
    code = main(["aggregate", str(_sample()), "-o", str(out), "-q", "--report", "--export", f"mlflow={uri}"])
    assert code == 0
    client = MlflowClient(tracking_uri=uri)
    [run] = client.search_runs([client.get_experiment_by_name("gym-metrics").experiment_id])
    assert run.info.run_name == "eval"
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"eval_aggregate_metrics.json", "eval_report.html"}


@pytest.mark.slow
def test_collect_resume_logs_into_the_same_mlflow_run(server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)
    uri = f"file:{tmp_path / 'mlruns'}"
    lines = _sample().read_text().splitlines(keepends=True)
    half = tmp_path / "half.jsonl"
    half.write_text("".join(lines[: len(lines) // 2]))
    whole = tmp_path / "whole.jsonl"
    whole.write_text("".join(lines))
    out = tmp_path / "run.jsonl"
    base = ["collect", "--server", server, "--output", str(out), "--export", f"mlflow={uri}"]
    assert main([*base, "--input", str(half)]) == 0  # an interrupted run, as far as its output goes
    assert main([*base, "--input", str(whole), "--resume"]) == 0
    client = MlflowClient(tracking_uri=uri)
    [run] = client.search_runs([client.get_experiment_by_name("gym-metrics").experiment_id])
    assert run.info.run_name == "run"
    history = client.get_metric_history(run.info.run_id, "strong_agent/key/mean/reward")
    assert sorted(m.step for m in history) == [0, 1]


@pytest.mark.slow  # needs the mlflow extra
@pytest.mark.parametrize("password", ["S3C@RETpw", "eyJhbGciOiJIUzI1NiJ9." + "S3CRET" * 70])
def test_a_tracker_that_is_down_fails_soon_and_never_shows_its_password(
    password: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """MLflow's own retries held the command 4+ minutes; the error line was cut before it was
    masked (a long password's first 270 characters shown) and a password with `@` half-masked."""
    need("mlflow")
    for name in ("MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"):
        monkeypatch.delenv(name, raising=False)
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "m_aggregate_metrics.json"
    started = time.monotonic()
    code = main(["aggregate", str(_sample()), "-o", str(out), "-q", "--export", f"mlflow=http://alice:{password}@127.0.0.1:{port}/"])
    err = capsys.readouterr().err
    assert code == 1 and out.is_file() and time.monotonic() - started < 60
    assert "error: export mlflow failed" in err and "http://***@127.0.0.1" in err
    assert "S3C" not in err and "RETpw" not in err and "eyJhbG" not in err


@pytest.mark.slow  # needs the mlflow extra
def test_a_run_whose_logging_failed_is_marked_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need("mlflow")
    from mlflow.tracking import MlflowClient

    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the store refused the batch")

    monkeypatch.setattr(MlflowClient, "log_batch", refuse)
    uri = f"file:{tmp_path / 'mlruns'}"
    out = tmp_path / "m_aggregate_metrics.json"
    assert main(["aggregate", str(_sample()), "-o", str(out), "-q", "--export", f"mlflow={uri}"]) == 1
    client = MlflowClient(tracking_uri=uri)
    [run] = client.search_runs([client.get_experiment_by_name("gym-metrics").experiment_id])
    assert run.info.status == "FAILED"
