"""Prepare demo_eval's data as NeMo Gym's benchmarks' prepare scripts do (theirs download from
Hugging Face; this one writes its rows as they are committed, spacing and key order included,
which the conformance cases use): `prepare()` writes the benchmark's jsonl_fpath and returns
its path."""

from pathlib import Path

OUTPUT_FPATH = Path(__file__).parent / "data" / "demo_eval_benchmark.jsonl"
LINES = [
    '{"question": "What is 2+2?", "expected": "4"}',
    '{"question": "Name a primary colour.", "expected": "red"}',
    '{"question": "What is 2+2?", "expected": "4"}',
    '{"expected": "4", "question": "What is 2+2?"}',
    '{"question":"What is 2+2?","expected":"4"}',
    '{"question": "Capital of France?", "expected": "Paris", "agent_ref": {"name": "legacy_agent"}}',
    '{"question": "Capital of France?", "expected": "Paris"}',
]


def prepare() -> Path:
    OUTPUT_FPATH.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT_FPATH.write_text("".join(line + "\n" for line in LINES))
    print(f"Wrote {len(LINES)} rows to {OUTPUT_FPATH}")
    return OUTPUT_FPATH
