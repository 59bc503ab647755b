"""An output that is an input is refused (issue 23 item 9): `aggregate X -o X`, `aggregate X
--partial-out X`, `merge P Q -o Q` and `collect --input X --output X` exit 2 before reading or
writing anything, with one line naming both paths, and the input keeps its bytes; the same
file is found through the same path, another relative spelling, a symlink and a hard link."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from gym_metrics import cli


def rollouts(path: Path) -> Path:
    rows = [{"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": float((t + r) % 2)}
            for t in range(5) for r in range(2)]  # fmt: skip
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


# (id, the output's spelling given the input's absolute path): all name the input itself
SPELLINGS: list[tuple[str, Callable[[Path], Path]]] = [
    ("same-path", lambda p: p),
    ("relative", lambda p: Path(os.path.relpath(p))),
    ("dotted", lambda p: p.parent / ".." / p.parent.name / p.name),
    ("symlink", lambda p: _link(p, os.symlink)),
    ("hard-link", lambda p: _link(p, os.link)),
]


def _link(path: Path, make: Callable[[Path, Path], None]) -> Path:
    link = path.with_name(f"link-{make.__name__}-{path.name}")
    make(path, link)
    return link


def refused(argv: list[str], out: Path, source: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`argv` exits 2 with one line naming both paths, and leaves `source` and its directory as they were."""
    before, listing = source.read_bytes(), sorted(os.listdir(source.parent))
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f" {out} is the input {source}:" in err, err
    assert source.read_bytes() == before and sorted(os.listdir(source.parent)) == listing


@pytest.mark.parametrize(("spelling", "spell"), SPELLINGS, ids=[s[0] for s in SPELLINGS])
def test_aggregate_refuses_to_write_over_its_rollouts(
    spelling: str, spell: Callable[[Path], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    src = rollouts(tmp_path / "X.jsonl")
    out = spell(src)
    refused(["aggregate", str(src), "-o", str(out)], out, src, capsys)
    refused(["aggregate", str(src), "--partial-out", str(out)], out, src, capsys)
    other = rollouts(tmp_path / "Y.jsonl")
    refused(["aggregate", str(other), str(src), "-o", str(out)], out, src, capsys)  # any of several inputs


@pytest.mark.parametrize(("spelling", "spell"), SPELLINGS, ids=[s[0] for s in SPELLINGS])
def test_merge_refuses_to_write_over_a_partial(
    spelling: str, spell: Callable[[Path], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    src = rollouts(tmp_path / "X.jsonl")
    for name in ("P", "Q"):
        assert cli.main(["aggregate", str(src), "--partial-out", str(tmp_path / f"{name}.parquet"), "-q"]) == 0
    capsys.readouterr()
    out = spell(tmp_path / "Q.parquet")
    refused(["merge", str(tmp_path / "P.parquet"), str(tmp_path / "Q.parquet"), "-o", str(out)], out, tmp_path / "Q.parquet", capsys)
    assert cli.main(["merge", str(tmp_path / "P.parquet"), "-o", str(tmp_path / "Q_aggregate_metrics.json"), "-q"]) == 0


@pytest.mark.parametrize(("spelling", "spell"), SPELLINGS, ids=[s[0] for s in SPELLINGS])
@pytest.mark.parametrize("resume", [False, True])
def test_collect_refuses_to_write_over_its_input(
    spelling: str, spell: Callable[[Path], Path], resume: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Refused before any connection (no server listens on port 9), --resume or not."""
    monkeypatch.chdir(tmp_path)
    src = rollouts(tmp_path / "X.jsonl")
    out = spell(src)
    argv = ["collect", "--server", "127.0.0.1:9", "--connect-timeout", "0.5", "--input", str(src), "--output", str(out)]
    refused(argv + (["--resume"] if resume else []), out, src, capsys)


def test_an_output_beside_the_input_is_written(tmp_path: Path) -> None:
    """Only the same file is refused: a name sharing the input's stem is fine."""
    src = rollouts(tmp_path / "X.jsonl")
    assert cli.main(["aggregate", str(src), "-o", str(tmp_path / "X.json"), "-q"]) == 0
    assert cli.main(["aggregate", str(src), "--partial-out", str(tmp_path / "X.parquet"), "-q"]) == 0
    assert (tmp_path / "X.json").exists() and (tmp_path / "X.parquet").exists()
