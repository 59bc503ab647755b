"""A job server killed mid-job (SIGKILL, a subprocess) and a new executor on the same
database: the job finishes, each row is stored once, and the counting endpoint shows that no
finished row was scored again (only rows in flight at the kill, at most `parallelism`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from gym_metrics.jobs import JobExecutor, JobState, JobStore, parse_spec

from _jobs_helpers import CountingEndpoint, remote_config

CHILD = textwrap.dedent("""
    import asyncio, sys
    from gym_metrics.jobs import JobExecutor, JobStore

    async def main() -> None:
        executor = JobExecutor(JobStore(sys.argv[1]), flush_seconds=0)
        await executor.start()
        await asyncio.sleep(3600)  # killed long before

    asyncio.run(main())
""")

ROWS, PARALLELISM = 60, 4


async def test_a_killed_job_resumes_and_scores_only_unfinished_rows(tmp_path: Path) -> None:
    db = tmp_path / "jobs.sqlite"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    with CountingEndpoint(delay=0.05) as endpoint:
        store = JobStore(db)
        spec = parse_spec({"scorer": "remote", "scorer_config": remote_config(endpoint.url),
                           "dataset": {"rows": [{"id": i} for i in range(ROWS)]}, "run": {"parallelism": PARALLELISM}})  # fmt: skip
        job = store.create(spec).id
        child = subprocess.Popen([sys.executable, str(script), str(db)], env={**os.environ, "PYTHONPATH": os.getcwd()})
        try:
            for _ in range(600):  # bounded: until a third of the rows are stored
                if store.get(job).done >= ROWS // 3:
                    break
                assert child.poll() is None, "the job server died on its own"
                time.sleep(0.02)
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
        killed_at = store.get(job)
        assert killed_at.state is JobState.RUNNING and ROWS // 3 <= killed_at.done < ROWS
        calls_before = sum(endpoint.calls.values())

        executor = JobExecutor(store, flush_seconds=0)
        await executor.start()
        try:
            record = await executor.wait(job, timeout=120)
        finally:
            await executor.aclose()
    assert record.state is JobState.SUCCEEDED and record.done == record.total == ROWS
    assert store.stored_indices(job) == set(range(ROWS))
    repeated = [i for i, n in endpoint.calls.items() if n > 1]
    assert len(repeated) <= PARALLELISM, f"rows scored twice: {repeated}"
    assert set(endpoint.calls) == set(range(ROWS))
    assert sum(endpoint.calls.values()) - calls_before <= ROWS - killed_at.done + PARALLELISM
