"""Prepare demo_agent's data as NeMo Gym's benchmarks' prepare scripts do (its rows written as
they are committed): `prepare()` writes the benchmark's jsonl_fpath and returns its path."""

from pathlib import Path

OUTPUT_FPATH = Path(__file__).parent / "data" / "demo_agent_benchmark.jsonl"
LINES = [
    '{"question": "What is 2+2?", "expected": "4"}',
    '{"question": "Name a primary colour.", "expected": "red"}',
    '{"question": "Capital of France?", "expected": "Paris", "probe": "no_such_tool"}',
    '{"question": "What is 3+3?", "expected": "6", "fail": true}',
]


def prepare() -> Path:
    OUTPUT_FPATH.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT_FPATH.write_text("".join(line + "\n" for line in LINES))
    return OUTPUT_FPATH
