"""Regenerate sample.jsonl: 6 coding tasks x 2 agents x 2 repeats of unverified rollouts.

Run `python gym_metrics_servers/code_tests/make_sample.py` (or `python -m gym_metrics_servers.code_tests.make_sample`).
Deterministic; a test checks the file is up to date. `careful_agent` writes correct programs;
`hasty_agent`'s fail in each way the response names (a wrong answer, an exception, a loop that
never ends, a wrong function result), so the sample exercises every common status.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("sample.jsonl")
REPEATS = 2

SUM = "a, b = map(int, input().split())\nprint(a + b)\n"
REVERSE = "print(input()[::-1])\n"
FIZZ = (
    "n = int(input())\nfor i in range(1, n + 1):\n"
    "    print('FizzBuzz' if i % 15 == 0 else 'Fizz' if i % 3 == 0 else 'Buzz' if i % 5 == 0 else i)\n"
)
TWO_SUM = (
    "class Solution:\n    def twoSum(self, nums, target):\n        seen = {}\n"
    "        for i, x in enumerate(nums):\n            if target - x in seen:\n                return [seen[target - x], i]\n"
    "            seen[x] = i\n"
)
PRIMES = (
    "n = int(input())\nsieve = [True] * (n + 1)\nsieve[:2] = [False] * min(2, n + 1)\n"
    "for i in range(2, int(n ** 0.5) + 1):\n    if sieve[i]:\n        sieve[i * i :: i] = [False] * len(sieve[i * i :: i])\n"
    "print(sum(sieve))\n"
)
WORDS = "import sys\nwords = sys.stdin.read().split()\nprint(len(words))\nprint(max(words, key=len) if words else '')\n"

# (prompt, tests, limits, careful program, hasty program)
TASKS: list[tuple[str, list[dict[str, Any]], dict[str, Any], str, str]] = [
    ("Read two integers on one line and print their sum.",
     [{"input": "2 3\n", "output": "5"}, {"input": "-7 7\n", "output": "0"}, {"input": "1000000000 1000000000\n", "output": "2000000000"}],
     {}, SUM, "a, b = input().split()\nprint(a + b)\n"),
    ("Read a line and print it reversed.",
     [{"input": "abc\n", "output": "cba"}, {"input": "racecar\n", "output": "racecar"}],
     {}, REVERSE, "s = input()\nprint(s[len(s)])\n"),
    ("Read n and print FizzBuzz from 1 to n, one per line.",
     [{"input": "5\n", "output": "1\n2\nFizz\n4\nBuzz"}, {"input": "15\n", "output": "\n".join(
         "FizzBuzz" if i % 15 == 0 else "Fizz" if i % 3 == 0 else "Buzz" if i % 5 == 0 else str(i) for i in range(1, 16))}],
     {}, FIZZ, "n = int(input())\nfor i in range(1, n + 1):\n    print('Fizz' if i % 3 == 0 else 'Buzz' if i % 5 == 0 else i)\n"),
    ("Implement Solution.twoSum(nums, target): the indices of the two numbers adding up to target.",
     [{"function": "Solution.twoSum", "args": [[2, 7, 11, 15], 9], "expected": [0, 1]},
      {"function": "Solution.twoSum", "args": [[3, 2, 4], 6], "expected": [1, 2]}],
     {}, TWO_SUM, TWO_SUM.replace("[seen[target - x], i]", "[i, seen[target - x]]")),
    ("Read n and print how many primes are at most n.",
     [{"input": "10\n", "output": "4"}, {"input": "100000\n", "output": "9592"}],
     {"time_limit_s": 2}, PRIMES,
     "n = int(input())\ncount = 0\nk = 2\nwhile True:\n    if all(k % d for d in range(2, k)):\n        count += 1\n    k += 1\n"),
    ("Read text on stdin; print the number of words, then the longest word.",
     [{"input": "the quick brown fox\n", "output": "4\nquick"}, {"input": "", "output": "0\n"}],
     {}, WORDS, "import sys\nwords = sys.stdin.read().split()\nprint(len(words))\nprint(max(words, key=len))\n"),
]  # fmt: skip


def answer(program: str) -> str:
    return f"Here is my solution.\n\n```python\n{program}```\n"


def rows() -> list[dict[str, Any]]:
    out = []
    for agent, pick in (("careful_agent", 3), ("hasty_agent", 4)):
        for task, (prompt, tests, limits, *programs) in enumerate(TASKS):
            program = programs[pick - 3]
            for repeat in range(REPEATS):
                out.append({
                    "agent_ref": {"name": agent}, "_ng_task_index": task, "_ng_rollout_index": repeat,
                    "responses_create_params": {"input": [{"role": "user", "content": prompt}]},
                    "response": {"output": [{"type": "message", "role": "assistant",
                                             "content": [{"type": "output_text", "text": answer(program)}]}]},
                    "tests": tests, **limits,
                })  # fmt: skip
    return out


def main() -> None:
    OUT.write_text("".join(json.dumps(r) + "\n" for r in rows()), encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
