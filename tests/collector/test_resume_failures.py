"""A resumed collect attempts each rollout once, as a run never cut does: the rollouts in the
failures sidecar (a verify that named a failure class) are done, not attempted again and
appended again (an interrupted run's sidecar grew by every failure before the cut, and
`--reverify-failed` then refused it: rollouts given twice)."""

from __future__ import annotations

from pathlib import Path

from gym_metrics import cli

from _flaky_judge import FlakyJudge, flaky_rows as rows
from _transport_helpers import server_in_thread


def test_resume_counts_the_sidecars_rollouts_as_done(tmp_path: Path) -> None:
    whole, first = tmp_path / "in.jsonl", tmp_path / "first.jsonl"
    whole.write_text("\n".join(rows(40)) + "\n")
    first.write_text("\n".join(rows(40)[:17]) + "\n")  # what a run cut after 17 rows wrote
    with server_in_thread(FlakyJudge()) as address:
        assert cli.main(["collect", "--server", address, "--input", str(whole), "--output", str(tmp_path / "clean.jsonl")]) == 0
        assert cli.main(["collect", "--server", address, "--input", str(first), "--output", str(tmp_path / "cut.jsonl")]) == 0
        assert cli.main(["collect", "--server", address, "--input", str(whole), "--output", str(tmp_path / "cut.jsonl"), "--resume"]) == 0
        for stem in ("clean", "cut"):
            assert sorted((tmp_path / f"{stem}_failures.jsonl").read_text().splitlines()) == sorted(
                (tmp_path / "clean_failures.jsonl").read_text().splitlines()
            )
            assert len((tmp_path / f"{stem}_failures.jsonl").read_text().splitlines()) == 10
        assert (tmp_path / "cut_aggregate_metrics.json").read_bytes() == (tmp_path / "clean_aggregate_metrics.json").read_bytes()
        again = ["collect", "--server", address, "--output", str(tmp_path / "cut.jsonl"), "--reverify-failed"]
        assert cli.main(again) == 0  # they failed again (the judge is still down): each once in the sidecar
    assert len((tmp_path / "cut_failures.jsonl").read_text().splitlines()) == 10
