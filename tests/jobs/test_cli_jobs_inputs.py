"""`gym-metrics jobs submit|list|status` in process (cli.main) against a real job server on
127.0.0.1:0: a bad --target-config or --prompt-template file is refused before any connection,
naming the file; `list` follows every page; `status` of a failed job prints its error."""

from __future__ import annotations

from pathlib import Path

import pytest

from gym_metrics.cli import main
from gym_metrics.jobs import JobState, JobStore, parse_spec

from _jobs_helpers import tool_row
from _service_helpers import JobServerThread

UNREACHABLE = "127.0.0.1:1"  # nothing listens: each refusal below happens before connecting


def submit(rows: Path, *flags: str) -> list[str]:
    return ["jobs", "submit", "--server", UNREACHABLE, "--scorer", "tool_call_accuracy", "--input", str(rows), *flags]


@pytest.mark.parametrize(
    ("content", "flags", "said"),
    [
        (None, ("--target-config", "{f}"), "cannot read the target config: {f}: No such file or directory"),
        ("{oops", ("--target-config", "{f}"), "{f}: not valid JSON: "),
        ("[1, 2]", ("--target-config", "{f}"), "{f}: the target config must be a JSON object, got list"),
        (None, ("--target-config", "{t}", "--prompt-template", "{f}"), "cannot read the prompt template: {f}: No such file or directory"),
        ('"hi"', ("--target-config", "{t}", "--prompt-template", "{f}"), "{f}: the prompt template must be a JSON object, got str"),
        ("{}", ("--prompt-template", "{f}"), "--prompt-template goes with --target-config: it builds the request sent to the target"),
    ],
)
def test_a_bad_target_or_template_file_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, flags: tuple[str, ...], said: str
) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": 1}\n')
    target = tmp_path / "target.json"
    target.write_text('{"type": "model", "url": "http://127.0.0.1:9/v1", "model": "m"}')
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    names = {"f": str(bad), "t": str(target)}
    assert main(submit(rows, *(flag.format(**names) for flag in flags))) == 2
    err = capsys.readouterr().err
    assert f"error: {said.format(**names)}" in err and "Traceback" not in err
    assert "cannot reach the job server" not in err  # refused before any connection


def test_list_follows_every_page_and_status_prints_a_failed_jobs_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "jobs.sqlite"
    store = JobStore(db)
    spec = {"scorer": "tool_call_accuracy", "dataset": {"rows": [tool_row(0)]}}
    ids = [store.create(parse_spec(spec)).id for _ in range(103)]  # more than one page (the client asks for 100)
    failed = ids[0]
    store.set_state(failed, JobState.FAILED, error="the dataset changed since the job was queued")
    store.close()
    with JobServerThread(db, max_jobs=8) as server:
        assert main(["jobs", "list", "--server", server.address]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert [line.split()[0] for line in lines[2:]] == ids  # a header and its rule, then every job in order
        assert main(["jobs", "status", failed, "--server", server.address]) == 0
    assert capsys.readouterr().out == f"{failed} FAILED 0/1 rows, 0 failed, 0.0 rows/s\nerror: the dataset changed since the job was queued\n"
