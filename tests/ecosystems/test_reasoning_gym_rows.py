"""`gym-metrics dataset reasoning-gym`: its rows hold, and rebuild, the very entries reasoning-gym
generates for the name, size, seed and config given (datasets and seeds drawn per run), a mix
as reasoning-gym's composite dataset draws it; its errors name what to fix."""

from __future__ import annotations

import datetime
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _rg_cases import HASH_ORDERED, RUN_SEED, dataset_command, generated, names, rg, same
from gym_metrics.cli import main
from gym_metrics.ecosystems.reasoning_gym import DatasetRef, entry_of, rebuild_entry


def _check_rows(rows: list[dict[str, Any]], want: Any, name: str, config: dict[str, Any], seed: int, size: int) -> None:
    from reasoning_gym.utils import SYSTEM_PROMPTS

    assert len(rows) == size, (name, f"run seed {RUN_SEED}")
    for index, row in enumerate(rows):
        entry = generated(want, index)
        where = (name, seed, index, f"run seed {RUN_SEED}")
        assert same(entry_of(row["entry"], row.get("entry_types", {})), entry), where
        assert row["reasoning_gym"] == {"dataset": name, "config": config, "seed": seed, "size": size, "index": index}, where
        assert same(rebuild_entry(DatasetRef(**row["reasoning_gym"])), entry), where
        system, user = row["responses_create_params"]["input"]
        assert system == {"role": "system", "content": SYSTEM_PROMPTS["default"]} and user == {"role": "user", "content": entry["question"]}
        assert row["agent_ref"] == {"name": "policy"}


def test_rows_rebuild_the_entries_of_datasets_and_seeds_drawn_for_this_run(tmp_path: Path) -> None:
    rng = random.Random(RUN_SEED)
    for name in rng.sample([n for n in names() if n != "codeio"], 12):  # (codeio: its own tests below; some entries vary)
        seed, size = rng.randrange(2**31), rng.randint(1, 2)
        rows = dataset_command(tmp_path, name, "--size", str(size), "--seed", str(seed))
        _check_rows(rows, rg().create_dataset(name, size=size, seed=seed), name, {}, seed, size)


CONFIGS = [
    ("leg_counting", ["min_animals=2", "max_animals=4"], {"min_animals": 2, "max_animals": 4}),
    ("basic_arithmetic", ['operators=["+", "*"]', "allow_parentheses=false"], {"operators": ["+", "*"], "allow_parentheses": False}),
    ("complex_arithmetic", ["operations_weights=[0.7, 0.1, 0.1, 0.1]"], {"operations_weights": [0.7, 0.1, 0.1, 0.1]}),
    ("word_sorting", ["transformation=uppercase", "max_words=4"], {"transformation": "uppercase", "max_words": 4}),
    ("time_intervals", ["min_date=2000-01-01", "max_date=2001-12-31", 'task_types=["date"]'],
     {"min_date": "2000-01-01", "max_date": "2001-12-31", "task_types": ["date"]}),
    ("arc_agi", ['board_format_opts={"col_delimiter": ","}', "use_eval=false", "rotations=[]"],
     {"board_format_opts": {"col_delimiter": ","}, "use_eval": False, "rotations": []}),
]  # fmt: skip
"""(dataset, --config as typed, the settings a row keeps: JSON values)."""


def _typed(name: str) -> dict[str, Any]:
    """CONFIGS' settings as reasoning-gym's config classes hold them (a tuple, an enum, dates,
    a dataclass): what a user of reasoning-gym itself passes to create_dataset."""
    from reasoning_gym.algorithmic.word_sorting import TextTransformation
    from reasoning_gym.arc.board_format import BoardFormattingOptions

    return {
        "leg_counting": {"min_animals": 2, "max_animals": 4},
        "basic_arithmetic": {"operators": ("+", "*"), "allow_parentheses": False},
        "complex_arithmetic": {"operations_weights": [0.7, 0.1, 0.1, 0.1]},
        "word_sorting": {"transformation": TextTransformation.UPPERCASE, "max_words": 4},
        "time_intervals": {"min_date": datetime.date(2000, 1, 1), "max_date": datetime.date(2001, 12, 31), "task_types": ["date"]},
        "arc_agi": {"board_format_opts": BoardFormattingOptions(col_delimiter=","), "use_eval": False, "rotations": []},
    }[name]


@pytest.mark.parametrize(("name", "given", "kept"), CONFIGS, ids=[c[0] for c in CONFIGS])
def test_a_config_given_as_text_builds_the_dataset_its_python_values_build(tmp_path: Path, name: str, given: list[str], kept: dict[str, Any]) -> None:
    """JSON has no tuples, enums, dates or dataclasses: the values are made what the config
    class holds, on the command line and when a row is rebuilt alike."""
    rng = random.Random(f"{RUN_SEED}{name}")
    seed, size = rng.randrange(2**31), 2
    rows = dataset_command(tmp_path, name, "--size", str(size), "--seed", str(seed), "--config", *given)
    _check_rows(rows, rg().create_dataset(name, size=size, seed=seed, **_typed(name)), name, kept, seed, size)


def test_a_mix_is_reasoning_gyms_composite_entry_for_entry(tmp_path: Path) -> None:
    from reasoning_gym.composite import CompositeConfig, CompositeDataset, DatasetSpec

    rng = random.Random(RUN_SEED + 1)
    picked = rng.sample([n for n in names() if n != "codeio"], 4)
    weights = {name: rng.randint(1, 5) for name in picked}
    seed, size = rng.randrange(2**31), 12
    mix = [f"{name}:{weights[name]}" for name in picked]
    rows = dataset_command(tmp_path, "--mix", *mix, "--size", str(size), "--seed", str(seed))
    specs = [DatasetSpec(name=name, weight=weights[name], config={}) for name in picked]
    composite = CompositeDataset(CompositeConfig(size=size, seed=seed, datasets=specs))
    assert len(rows) == size
    for index, row in enumerate(rows):
        name = composite[index]["metadata"]["source_dataset"]  # (the part its seeded draw picks)
        entry = generated(composite.datasets[name], index)
        where = (picked, seed, index, f"run seed {RUN_SEED}")
        assert same(entry_of(row["entry"], row.get("entry_types", {})), entry), where
        ref = row["reasoning_gym"]
        part = picked.index(entry["metadata"]["source_dataset"])
        assert ref == {"dataset": picked[part], "config": {}, "seed": seed + part + 1, "size": size, "index": index}, where
        assert same(rebuild_entry(DatasetRef(**ref)), entry), where


def test_a_mix_takes_each_datasets_settings(tmp_path: Path) -> None:
    rows = dataset_command(tmp_path, "--mix", "leg_counting:1", "chain_sum:1", "--config", "leg_counting.max_animals=3", "--size", "8", "--seed", "5")
    legs = [r for r in rows if r["reasoning_gym"]["dataset"] == "leg_counting"]
    assert legs and all(r["reasoning_gym"]["config"] == {"max_animals": 3} and r["entry"]["metadata"]["num_animals"] <= 3 for r in legs)
    assert all(r["reasoning_gym"]["config"] == {} for r in rows if r not in legs)


@pytest.mark.slow  # 10-26 s: on the default Python only (CI's time bound)
def test_workers_write_the_file_one_process_writes(tmp_path: Path) -> None:
    rng = random.Random(RUN_SEED + 4)
    # (a mix names each once; the pool spawns its workers here, gRPC being loaded, so their hash seed is not this process's)
    name, seed = rng.choice([n for n in names() if n != "leg_counting" and n not in HASH_ORDERED]), rng.randrange(2**31)
    for what in ([name], ["--mix", f"{name}:1", "leg_counting:2"]):
        files = []
        for workers in ("1", "3"):
            out = tmp_path / f"w{workers}.jsonl"
            assert main(["dataset", "reasoning-gym", *what, "--size", "7", "--seed", str(seed), "--workers", workers, "-o", str(out)]) == 0
            files.append(out.read_bytes())
        assert files[0] == files[1] and files[0].count(b"\n") == 7, (what, seed, f"run seed {RUN_SEED}")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["w1.jsonl", "w3.jsonl"]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_leaves_no_part_files_or_workers(tmp_path: Path, workers: str) -> None:
    """`timeout` and Kubernetes stop a command with SIGTERM: its finally blocks must run (a
    killed dataset left a 158 MB .part file)."""
    import signal
    import time

    rg()
    out = tmp_path / "c.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "gym_metrics.cli", "dataset", "reasoning-gym", "basic_arithmetic",
                             "--size", "1000000", "--workers", workers, "-o", str(out)], stderr=subprocess.PIPE)  # fmt: skip
    try:
        for _ in range(600):  # bounded: 60 s, until the rows are being written
            if any(p.stat().st_size > 0 for p in tmp_path.glob("c.jsonl.part*")):
                break
            time.sleep(0.1)
        else:
            raise AssertionError("no part file was written")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert list(tmp_path.iterdir()) == []
    assert b"Traceback" not in proc.stderr.read()  # type: ignore[union-attr]


def test_system_prompts(tmp_path: Path) -> None:
    from reasoning_gym.utils import SYSTEM_PROMPTS

    [row] = dataset_command(tmp_path, "leg_counting", "--size", "1", "--system-prompt", "direct", "--agent", "m")
    assert row["responses_create_params"]["input"][0] == {"role": "system", "content": SYSTEM_PROMPTS["direct"]}
    assert row["agent_ref"] == {"name": "m"}
    [row] = dataset_command(tmp_path, "leg_counting", "--size", "1", "--system-prompt", "none")
    assert [m["role"] for m in row["responses_create_params"]["input"]] == ["user"]


def test_list_names_every_dataset(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dataset", "reasoning-gym", "--list"]) == 0
    assert capsys.readouterr().out.split() == names()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["leg_countin"], "unknown reasoning-gym dataset 'leg_countin': NAME: did you mean leg_counting"),
        (["composite"], "NAME: a mix is given with --mix NAME:WEIGHT"),
        (["leg_counting", "--config", "legs=4"], "leg_counting has no setting 'legs': --config.legs: its settings: max_animals,"),
        (["leg_counting", "--config", "seed=4"], "--config.seed: give it as the dataset's own seed / size"),
        (["leg_counting", "--config", "min_animals=0"], "reasoning-gym cannot build 'leg_counting' with this config: --config: AssertionError"),
        (["leg_counting", "--config", "min_animals"], "--config: KEY=VALUE"),
        (["leg_counting", "--mix", "chain_sum:1"], "name one dataset or give --mix"),
        ([], "name one dataset or give --mix"),
        (["--mix", "chain_sum:0"], "--mix: a weight is a finite number > 0"),
        (["--mix", "chain_sum:inf"], "--mix: a weight is a finite number > 0"),  # (an internal error: reasoning-gym's ValueError)
        (["--mix", "chain_sum:1e308", "leg_counting:1e308"], "--mix: give smaller weights"),
        (["--mix", "chain_sum:x"], "--mix: NAME:WEIGHT, the weight a number"),
        (["--mix", "chain_sum:1", "chain_sum:2"], "--mix: each dataset once"),
        (["--mix", "chain_sum:1", "--config", "leg_counting.max_animals=3"], "--config: in a mix, NAME.KEY=VALUE with NAME one of chain_sum"),
        (["leg_counting", "--system-prompt", "shouty"], "unknown system prompt 'shouty': --system-prompt: reasoning-gym's: DeepSeekZero, default,"),
        (["leg_counting", "--agent", " "], "--agent: must be a non-empty agent name"),  # collect refused the rows it wrote
    ],
)
def test_bad_input_is_exit_2_naming_what_to_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    out = tmp_path / "rows.jsonl"
    assert main(["dataset", "reasoning-gym", *args, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1, err
    assert not out.exists() and not list(tmp_path.iterdir())


def test_without_the_extra_every_door_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gym_metrics.ecosystems.reasoning_gym import ReasoningGymMissingError, library
    from gym_metrics_servers.reasoning_gym.app import ReasoningGymServer

    monkeypatch.setitem(sys.modules, "reasoning_gym", None)  # `import reasoning_gym` raises ImportError
    library.cache_clear()
    try:
        with pytest.raises(ReasoningGymMissingError, match=r"pip install 'gym-metrics\[reasoning-gym\]'"):
            ReasoningGymServer()
        for argv in (["dataset", "reasoning-gym", "leg_counting", "-o", str(tmp_path / "r.jsonl")], ["demo", "--reasoning-gym", "--out-dir", str(tmp_path)]):
            assert main(argv) == 2
            assert capsys.readouterr().err == "error: reasoning-gym is not installed: pip install 'gym-metrics[reasoning-gym]'\n"
    finally:
        library.cache_clear()


def test_codeio_rows_are_the_same_each_time(tmp_path: Path) -> None:
    """codeio's entry 0 for seed 712462829 runs a Game of Life on a grid from the global
    `random`: reasoning-gym builds it with a new answer each time; the command seeds that random
    per entry, so its file, its workers' file and the rebuilt entries all agree."""
    import random as global_random

    dataset = rg().create_dataset("codeio", size=3, seed=712462829)
    global_random.seed(RUN_SEED)
    assert len({dataset[0]["answer"] for _ in range(12)}) > 1  # (why the seeding is needed)
    args = ["codeio", "--size", "3", "--seed", "712462829"]
    first, again = dataset_command(tmp_path, *args), dataset_command(tmp_path, *args, "--workers", "2")
    assert first == again
    for index, row in enumerate(first):
        assert same(rebuild_entry(DatasetRef(**row["reasoning_gym"])), entry_of(row["entry"], row.get("entry_types", {})))
        assert same(generated(dataset, index), entry_of(row["entry"], row.get("entry_types", {})))


def test_codeio_rows_drawing_from_numpy_are_the_same_each_time(tmp_path: Path) -> None:
    """codeio's entry 1 for seed 68999733 runs a program drawing from numpy's global generator
    (found by CI: its answer key changed from one build to the next); the command seeds that
    generator per entry too, so two runs agree with each other and with the rebuilt entry."""
    import numpy as np

    dataset = rg().create_dataset("codeio", size=2, seed=68999733)
    answers = set()
    for k in range(6):
        np.random.seed(k)
        answers.add(generated_without_numpy(dataset, 1)["answer"])
    assert len(answers) > 1  # (why numpy's generator is seeded)
    args = ["codeio", "--size", "2", "--seed", "68999733"]
    first, again = dataset_command(tmp_path, *args), dataset_command(tmp_path, *args)
    assert first == again
    for index, row in enumerate(first):
        entry = entry_of(row["entry"], row.get("entry_types", {}))
        assert same(rebuild_entry(DatasetRef(**row["reasoning_gym"])), entry) and same(generated(dataset, index), entry)


def generated_without_numpy(dataset: Any, index: int) -> dict[str, Any]:
    """The entry with only Python's `random` seeded (numpy's generator as it is)."""
    state = random.getstate()
    random.seed(dataset.seed + index)
    try:
        return dict(dataset[index])
    finally:
        random.setstate(state)


def test_set_ordered_datasets_give_the_same_file_under_one_hash_seed(tmp_path: Path) -> None:
    """ransom_note draws letters from a set of strings, so its entries follow the interpreter's
    string hashing, in reasoning-gym as here (docs/environments.md): under one PYTHONHASHSEED two
    runs of the command write the same file, and another seed gives other rows."""
    rg()

    def run(hash_seed: str, name: str) -> bytes:
        out = tmp_path / name
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        cmd = [sys.executable, "-m", "gym_metrics.cli", "dataset", "reasoning-gym", "ransom_note", "--size", "20", "--seed", "7", "-o", str(out)]
        subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=120)
        return out.read_bytes()

    first = run("0", "a.jsonl")
    assert run("0", "b.jsonl") == first
    assert run("1", "c.jsonl") != first
