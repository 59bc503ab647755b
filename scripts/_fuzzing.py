"""What the differential fuzzers against NeMo Gym 0.7.0 share: drawing odd values, and having
NeMo Gym answer a batch of inputs in its own venv (one subprocess: its import takes seconds)."""

from __future__ import annotations

import json
import random
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parent
_NEMO = (
    "import importlib, json, sys\n"
    "sys.path.insert(0, sys.argv[1])\n"
    "answer = getattr(importlib.import_module(sys.argv[2]), sys.argv[3])\n"
    "for line in open(sys.argv[4], encoding='utf-8'):\n"
    "    print(json.dumps(answer(json.loads(line))))\n"
)


def odd(rng: random.Random, usual: Any, values: Sequence[Any], p: float) -> Any:
    """`usual` mostly, else one of `values` (odd ones of any JSON type)."""
    return rng.choice(values) if rng.random() < p else usual


def maybe(rng: random.Random, into: dict[str, Any], key: str, value: Any, p: float = 0.5) -> None:
    """`into[key] = value` with probability `p`."""
    if rng.random() < p:
        into[key] = value


def nemo_answers(nemo_python: str, module: str, function: str, inputs: Sequence[Any]) -> list[Any]:
    """`module.function(input)` of scripts/`module`.py for each input, run by `nemo_python` (a
    nemo-gym 0.7.0 venv's), each input and answer through JSON text."""
    with tempfile.TemporaryDirectory() as tmp:
        given = Path(tmp) / "inputs.jsonl"
        given.write_text("".join(json.dumps(i) + "\n" for i in inputs), encoding="utf-8")
        made = subprocess.run([nemo_python, "-c", _NEMO, str(SCRIPTS), module, function, str(given)], capture_output=True, text=True, check=True)
    answers = [json.loads(line) for line in made.stdout.splitlines()]
    assert len(answers) == len(inputs), made.stderr[-2000:]
    return answers
