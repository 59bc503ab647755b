"""Each exporter against its real backend, read back with that backend's own reader."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gym_metrics.exporters import AgentMetrics, ExportRun, get_exporter, load_run, mlflow_key
from _exporter_helpers import need


def test_load_run_names_the_run_after_the_stem_and_keeps_finite_numbers(metrics_file: Path) -> None:
    run = load_run(metrics_file)
    assert run.name == "run1" and run.artifacts == (metrics_file,)
    flat = run.flat()
    assert flat["policy_a/key/pass@4"] == 0.9 and flat["policy_b/max/reward"] == 1.0
    assert not any("nan_one" in k or "rollout" in k for k in flat)


def test_nested_blocks_booleans_and_big_integers_are_exported_and_what_is_not_is_counted(tmp_path: Path) -> None:
    """A metric that is a block of numbers was dropped without a word; integers past 2**53 were
    rounded even for W&B, which keeps them."""
    path = tmp_path / "edge_aggregate_metrics.json"
    path.write_text(json.dumps([{"agent_ref": {"name": "a"}, "key_metrics": {
        "by_domain": {"math": 0.5, "code": {"py": 0.25}}, "ok": True, "big": 2**53 + 1, "text": "0.75", "none": None, "list": [1],
    }, "agent_metrics": {}}]))  # fmt: skip
    run = load_run(path)
    flat = run.flat()
    assert flat == {"a/key/by_domain/math": 0.5, "a/key/by_domain/code/py": 0.25, "a/key/ok": 1, "a/key/big": 2**53 + 1}
    assert type(flat["a/key/big"]) is int and run.skipped == 3 and run.skipped_note() == ", 3 values not numbers: left out"


def test_names_that_collide_after_sanitising_stay_apart_and_within_mlflows_limit() -> None:
    """`a@b` and `a_at_b` sanitise alike; the second got `_2` after the 250-character cut: 252."""
    long = "m" * 240
    run = ExportRun(Path("x.json"), [AgentMetrics("a@b", {long: 0.5}, {}), AgentMetrics("a_at_b", {long: 0.25}, {})], "x")
    flat = run.flat(mlflow_key, 250)
    assert sorted(flat.values()) == [0.25, 0.5] and all(len(k) <= 250 for k in flat) and len(set(flat)) == 2


def test_mlflow_keys_are_allowed_and_stay_apart() -> None:
    assert mlflow_key("a/pass@4") == "a/pass_at_4" and mlflow_key("a/pass^4") == "a/pass_hat_4"
    assert mlflow_key("a/pass@1[avg-of-k]") == "a/pass_at_1_avg-of-k_"
    assert len(mlflow_key("x" * 400)) <= 250
    # path segments MLflow refuses ("must not resolve to other names"): the whole export failed
    assert [mlflow_key(n) for n in ("/models/llama-3.1-8b/mean/reward", "../up/k", "x//y", "trail/", "org/./m")] == \
           ["_/models/llama-3.1-8b/mean/reward", "_/up/k", "x/_/y", "trail/_", "org/_/m"]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("store", ["file", "sqlite"])
def test_mlflow_logs_metrics_and_artifacts_and_a_resume_logs_into_the_same_run(
    store: str, metrics_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)  # sqlite's default artifact root is ./mlruns
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)  # the exporter sets it for file:
    uri = f"file:{tmp_path / 'mlruns'}" if store == "file" else f"sqlite:///{tmp_path / 'mlflow.db'}"
    exporter = get_exporter("mlflow")(uri)
    exporter.export(load_run(metrics_file))

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("gym-metrics")
    [run] = client.search_runs([experiment.experiment_id])
    assert run.info.run_name == "run1" and run.info.status == "FINISHED"
    assert run.data.metrics["policy_a/key/pass_at_4"] == 0.9
    assert run.data.metrics["policy_a/key/pass_hat_4"] == 0.5
    assert run.data.metrics["policy_b/max/reward"] == 1.0
    assert [a.path for a in client.list_artifacts(run.info.run_id)] == ["run1_aggregate_metrics.json"]

    exporter.export(load_run(metrics_file, resume=True))  # collect --resume
    [again] = client.search_runs([experiment.experiment_id])
    assert again.info.run_id == run.info.run_id
    history = client.get_metric_history(run.info.run_id, "policy_a/key/pass_at_4")
    assert sorted(m.step for m in history) == [0, 1]

    exporter.export(load_run(metrics_file))  # not a resume: a new run
    assert len(client.search_runs([experiment.experiment_id])) == 2


def _wandb_records(path: Path) -> list[object]:
    """The records of a .wandb file (LevelDB log framing of wandb's protobuf Records)."""
    from wandb.proto.wandb_internal_pb2 import Record

    data, block, pos, buf, out = path.read_bytes(), 32768, 7, b"", []
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        buf += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL, LAST
            record = Record()
            record.ParseFromString(buf)
            out.append(record)
            buf = b""
    return out


@pytest.mark.slow
def test_wandb_offline_writes_history_and_the_metrics_file(
    metrics_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")  # never the network
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setattr(sys, "argv", ["gym-metrics", "aggregate", "--export", "mlflow=http://alice:S3CRETpassw0rd@127.0.0.1:9/"])
    get_exporter("wandb")().export(load_run(metrics_file))
    written = [f.read_bytes() for f in (tmp_path / "wandb").rglob("*") if f.is_file()]
    assert written and not any(b"S3CRETpassw0rd" in data for data in written)  # wandb kept the command line as metadata

    [run_dir] = (tmp_path / "wandb").glob("offline-run-*")
    assert (run_dir / "files" / "run1_aggregate_metrics.json").read_bytes() == metrics_file.read_bytes()
    [log] = run_dir.glob("run-*.wandb")
    records = _wandb_records(log)
    [run_record] = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert run_record.display_name == "run1" and run_record.project == "gym-metrics"
    history = {item.key or "/".join(item.nested_key): item.value_json
               for r in records if r.WhichOneof("record_type") == "history" for item in r.history.item}  # fmt: skip
    assert float(history["policy_a/key/pass@4"]) == 0.9 and float(history["policy_b/max/reward"]) == 1.0

    get_exporter("wandb")().export(load_run(metrics_file, resume=True))
    # the same run id (two folders, or one when both started within the same second)
    ids = {r.run.run_id for log in (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")
           for r in _wandb_records(log) if r.WhichOneof("record_type") == "run"}  # fmt: skip
    assert ids == {run_record.run_id}


@pytest.mark.slow  # needs the tensorboard extra: only the default venv of .ci/run has it
def test_tensorboard_event_files_read_back_and_a_resume_is_the_next_step(metrics_file: Path, tmp_path: Path) -> None:
    need("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    exporter = get_exporter("tensorboard")(str(tmp_path / "tb"))
    exporter.export(load_run(metrics_file))
    exporter.export(load_run(metrics_file, resume=True))
    events = EventAccumulator(str(tmp_path / "tb" / "run1"))
    events.Reload()
    scalars = events.Scalars("policy_a/key/pass@4")
    assert [s.step for s in scalars] == [0, 1] and scalars[0].value == pytest.approx(0.9)
    assert "policy_b/max/reward" in events.Tags()["scalars"]


def test_an_exporter_is_a_registered_class(tmp_path: Path) -> None:
    from gym_metrics.exporters import EXPORTERS, Exporter, register_exporter

    snapshot = EXPORTERS.snapshot()
    try:

        @register_exporter("memory")
        class Memory(Exporter):
            seen: list[ExportRun] = []

            def export(self, run: ExportRun) -> str:
                self.seen.append(run)
                return "memory"

        assert get_exporter("memory") is Memory and Memory.name == "memory"
    finally:
        EXPORTERS.restore(snapshot)
    assert "memory" not in EXPORTERS.names()


def test_a_missing_extra_names_the_pip_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from gym_metrics.exporters import ExporterMissingError

    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if the extra were not installed
    with pytest.raises(ExporterMissingError, match=r"pip install 'gym-metrics\[mlflow\]'"):
        get_exporter("mlflow").check_installed()
