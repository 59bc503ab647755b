"""`collect --benchmark SUITE.yaml` (and `--split`): a NeMo Gym config declaring several benchmarks (an eval
suite, `gym eval run --config`), held to what NeMo Gym 0.7.0 did with the test tree's two suites
(tests/data/nemo_gym_configs/benchmarks.json, recorded by scripts/make_nemo_benchmark_reference.py):
the collated file byte for byte, and the rows its rollout collection dispatched (task and rollout
indices counted over the whole suite, `task_source`, each row's agent), each benchmark run on its
own agent's resources server (served for the run, each in a child of its own)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.cli import main as cli_main
from gym_metrics.nemo_gym import read_benchmarks
from gym_metrics.testing import ScriptedPolicyServer

from test_benchmark_runs import ANSWERS

REFERENCE = json.loads((Path(__file__).parents[1] / "data" / "nemo_gym_configs" / "benchmarks.json").read_text())
SUITES = ["benchmarks/demo_suite/config.yaml", "benchmarks/demo_suite_two/config.yaml"]
KEYS = ("_ng_task_index", "_ng_rollout_index", "agent_ref", "task_source")


def keyed(rows: list[dict[str, Any]]) -> list[list[Any]]:
    return sorted([r[k] for k in KEYS] for r in rows)


def prompt(row: dict[str, Any]) -> str:
    return str(row["responses_create_params"]["input"][-1]["content"])


@pytest.mark.parametrize("case", SUITES)
def test_a_suite_collates_as_nemo_gym_collates_it(case: str, config_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its benchmarks in NeMo Gym's order, each row's prompt, `task_source` and repeats: the
    file `gym eval run` collates, byte for byte."""
    monkeypatch.chdir(config_tree)
    assert REFERENCE["cases"][case]["benchmark"] is None  # (NeMo Gym: a suite, not one benchmark)
    suite = read_benchmarks(case)
    lines = suite.collate(config_tree / "collated.jsonl")
    assert (config_tree / "collated.jsonl").read_text().splitlines() == REFERENCE["cases"][case]["collated"]
    assert lines == len(REFERENCE["cases"][case]["collated"])


@pytest.mark.slow  # 10-26 s: on the default Python only (CI's time bound)
def test_a_suite_runs_each_benchmark_on_its_own_server(config_tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """demo_suite_two: demo_eval's benchmark on its resources server (label `eval`), the second on
    another (label `second`, half a reward a match), each served for the run: NeMo Gym's rows,
    each verified by its own server, each agent aggregated."""
    monkeypatch.chdir(config_tree)
    case = SUITES[1]
    expected = REFERENCE["cases"][case]["rows"]
    out = config_tree / "out.jsonl"
    with ScriptedPolicyServer(ANSWERS) as policy:
        args = ["collect", "--benchmark", case, "--output", str(out), "--policy-url", policy.url, "--policy-model", "scripted", "--policy-api", "responses"]
        assert cli_main(args) == 0
        asked = sum(policy.calls.values())
    said = capsys.readouterr().err
    assert "collect: suite benchmarks/demo_suite_two/config.yaml: 2 benchmarks" in said, said
    assert "(demo_second_resources_server) on 127.0.0.1:" in said and "(demo_eval_resources_server) on 127.0.0.1:" in said, said
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert keyed(written) == keyed(expected) and asked == len(expected)
    by_agent = {(r["agent_ref"]["name"], r["label"]) for r in written}
    assert by_agent == {("demo_eval_simple_agent", "eval"), ("demo_second_simple_agent", "second")}
    second = {prompt(r): r["reward"] for r in written if r["label"] == "second"}
    assert second == {"Say yes.": 0.5, "Say no.": 0.0, "Say yes!": 0.5}
    metrics = json.loads((config_tree / "out_aggregate_metrics.json").read_text())
    assert {m["agent_ref"]["name"]: m["agent_metrics"]["mean/reward"] for m in metrics} == pytest.approx(
        {"demo_eval_simple_agent": 18 / 21, "demo_second_simple_agent": 2 / 6}  # (12 of 2+2 and 6 of France right, 3 colours wrong)
    )
    assert (config_tree / "out_benchmark.jsonl").read_text().splitlines() == REFERENCE["cases"][case]["collated"]
    for block in ("demo_eval_resources_server", "demo_second_resources_server"):
        assert "listening on 127.0.0.1:" in (config_tree / f"out_server_{block}.log").read_text()


@pytest.mark.slow  # 10-26 s: on the default Python only (CI's time bound)
def test_a_suites_collated_file_and_its_errors(config_tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """--input with a suite is its collated file (not collated again); a line whose task_source is
    none of the suite's benchmarks is named; the flags a suite's benchmarks bring are refused."""
    monkeypatch.chdir(config_tree)
    case = SUITES[1]
    collated = config_tree / "given.jsonl"
    lines = REFERENCE["cases"][case]["collated"]
    collated.write_text("".join(line + "\n" for line in [lines[0], json.dumps({**json.loads(lines[0]), "task_source": "elsewhere"})]))
    out = config_tree / "out.jsonl"
    with ScriptedPolicyServer(ANSWERS) as policy:
        args = ["collect", "--benchmark", case, "--input", str(collated), "--output", str(out), "--policy-url", policy.url,
                "--policy-model", "scripted", "--policy-api", "responses", "--on-bad-line", "skip"]  # fmt: skip
        assert cli_main(args) == 0
    said = capsys.readouterr().err
    assert "task_source" in said and "'elsewhere' is none of the suite's benchmarks'" in said, said
    assert [json.loads(line)["task_source"] for line in out.read_text().splitlines()] == ["demo_eval_simple_agent"]
    assert not (config_tree / "out_benchmark.jsonl").exists()
    for flags, named in ((["--num-repeats", "2"], "--num-repeats"), (["--prompt-config", "p.yaml"], "--prompt-config")):
        assert cli_main(["collect", "--benchmark", case, "--output", str(config_tree / "o.jsonl"), *flags]) == 2
        assert f"{named}: not with a suite's --benchmark" in capsys.readouterr().err


def test_a_suite_is_prepared_benchmark_by_benchmark(config_tree: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """`dataset nemo-gym-benchmark SUITE.yaml` (`gym eval prepare --config SUITE`): each
    benchmark's prepare script in turn, `--cached` keeping the data already there; one that
    cannot be prepared is named."""
    monkeypatch.chdir(config_tree)
    data = config_tree / "benchmarks/demo_eval/data/demo_eval_benchmark.jsonl"
    committed = data.read_bytes()
    data.unlink()
    assert cli_main(["dataset", "nemo-gym-benchmark", SUITES[1], "--cached"]) == 0
    said = capfd.readouterr().err
    assert data.read_bytes() == committed and "demo_eval: 7 rows" in said and "demo_second: already prepared" in said, said
    assert cli_main(["dataset", "nemo-gym-benchmark", SUITES[1]]) == 2  # demo_second's prepare script is not in the tree
    assert "no prepare script" in capfd.readouterr().err


@pytest.mark.parametrize("split", ["train", "validation"])
def test_a_split_runs_as_gym_eval_run_runs_it(split: str, config_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--benchmark CONFIG --split train|validation` (`gym eval run ++split=`): that type's
    datasets only, their rows as NeMo Gym collates them (no prompt template: it templates
    benchmark rows only; a stale agent_ref dropped; equal lines one task) and dispatches them."""
    monkeypatch.chdir(config_tree)
    case = "benchmarks/demo_splits/config.yaml"
    recorded = REFERENCE["cases"][case]["splits"][split]
    found = read_benchmarks(case, split)
    make = found.row_maker(None)
    collated = [make(json.loads(line))[1].decode() for line in found.data.read_text().splitlines() for _ in range(found.num_repeats)]
    assert collated == recorded["collated"]
    out = config_tree / "out.jsonl"
    with ScriptedPolicyServer(ANSWERS) as policy:
        args = ["collect", "--benchmark", case, "--split", split, "--output", str(out), "--policy-url", policy.url, "--policy-model", "scripted",
                "--policy-api", "responses"]  # fmt: skip
        assert cli_main(args) == 0
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert keyed(written) == keyed(recorded["rows"]) and {r["label"] for r in written} == {"splits"}
    assert sorted(prompt(r) for r in written) == sorted(prompt(r) for r in recorded["rows"])


def test_a_split_that_cannot_run_is_named(config_tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(config_tree)
    config = config_tree / "benchmarks/demo_splits/config.yaml"
    unlicensed = config_tree / "benchmarks/demo_splits/unlicensed.yaml"
    unlicensed.write_text(config.read_text().replace("          license: Apache 2.0\n", ""))
    base = ["collect", "--server", "127.0.0.1:9", "--output", str(config_tree / "o.jsonl")]
    cases = [
        (["--split", "train", "--input", "benchmarks/demo_splits/data/train.jsonl"], ["--split: give the config with --benchmark"]),
        (["--benchmark", "demo_eval", "--split", "train"], ["declares no dataset of type `train`", "demo_eval_simple_agent: demo_eval (type: benchmark)"]),
        (["--benchmark", str(unlicensed), "--split", "train"], ["demo_env_simple_agent.datasets[0].license", "A license is required for demo_train"]),
    ]
    for flags, words in cases:
        code = cli_main([*base, *flags])
        err = capsys.readouterr().err
        assert code == 2 and all(w in err for w in words), (flags, err)


def test_a_suite_server_that_cannot_start_is_named_and_the_others_stopped(config_tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The suite's servers start together; one that exits first is the error (its block and what it
    said), and the ones that did start are stopped with it."""
    monkeypatch.chdir(config_tree)
    config = config_tree / SUITES[1]
    config.write_text(config.read_text().replace("reward_if_match: 0.5", "reward_if_match: not a number"))
    out = config_tree / "out.jsonl"
    assert cli_main(["collect", "--benchmark", SUITES[1], "--output", str(out), "--policy-url", "http://127.0.0.1:9/v1", "--policy-model", "m"]) == 2
    said = capsys.readouterr().err
    assert "did not start (exit" in said and "(demo_second_resources_server):" in said and "reward_if_match" in said, said
    mine = str(config).encode()
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline(p).count(mine)]
    assert not left, [_cmdline(p) for p in left]


def _cmdline(process: Path) -> bytes:
    try:
        return (process / "cmdline").read_bytes()
    except OSError:
        return b""


def test_a_suite_benchmark_on_an_agent_of_nemo_gyms_own_code_is_named(config_tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """An agent pointing at no resources server (tau2's, opencode's: their own agent code) cannot
    run here: named with its implementation before any server starts."""
    monkeypatch.chdir(config_tree)
    custom = config_tree / "benchmarks/demo_suite_two/custom.yaml"
    custom.write_text((config_tree / SUITES[1]).read_text() + """
demo_custom_agent:
  responses_api_agents:
    tau2:
      entrypoint: app.py
      datasets:
        - name: demo_custom
          type: benchmark
          jsonl_fpath: benchmarks/demo_decoupled/data/rows.jsonl
          prepare_script: benchmarks/demo_decoupled/prepare.py
""")
    assert cli_main(["collect", "--benchmark", str(custom), "--output", str(config_tree / "o.jsonl"), "--policy-url", "http://127.0.0.1:9/v1", "--policy-model", "m"]) == 2
    said = capsys.readouterr().err
    assert "agent 'demo_custom_agent' (tau2) names no resources_server" in said and "collect: serving" not in said, said


def test_the_wheels_suites_read_as_gym_eval_prepare_reads_them(ported: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Nemotron 3.5 eval suites of the wheel (7 and 17 benchmarks over their own agents and
    servers): each benchmark's name, agent, repeats and data file, in NeMo Gym's order."""
    with zipfile.ZipFile(ported.wheel) as wheel:
        wheel.extractall(tmp_path, [m for m in wheel.namelist() if m.endswith(".yaml")])
    monkeypatch.chdir(tmp_path)
    for config, expected in REFERENCE["wheel_suites"].items():
        suite = read_benchmarks(config)
        found = [[b.name, b.agent, b.num_repeats, str(b.data.relative_to(tmp_path) if b.data.is_absolute() else b.data)] for b in suite.benchmarks]
        assert found == expected, config
    assert [len(v) for v in REFERENCE["wheel_suites"].values()] == [7, 17]


def test_a_suite_whose_rows_nemo_gym_refuses_leaves_no_collating_file(config_tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A bad row in the suite's second benchmark was named (exit 2) and its half-collated file
    (`.out_benchmark.jsonl.collating`) left beside the output."""
    monkeypatch.chdir(config_tree)
    data = config_tree / "benchmarks/demo_decoupled/data/rows.jsonl"  # demo_second's rows
    data.write_bytes(data.read_bytes() + b"{not json\n")
    assert cli_main(["collect", "--benchmark", SUITES[1], "--output", str(config_tree / "out.jsonl"), "--policy-url", "http://127.0.0.1:9/v1",
                     "--policy-model", "m"]) == 2  # fmt: skip
    assert "a row NeMo Gym refuses" in capsys.readouterr().err
    assert sorted(p.name for p in config_tree.glob(".*collating")) == []
