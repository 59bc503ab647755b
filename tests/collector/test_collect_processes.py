"""`gym-metrics collect --processes N` (issue 42 item 1) as a user runs it: a real `serve
math_exact` subprocess, a ScriptedPolicyServer in this process, the collector a subprocess
whose shards are subprocesses of their own. One process's run is the reference: with N
processes the metrics file is byte for byte its, and the rollouts file holds its lines, sorted
by (task, rollout, agent); also when a shard is SIGKILLed mid-run (started again, it resumes its
file), when the whole run is SIGKILLed and resumed with --resume, and when a one-process run's
output is resumed by N processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from test_collect_generate_kill import TOTAL, answer, collect_args, math_port, write_rollouts  # noqa: F401  (math_port: a fixture)
from test_collector_faults import Procs, line_count, metrics_of, wait_for_lines

from gym_metrics.testing import ScriptedPolicyServer

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]


def sorted_lines(out: Path) -> list[bytes]:
    """The file's lines in (task, rollout, agent) order: one process writes them as they complete."""

    def key(line: bytes) -> tuple[int, int, str]:
        row = json.loads(line)
        return row["_ng_task_index"], row["_ng_rollout_index"], row["agent_ref"]["name"]

    return sorted(out.read_bytes().splitlines(keepends=True), key=key)


@pytest.fixture(scope="module")
def reference(math_port: int, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:  # noqa: F811
    """One process's run of the rollouts: (its rollouts file, its input)."""
    folder = tmp_path_factory.mktemp("one")
    src = write_rollouts(folder / "in.jsonl")
    with ScriptedPolicyServer(answer) as policy:
        done = subprocess.run(collect_args(math_port, policy, "chat", src, folder / "out.jsonl"), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return folder / "out.jsonl", src


def assert_same_as(reference: Path, out: Path) -> None:
    assert metrics_of(out).read_bytes() == metrics_of(reference).read_bytes()
    assert out.read_bytes().splitlines(keepends=True) == sorted_lines(reference)
    assert not out.with_name(f".{out.name}.shards").exists()


def shard_pids(out: Path) -> dict[str, int]:
    """The live shard processes of the run writing `out`, by their --shard: matched by the
    output's whole folder (a test's own), as other tests run shards beside it under xdist, and
    a test that took theirs for its own signalled them and waited on them."""
    found, mine = {}, str(out.parent).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--shard" in argv and any(a.startswith(mine + b"/") for a in argv):
            found[argv[argv.index(b"--shard") + 1].decode()] = int(entry.name)
    return found


def wait_until(check: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_n_processes_write_one_processs_lines_in_key_order_and_its_metrics(math_port: int, reference: tuple[Path, Path], tmp_path: Path) -> None:  # noqa: F811
    ref, src = reference
    for processes in ("2", "3"):
        out = tmp_path / f"p{processes}" / "out.jsonl"
        out.parent.mkdir()
        with ScriptedPolicyServer(answer) as policy:
            done = subprocess.run(collect_args(math_port, policy, "chat", src, out, "--processes", processes), capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stdout + done.stderr
            assert sum(policy.calls.values()) == TOTAL  # every rollout generated once, by one shard
        assert f"{TOTAL} generated (0 generations failed)" in done.stdout
        assert_same_as(ref, out)


def test_a_killed_shard_is_started_again_and_resumes_its_file(math_port: int, reference: tuple[Path, Path], tmp_path: Path) -> None:  # noqa: F811
    ref, src = reference
    out = tmp_path / "out.jsonl"
    procs = Procs()
    try:
        with ScriptedPolicyServer(answer, delay_s=0.02) as policy:
            run = procs.start(collect_args(math_port, policy, "chat", src, out, "--processes", "2"), tmp_path / "run.log", tmp_path)
            shard = out.with_name(f".{out.name}.shards") / "0-of-2.jsonl"
            wait_until(lambda: shard.exists() and line_count(shard) >= 10)
            victim = shard_pids(out)["0/2"]
            os.kill(victim, signal.SIGKILL)
            assert run.wait(timeout=120) == 0, (tmp_path / "run.log").read_text()
            asked_again = {k for k, n in policy.calls.items() if n > 1}
        log = (tmp_path / "run.log").read_text()
        assert "shard 1 of 2 stopped (exit -9); starting it again (it resumes its file)" in log
        assert len(asked_again) <= 4 * 2  # at most what was in flight when it died is asked again
        assert_same_as(ref, out)
    finally:
        procs.kill_all()


def test_a_shard_sigtermed_alone_stops_the_run_as_an_interrupt_and_resumes(math_port: int, reference: tuple[Path, Path], tmp_path: Path) -> None:  # noqa: F811
    """A shard stopped by SIGTERM (exit 143) was asked to stop, not crashed: the run stops at
    once as interrupted (130), the other shard with it, not started again; --resume finishes."""
    ref, src = reference
    out = tmp_path / "out.jsonl"
    procs = Procs()
    try:
        with ScriptedPolicyServer(answer, delay_s=0.05) as policy:
            run = procs.start(collect_args(math_port, policy, "chat", src, out, "--processes", "2"), tmp_path / "run.log", tmp_path)
            shard = out.with_name(f".{out.name}.shards") / "0-of-2.jsonl"
            wait_until(lambda: shard.exists() and line_count(shard) >= 10 and len(shard_pids(out)) == 2)
            os.kill(shard_pids(out)["0/2"], signal.SIGTERM)
            stops_then_resumes(run, 130, collect_args(math_port, policy, "chat", src, out, "--processes", "2", "--resume"), tmp_path)
        assert_same_as(ref, out)
    finally:
        procs.kill_all()


def test_a_killed_run_resumes_and_a_one_process_output_is_taken_up(math_port: int, reference: tuple[Path, Path], tmp_path: Path) -> None:  # noqa: F811
    ref, src = reference
    procs = Procs()
    try:
        with ScriptedPolicyServer(answer, delay_s=0.02) as policy:
            # the parent SIGKILLed: its shards die with it (none writes on behind the resume)
            out = tmp_path / "killed" / "out.jsonl"
            out.parent.mkdir()
            run = procs.start(collect_args(math_port, policy, "chat", src, out, "--processes", "2"), tmp_path / "killed.log", tmp_path)
            folder = out.with_name(f".{out.name}.shards")
            wait_until(lambda: sum(line_count(p) for p in folder.glob("*.jsonl")) >= TOTAL // 4 if folder.exists() else False)
            run.send_signal(signal.SIGKILL)
            run.wait(timeout=10)
            wait_until(lambda: not shard_pids(out), timeout=10)
            assert not out.exists() and not metrics_of(out).exists()  # never a short file
            resumed = subprocess.run(collect_args(math_port, policy, "chat", src, out, "--processes", "2", "--resume"),
                                     capture_output=True, text=True, timeout=120)  # fmt: skip
            assert resumed.returncode == 0, resumed.stdout + resumed.stderr
            assert_same_as(ref, out)

            # one process killed mid-run, its output resumed by three
            one = tmp_path / "one" / "out.jsonl"
            one.parent.mkdir()
            single = procs.start(collect_args(math_port, policy, "chat", src, one), tmp_path / "one.log", tmp_path)
            wait_for_lines(single, one, TOTAL // 3)
            single.send_signal(signal.SIGKILL)
            single.wait(timeout=10)
            had = line_count(one)
            taken = subprocess.run(collect_args(math_port, policy, "chat", src, one, "--processes", "3", "--resume"),
                                   capture_output=True, text=True, timeout=120)  # fmt: skip
            assert taken.returncode == 0, taken.stdout + taken.stderr
            assert f"rows of {one} handed to their shards" in taken.stderr and had > 0
            assert_same_as(ref, one)
    finally:
        procs.kill_all()


def test_a_second_collect_on_an_output_in_use_is_refused_whatever_its_kind(math_port: int, reference: tuple[Path, Path], tmp_path: Path) -> None:  # noqa: F811
    """A one-process collect took no lock and a --processes one only once its shards started:
    a second run on the same output ran too, both exited 0, and one's rows were replaced."""
    ref, src = reference
    procs = Procs()
    try:
        with ScriptedPolicyServer(answer, delay_s=0.2) as policy:  # the first run lasts a few seconds
            for kind in ((), ("--processes", "2")):
                policy.delay_s = 0.2
                out = tmp_path / f"out{len(kind)}" / "out.jsonl"
                out.parent.mkdir()
                first = procs.start(collect_args(math_port, policy, "chat", src, out, *kind), tmp_path / f"first{len(kind)}.log", tmp_path)
                wait_until(lambda: out.parent.joinpath(f".{out.name}.lock").exists())
                for second in (("--resume",), ("--processes", "2", "--resume")):  # (without --resume a non-empty output is refused anyway)
                    refused = subprocess.run(collect_args(math_port, policy, "chat", src, out, *second), capture_output=True, text=True, timeout=60)
                    assert refused.returncode == 2 and f"another collect is running on {out}" in refused.stderr, (kind, second, refused.stderr)
                policy.delay_s = 0.0  # both refused while it ran: the rest of the first run at full speed
                assert first.wait(timeout=120) == 0
                keys = [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in map(json.loads, out.read_bytes().splitlines())]
                assert len(keys) == len(set(keys)) == len(ref.read_bytes().splitlines())  # the first run's rows, whole
    finally:
        procs.kill_all()


def test_an_output_through_a_symlink_and_a_row_resume_cannot_take_up(math_port: int, reference: tuple[Path, Path], tmp_path: Path) -> None:  # noqa: F811
    """The merge replaced an --output symlink with a file of its own (its target never got the
    rows); a left output's row without its index was an internal KeyError."""
    ref, src = reference
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "out.jsonl"
    link.symlink_to(elsewhere / "real.jsonl")
    with ScriptedPolicyServer(answer) as policy:
        done = subprocess.run(collect_args(math_port, policy, "chat", src, link, "--processes", "2"), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert link.is_symlink() and sorted_lines(elsewhere / "real.jsonl") == sorted_lines(ref)
        bad = tmp_path / "bad" / "out.jsonl"
        bad.parent.mkdir()
        bad.write_text('{"reward": 1.0, "agent_ref": {"name": "x"}}\n')
        refused = subprocess.run(collect_args(math_port, policy, "chat", src, bad, "--processes", "2", "--resume"), capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "a line --resume cannot take up" in refused.stderr and "line 1: _ng_task_index: missing" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr and "internal error" not in refused.stderr


@pytest.mark.parametrize("terminal", [False, True])
def test_a_one_process_outputs_failures_sidecar_is_taken_up_as_one_process_takes_it_up(
    math_port: int, reference: tuple[Path, Path], tmp_path: Path, terminal: bool  # noqa: F811
) -> None:
    """The sidecar's rollouts (attempted, their judge failed) are run again by the shards as by
    one process's --resume (NeMo Gym's rule: `_ng_attempt_index` 1; a terminal one not), and
    every failed attempt is written back, in key order."""
    ref, src = reference
    lines = ref.read_bytes().splitlines(keepends=True)
    failed = lines[1::5]
    mark = {"_ng_failure_class": "judge_failed", "_ng_failure_terminal": terminal}
    outs = {}
    for processes in ("1", "2"):
        out = tmp_path / processes / "out.jsonl"
        out.parent.mkdir()
        out.write_bytes(b"".join(line for line in lines if line not in failed))
        (tmp_path / processes / "out_failures.jsonl").write_bytes(b"".join(orjson.dumps({**orjson.loads(line), **mark}) + b"\n" for line in failed))
        with ScriptedPolicyServer(answer) as policy:
            done = subprocess.run(collect_args(math_port, policy, "chat", src, out, "--processes", processes, "--resume"), capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stdout + done.stderr
            assert sum(policy.calls.values()) == (0 if terminal else len(failed))
        outs[processes] = sorted_lines(out), (tmp_path / processes / "out_failures.jsonl").read_bytes()
    assert outs["1"][0] == outs["2"][0]
    assert outs["2"][1] == b"".join(sorted_lines(tmp_path / "2" / "out_failures.jsonl"))  # written back, in key order
    assert sorted(outs["1"][1].splitlines()) == sorted(outs["2"][1].splitlines())
    again = [orjson.loads(line) for line in outs["2"][0] if b"_ng_attempt_index" in line]
    assert len(again) == (0 if terminal else len(failed)) and all(row["_ng_attempt_index"] == 1 for row in again)


def test_lines_skipped_by_the_shards_are_listed_as_one_process_lists_them(math_port: int, reference: tuple[Path, Path], tmp_path: Path) -> None:  # noqa: F811
    """With --processes the shards' warnings went to their logs, which the merge removes: only
    the count was said."""
    _, src = reference
    bad_src = tmp_path / "bad.jsonl"
    lines = src.read_bytes().splitlines()
    bad_src.write_bytes(b"\n".join([*lines[:3], b"{not json", *lines[3:], b"[1, 2]"]) + b"\n")
    said = {}
    with ScriptedPolicyServer(answer) as policy:
        for kind in ((), ("--processes", "2")):
            out = tmp_path / f"out{len(kind)}.jsonl"
            done = subprocess.run(collect_args(math_port, policy, "chat", bad_src, out, "--on-bad-line", "skip", *kind), capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
            said[len(kind)] = sorted(line for line in done.stderr.splitlines() if line.startswith("warning: skipped"))
    assert said[0] == said[2] and len(said[0]) == 2 and any(f"{bad_src}:line 4: json: not valid JSON" in line for line in said[0])


def test_what_processes_refuse(math_port: int, reference: tuple[Path, Path], tmp_path: Path) -> None:  # noqa: F811
    _, src = reference
    out = tmp_path / "out.jsonl"
    out.with_name(f".{out.name}.shards").mkdir()
    with ScriptedPolicyServer(answer) as policy:
        left = subprocess.run(collect_args(math_port, policy, "chat", src, out, "--processes", "2"), capture_output=True, text=True, timeout=60)
        assert left.returncode != 0 and "holds the shards of a run that did not finish: pass --resume" in left.stderr
        again = subprocess.run(collect_args(math_port, policy, "chat", src, out, "--processes", "2", "--reverify-failed"),
                               capture_output=True, text=True, timeout=60)  # fmt: skip
        assert again.returncode == 2 and "--reverify-failed runs in one process" in again.stderr


def stops_then_resumes(run: Any, code: int, resume: list[str], tmp_path: Path, since: float | None = None) -> None:
    """The stopped run exits `code` (within 15 s of `since`), no shard started again or left,
    no metrics file; then `resume` (the same command with --resume) finishes it."""
    got = run.wait(timeout=60)
    took = 0.0 if since is None else time.monotonic() - since
    log = (tmp_path / "run.log").read_text()
    assert got == code and "starting it again" not in log and took < 15, (took, log)
    out = Path(resume[resume.index("--output") + 1])
    wait_until(lambda: not shard_pids(out), timeout=10)
    assert not metrics_of(out).exists()
    resumed = subprocess.run(resume, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_an_interrupted_run_stops_its_shards_at_once_and_resumes(math_port: int, reference: tuple[Path, Path], tmp_path: Path, how: str) -> None:  # noqa: F811
    """Ctrl-C reaches the whole process group: a shard that exits 130 was taken for a crash and
    started again, and the run went on; SIGTERM to the parent alone waited for the shards to
    finish. Both now stop the run within seconds (exit 130 / 143), its rows kept for --resume."""
    ref, src = reference
    procs = Procs()
    try:
        with ScriptedPolicyServer(answer, delay_s=0.05) as policy:
            out = tmp_path / "out.jsonl"
            run = procs.start(collect_args(math_port, policy, "chat", src, out, "--processes", "2"), tmp_path / "run.log", tmp_path, own_group=True)
            folder = out.with_name(f".{out.name}.shards")
            wait_until(lambda: sum(line_count(p) for p in folder.glob("*.jsonl")) >= 10 and len(shard_pids(out)) == 2 if folder.exists() else False)
            stopped = time.monotonic()
            if how == "ctrl-c":  # a terminal sends it to the foreground group: the run and its shards at once
                os.killpg(run.pid, signal.SIGINT)
            else:
                run.send_signal(signal.SIGTERM)
            stops_then_resumes(run, 130 if how == "ctrl-c" else 143, collect_args(math_port, policy, "chat", src, out, "--processes", "2", "--resume"),
                               tmp_path, since=stopped)  # fmt: skip
            assert_same_as(ref, out)
    finally:
        procs.kill_all()


def test_a_left_shards_folder_is_resumed_with_its_own_count_only(math_port: int, reference: tuple[Path, Path], tmp_path: Path) -> None:  # noqa: F811
    """Resumed with another --processes count, or none, the shards' rows were collected again
    (and the folder left behind): refused, naming the count to resume with."""
    ref, src = reference
    out = tmp_path / "out.jsonl"
    folder = out.with_name(f".{out.name}.shards")
    folder.mkdir()
    rows = ref.read_bytes().splitlines(keepends=True)
    (folder / "0-of-2.jsonl").write_bytes(b"".join(r for r in rows if json.loads(r)["_ng_task_index"] % 2 == 0)[:2000].rsplit(b"\n", 1)[0] + b"\n")
    (folder / "1-of-2.jsonl").write_bytes(b"")
    with ScriptedPolicyServer(answer) as policy:
        for more in ([], ["--processes", "3"]):
            done = subprocess.run(collect_args(math_port, policy, "chat", src, out, "--resume", *more), capture_output=True, text=True, timeout=120)
            assert done.returncode == 2 and "holds the shards of a --processes 2 run: resume it with --processes 2" in done.stderr, done.stderr
        assert sum(policy.calls.values()) == 0
        done = subprocess.run(collect_args(math_port, policy, "chat", src, out, "--resume", "--processes", "2"), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    assert_same_as(ref, out)


def test_a_resume_by_processes_checks_the_input_as_one_process_does(math_port: int, tmp_path: Path) -> None:  # noqa: F811
    """The lines each task was made from (`.out.jsonl.tasks`) were not handed to the shards nor
    written by their merge: a resume with a line inserted before the others gave the output's
    rows to other lines, exit 0, with --processes on either side."""
    from gym_metrics import resolve_server

    sample = resolve_server("math_exact")().sample
    assert sample is not None
    rows = [json.loads(line) for line in Path(sample).read_text().splitlines()[:24]]
    for row in rows:
        del row["_ng_task_index"], row["_ng_rollout_index"]
    src, moved = tmp_path / "in.jsonl", tmp_path / "moved.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    moved.write_text(json.dumps(rows[-1]) + "\n" + src.read_text())  # one line inserted first

    def collect(inp: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        args = ["collect", "--server", f"127.0.0.1:{math_port}", "--input", str(inp), "--output", str(out), "--num-repeats", "2", *extra]
        return subprocess.run([sys.executable, "-m", "gym_metrics.cli", *args], capture_output=True, text=True, timeout=120)

    outs = {}
    for name, extra in (("one", ()), ("two", ("--processes", "2"))):
        out = tmp_path / name / "out.jsonl"
        out.parent.mkdir()
        assert collect(src, out, *extra).returncode == 0
        outs[name] = out
    lines = {name: out.with_name(f".{out.name}.tasks").read_bytes() for name, out in outs.items()}
    assert lines["one"] == lines["two"] and len(lines["one"]) == 16 * 24  # the merge writes one process's lineage

    for name, out in outs.items():  # each output cut short, then resumed the other way from the moved input
        out.write_bytes(b"".join(out.read_bytes().splitlines(keepends=True)[:10]))
        metrics_of(out).unlink()
        resumed = collect(moved, out, "--resume", *(("--processes", "2") if name == "one" else ()))
        assert resumed.returncode == 2, resumed.stdout + resumed.stderr
        assert "is not the input the output being resumed was made from" in resumed.stderr
