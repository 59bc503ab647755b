"""ATIF v1.7 export (issue 39 item 3): `gym-metrics export ROLLOUTS --atif -o DIR`.

The strict profile is NeMo Gym 0.7.0's: on every case of tests/data/atif/cases.jsonl (real
collected rows, and each changed in one way) gym-metrics makes the trajectory NeMo Gym's own
converter made, or refuses with its message (tests/data/atif/reference.jsonl, recorded by
scripts/make_nemo_atif_reference.py). Then the command on rows collected now: files, manifest
digests, all-or-nothing publishing, --skip-refused, --lenient (gaps and token IDs kept, still
valid ATIF: NeMo Gym's own models take it when GYM_METRICS_NEMO_PYTHON names its venv)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.recording import AtifExportError, AtifRefused, export_atif, rollout_to_atif

DATA = Path(__file__).parents[1] / "data" / "atif"
CASES = [json.loads(line) for line in (DATA / "cases.jsonl").read_text().splitlines()]
REFERENCE = {o["case"]: o for o in map(json.loads, (DATA / "reference.jsonl").read_text().splitlines())}
NEMO_PYTHON = os.environ.get("GYM_METRICS_NEMO_PYTHON")


def convert(row: dict[str, Any], **options: Any) -> dict[str, Any]:
    return rollout_to_atif(row, session_id="run-1", agent_version="0.1", exporter_version="test", **options)


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_each_case_is_what_nemo_gyms_converter_makes_of_it(case: dict[str, Any]) -> None:
    expected = REFERENCE[case["case"]]
    if "error" in expected:
        with pytest.raises(AtifRefused) as refused:
            convert(case["row"])
        assert str(refused.value) == expected["error"]
        return
    mine = convert(case["row"])
    assert mine["extra"]["nemo_gym"].pop("exporter") == {"name": "gym-metrics", "version": "test"}
    expected["atif"]["extra"]["nemo_gym"].pop("exporter")
    assert mine == expected["atif"]


def test_the_reference_holds_both_outcomes() -> None:
    """The cases are not all accepted or all refused (a reference that tests one side only)."""
    outcomes = [("error" in o) for o in REFERENCE.values()]
    assert len(REFERENCE) == len(CASES) and 5 <= outcomes.count(False) and 20 <= outcomes.count(True)


def rows_file(path: Path, names: list[str]) -> Path:
    """The named cases as a rollouts file, each its own (task, rollout)."""
    by_name = {c["case"]: c["row"] for c in CASES}
    with path.open("w") as f:
        for n, name in enumerate(names):
            row = json.loads(json.dumps(by_name[name]))
            row.update(_ng_task_index=n, _ng_rollout_index=0)
            f.write(json.dumps(row) + "\n")
    return path


ACCEPTED = ["collected over responses", "collected over chat", "a system message first", "turns joined by response id"]


def test_the_command_writes_a_file_per_rollout_and_a_manifest_of_their_digests(tmp_path: Path) -> None:
    rollouts = rows_file(tmp_path / "run.jsonl", ACCEPTED)
    done = subprocess.run([sys.executable, "-m", "gym_metrics.cli", "export", str(rollouts), "--atif", "-o", str(tmp_path / "atif"),
                           "--agent-version", "0.1"], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "wrote 4 ATIF v1.7 trajectories" in done.stdout
    manifest = [json.loads(line) for line in (tmp_path / "atif" / "manifest.jsonl").read_text().splitlines()]
    assert [m["trajectory_path"] for m in manifest] == [f"{n}-0.json" for n in range(4)]
    for m, name in zip(manifest, ACCEPTED):
        body = (tmp_path / "atif" / m["trajectory_path"]).read_bytes()
        assert hashlib.sha256(body).hexdigest() == m["expected_sha256"]
        trajectory = json.loads(body)
        assert trajectory["session_id"] == "run" and trajectory["trajectory_id"] == f"run:{m['_ng_task_index']}:0"  # the file's stem
        assert trajectory["agent"] == {"name": "agent", "version": "0.1", "model_name": "scripted"}
        expected = REFERENCE[name]["atif"]
        assert [s["message"] for s in trajectory["steps"]] == [s["message"] for s in expected["steps"]]


def test_an_integer_past_64_bits_is_written_in_digits_as_nemo_gym_writes_it(tmp_path: Path) -> None:
    """orjson writes no integer past 64 bits: a model call's request holding one refused the row
    as unwritable (NeMo Gym's converter exports it; scripts/fuzz_nemo_atif.py found it)."""
    rollouts = rows_file(tmp_path / "run.jsonl", ["a request holding an integer past 64 bits"])
    done = export_atif(rollouts, tmp_path / "atif", session_id="run-1", agent_version="0.1", exporter_version="t")
    assert done.exported == 1 and not done.refused
    text = (tmp_path / "atif" / "0-0.json").read_text()
    assert '"seed": 1180591620717411303424' in text
    written = json.loads(text)
    expected = REFERENCE["a request holding an integer past 64 bits"]["atif"]
    assert written["steps"][1]["extra"]["nemo_gym"]["model_call"]["request"]["seed"] == 2**70
    assert written["steps"] == expected["steps"]


def test_one_refused_row_writes_nothing_and_names_every_refusal(tmp_path: Path) -> None:
    rollouts = rows_file(tmp_path / "run.jsonl", [*ACCEPTED, "a failed tool call", "a developer message first"])
    with rollouts.open("a") as f:
        f.write("{not json\n")
    with pytest.raises(AtifExportError) as refused:
        export_atif(rollouts, tmp_path / "atif", session_id="s", agent_version="v", exporter_version="t")
    assert [n for n, _ in refused.value.problems] == [5, 6, 7]
    message = str(refused.value)
    assert "line 5: ng_trajectory.invocations[0].conversation[1]: tool execution 'call_0' is 'failed'" in message
    assert "line 6: ng_trajectory.invocations[0].conversation[0].role: developer messages" in message and "line 7: invalid JSON" in message
    assert not (tmp_path / "atif").exists() and [p.name for p in tmp_path.iterdir()] == ["run.jsonl"]  # no staging left either


def test_skip_refused_exports_the_rest_and_lists_the_others(tmp_path: Path) -> None:
    rollouts = rows_file(tmp_path / "run.jsonl", [*ACCEPTED, "collected without resolved (a gap)"])
    done = export_atif(rollouts, tmp_path / "atif", session_id="s", agent_version="v", exporter_version="t", skip_refused=True)
    assert done.exported == 4 and [n for n, _ in done.refused] == [5]
    listed = [json.loads(line) for line in (tmp_path / "atif" / "refused.jsonl").read_text().splitlines()]
    assert listed == [{"line": 5, "reason": "ng_trajectory.gaps: source coverage gaps are not supported by strict export"}]


def test_an_existing_directory_or_a_duplicate_rollout_is_refused(tmp_path: Path) -> None:
    rollouts = rows_file(tmp_path / "run.jsonl", ACCEPTED[:2])
    (tmp_path / "taken").mkdir()
    with pytest.raises(AtifExportError, match="already exists"):
        export_atif(rollouts, tmp_path / "taken", session_id="s", agent_version="v", exporter_version="t")
    twice = tmp_path / "twice.jsonl"
    twice.write_text(rollouts.read_text().splitlines()[0] + "\n" + rollouts.read_text().splitlines()[0] + "\n")
    with pytest.raises(AtifExportError, match=r"line 2: duplicate rollout key \(task 0, rollout 0\)"):
        export_atif(twice, tmp_path / "atif", session_id="s", agent_version="v", exporter_version="t")


def test_the_command_refuses_with_exit_2_and_the_reason(tmp_path: Path) -> None:
    rollouts = rows_file(tmp_path / "run.jsonl", ["a 500 status"])
    done = subprocess.run([sys.executable, "-m", "gym_metrics.cli", "export", str(rollouts), "--atif", "-o", str(tmp_path / "atif")],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "line 1: ng_trajectory.turns[0]: model call returned non-success status 500" in done.stderr


def test_lenient_keeps_gaps_and_token_ids_as_atif_has_them(tmp_path: Path) -> None:
    by_name = {c["case"]: c["row"] for c in CASES}
    tokens, gap = by_name["collected over chat with token ids"], by_name["collected without resolved (a gap)"]
    with pytest.raises(AtifRefused):
        convert(tokens)
    lenient = convert(tokens, lenient=True)
    carriers = [i for i in tokens["ng_trajectory"]["invocations"][0]["conversation"] if "generation_token_ids" in i]
    agent_steps = [s for s in lenient["steps"] if s["source"] == "agent"]
    assert len(carriers) == len(agent_steps) == 3
    for item, step in zip(carriers, agent_steps):
        metrics = step["metrics"]
        assert (metrics["prompt_token_ids"], metrics["completion_token_ids"], metrics["logprobs"]) == (
            item["prompt_token_ids"], item["generation_token_ids"], item["generation_log_probs"])  # fmt: skip
    assert lenient["extra"]["nemo_gym"]["conversion"]["status"] == "complete"
    kept = convert(gap, lenient=True)
    assert kept["extra"]["nemo_gym"]["conversion"]["status"] == "partial"
    assert kept["extra"]["gym_metrics"]["gaps"] == [{"code": "resolution_unavailable", "invocation_id": "root"}]
    if NEMO_PYTHON:  # still ATIF v1.7 by NeMo Gym's own (strict) models
        check = ("import json, sys\nfrom nemo_gym.atif_v1_7 import AtifTrajectoryV1_7\n"
                 "[AtifTrajectoryV1_7.model_validate(json.loads(l), strict=True) for l in sys.stdin]\nprint('valid')\n")  # fmt: skip
        done = subprocess.run([NEMO_PYTHON, "-c", check], input=json.dumps(lenient) + "\n" + json.dumps(kept) + "\n",
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.stdout.strip() == "valid", done.stderr


async def test_rows_collected_now_export_under_the_strict_profile(tmp_path: Path) -> None:
    """The collector's trajectories as they are today (not the recorded cases): a real episode
    over each API exports whole, its steps those of its conversation."""
    sys.path.insert(0, str(Path(__file__).parents[2] / "scripts"))
    from make_atif_cases import ResolvedCounter, base_rows

    for api in ("responses", "chat"):
        row = await base_rows(ResolvedCounter(), api)
        atif = convert(row)
        assert [s["source"] for s in atif["steps"]] == ["user", "agent", "agent", "agent"]
        assert atif["steps"][1]["reasoning_content"] == "Add the first number." and atif["steps"][-1]["message"] == [{"type": "text", "text": "Done."}]
        assert [len(s.get("tool_calls", [])) for s in atif["steps"][1:]] == [2, 1, 0]


def test_rows_nested_too_deep_to_read_or_write_are_refused_naming_their_line(tmp_path: Path) -> None:
    """A line nested 200,000 deep (Python's json: RecursionError) and a row whose model call's
    request holds an object 300 deep (read, but orjson writes 254 levels) ended the export with
    an internal error naming no line, `--skip-refused` or not."""
    good = json.loads(rows_file(tmp_path / "one.jsonl", ACCEPTED[:1]).read_text())
    deep: dict[str, Any] = {}
    at = deep
    for _ in range(300):
        at["a"] = {}
        at = at["a"]
    unwritable = json.loads(json.dumps(good))
    unwritable["_ng_task_index"] = 1
    unwritable["ng_trajectory"]["model_calls"][0]["request"]["metadata_deep"] = deep
    rollouts = tmp_path / "run.jsonl"
    rollouts.write_text(json.dumps(good) + "\n" + "[" * 200_000 + "]" * 200_000 + "\n" + json.dumps(unwritable) + "\n")
    done = export_atif(rollouts, tmp_path / "atif", session_id="s", agent_version="v", exporter_version="t", skip_refused=True)
    assert done.exported == 1
    assert [(n, why.split(" (")[0]) for n, why in done.refused] == [(2, "invalid JSON"), (3, "cannot be written as JSON")]
    assert "nested too deeply" in done.refused[0][1]


def test_lines_that_are_not_rows_are_refused_naming_why(tmp_path: Path) -> None:
    rollouts = tmp_path / "run.jsonl"
    rollouts.write_text('\n{"a": NaN}\n{"a": 1e999}\n{"a": 1e-400}\n{"a": 0.10000000000000000001}\n{"a": 1, "a": 2}\n[1]\n')
    seen: list[int] = []
    with pytest.raises(AtifExportError) as refused:
        export_atif(rollouts, tmp_path / "atif", session_id="s", agent_version="v", exporter_version="t", skip_refused=True, progress=seen.append)
    assert str(refused.value) == f"{rollouts} has no row to export (7 refused)" and seen == []
    assert refused.value.problems == [
        (1, "blank JSONL records are not supported"), (2, "invalid JSON (non-JSON constant 'NaN')"),
        (3, "invalid JSON (JSON number '1e999' is beyond a float's range)"), (4, "invalid JSON (JSON number '1e-400' underflows a float)"),
        (5, "invalid JSON (JSON number '0.10000000000000000001' would lose precision as a float)"),
        (6, "invalid JSON (duplicate object key 'a')"), (7, "expected a JSON object")]  # fmt: skip
    rollouts.write_text("\n" * 2000)
    with pytest.raises(AtifExportError, match=r"has no row to export \(2000 refused\)"):
        export_atif(rollouts, tmp_path / "atif", session_id="s", agent_version="v", exporter_version="t", skip_refused=True, progress=seen.append)
    assert seen == [1000, 2000] and not (tmp_path / "atif").exists()


def test_an_unpaired_surrogate_written_as_a_json_escape_is_refused_where_it_is(tmp_path: Path) -> None:
    """`"\\ud800"` is valid JSON text but no UTF-8: NeMo Gym refuses the row wherever it is, a
    key included. The export exported such a row when the surrogate sat where no trajectory
    field copies it (a row's metadata), in a key or, read from a file, in any value
    (scripts/fuzz_nemo_atif.py)."""
    good = json.loads(rows_file(tmp_path / "one.jsonl", ACCEPTED[:1]).read_text())
    rollouts = tmp_path / "run.jsonl"
    rollouts.write_text("".join(json.dumps({**good, "_ng_task_index": n, "metadata": m}) + "\n"
                                for n, m in enumerate([{"a": "\ud800"}, {"\udfff": 1}, {"a": "\ud83d\ude00"}])))  # fmt: skip
    done = export_atif(rollouts, tmp_path / "atif", session_id="s", agent_version="v", exporter_version="t", skip_refused=True)
    assert done.exported == 1 and done.refused == [
        (1, "rollout.metadata.a: contains an unpaired Unicode surrogate and is not valid UTF-8 JSON"),
        (2, "rollout.metadata.<key>: contains an unpaired Unicode surrogate and is not valid UTF-8 JSON")]  # fmt: skip


def test_an_export_with_no_file_two_agents_or_a_rival_output_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AtifExportError, match="^rollouts file not found: "):
        export_atif(tmp_path / "none.jsonl", tmp_path / "atif", session_id="s", agent_version="v", exporter_version="t")
    rollouts = rows_file(tmp_path / "run.jsonl", ACCEPTED[:2])
    rows = [json.loads(line) for line in rollouts.read_text().splitlines()]
    rows[1]["agent_ref"]["name"] = "other"
    rollouts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(AtifExportError) as refused:
        export_atif(rollouts, tmp_path / "atif", session_id="s", agent_version="v", exporter_version="t")
    assert str(refused.value) == f"one agent per export (the agent version is the run's); {rollouts} has 2: agent, other"
    import gym_metrics.recording._atif_export as module

    def rival(trajectory: Any, where: str) -> bytes:  # another process takes the output path mid-export
        (tmp_path / "atif").mkdir(exist_ok=True)
        return atif_bytes(trajectory, where)

    atif_bytes = module.atif_bytes
    monkeypatch.setattr(module, "atif_bytes", rival)
    rows_file(rollouts, ACCEPTED[:1])
    with pytest.raises(AtifExportError, match="^output path was created during the export: "):
        export_atif(rollouts, tmp_path / "atif", session_id="s", agent_version="v", exporter_version="t")
    assert list((tmp_path / "atif").iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["atif", "run.jsonl"]
