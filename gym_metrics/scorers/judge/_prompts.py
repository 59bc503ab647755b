"""The shape of a JSON-answer judge prompt: task, answer format, one worked example, the input.

Same recipe as RAGAS's prompts (instruction, output format, a few-shot example, then the
input), in our own words and examples.
"""

from __future__ import annotations

import json
from collections.abc import Mapping


def sections(fields: Mapping[str, str]) -> str:
    """Named input sections: `### Name` then the text."""
    return "\n\n".join(f"### {name}\n{text}" for name, text in fields.items())


def json_prompt(
    task: str,
    answer_format: str,
    example_input: Mapping[str, str],
    example_output: object,
    real_input: Mapping[str, str],
) -> str:
    """A complete prompt asking for one JSON object."""
    return (
        f"{task}\n\n"
        f"Reply with one JSON object and nothing else (double-quoted strings, no comments):\n{answer_format}\n\n"
        "=== Worked example ===\n"
        f"{sections(example_input)}\n\n"
        f"Answer:\n{json.dumps(example_output, ensure_ascii=False)}\n\n"
        "=== Now the real input ===\n"
        f"{sections(real_input)}\n\n"
        "Answer:\n"
    )


def numbered(items: list[str]) -> str:
    return "\n".join(f"{i}. {item}" for i, item in enumerate(items, 1)) or "(none)"
