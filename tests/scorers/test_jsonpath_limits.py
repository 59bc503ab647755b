"""JSONPaths a config names are compiled by one function that refuses the ones whose cost is
not about linear in the answer (issue 23.5): a regex filter (`(a+)+$` froze a job server's
health for 9.8 s on 28 characters), nested `..`, `$` or `parent` once per item; arithmetic is on
numbers only. Refused when the config is validated: `get_scorer`, `parse_target`, job submit.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gym_metrics._util.jsonpath import compile_path
from gym_metrics.errors import InvalidInputError
from gym_metrics.jobs import JobExecutor, JobStore
from gym_metrics.scorers import get_scorer
from gym_metrics.scorers.remote._scores import read_score
from gym_metrics.targets import parse_target

pytestmark = [pytest.mark.every_python, pytest.mark.timeout(60)]

ISSUE_PATH = '$.a[?(@.n =~ "(a+)+$")].v'

OLD_PARSER = pytest.mark.skipif(sys.version_info < (3, 11), reason="jsonpath-ng 1.8 (the last for Python 3.10) parses no `||` or `$` in a filter")
"""Syntax a Python 3.10 install cannot parse at all (so it is refused there as not a JSONPath)."""

REFUSED = {
    "regex filter (the issue's path)": (ISSUE_PATH, "regular expressions"),
    "regex filter in an or": pytest.param('$.a[?(@.x == 1 || @.n =~ "a")].v', "regular expressions", marks=OLD_PARSER),
    "regex sub": ("$.a.`sub(/(a+)+$/, b)`", "regular expressions"),
    "two descendants": ("$..a..b", "at most one `..`"),
    "descendants in a filter": ("$.a[?(@..b)]", "`..` inside a filter"),
    "root wildcard in a filter": ("$.a[?($.*)]", "`$`"),
    "root wildcard in a where": ("$[*] where ($[*])", "`$`"),
    "descendants in a where": ("$.a where ($..b)", "`..` inside a filter"),
    "parent in a filter": ("$.a[?(@.`parent`)]", "`parent`"),
}

ALLOWED = ["$.accuracy", "$.result.score", "$..score", "$.a[?(@.n > 3)].v", pytest.param('$.a[?(@.n == "x" || @.m < 2)].v', marks=OLD_PARSER),
           pytest.param("$.a[?(@.n == $.limit)].v", marks=OLD_PARSER), "$.a[*].x", "$.a where b", "$.a.`len`", "$.a[/b]", "$.a * 100"]


@pytest.mark.parametrize(("path", "why"), REFUSED.values(), ids=list(REFUSED))
def test_expensive_paths_are_refused_saying_why(path: str, why: str) -> None:
    with pytest.raises(ValueError, match="is refused") as info:
        compile_path(path)
    assert why in str(info.value) and path in str(info.value)


@pytest.mark.parametrize("path", ALLOWED)
def test_ordinary_paths_compile(path: str) -> None:
    compile_path(path)


def test_scorers_and_targets_use_the_one_compile_function() -> None:
    from gym_metrics.scorers.remote import _scores
    from gym_metrics.targets import _convert

    assert _scores.compile_path is compile_path and _convert.compile_path is compile_path


def test_arithmetic_is_on_numbers_only() -> None:
    assert read_score({"a": 0.5}, "a", "$.a * 100") == 50.0
    started = time.perf_counter()
    assert math.isnan(read_score({"s": "x"}, "s", "$.s * 1000000000"))  # not a 1 GB string
    assert math.isnan(read_score({"s": [0]}, "s", "$.s * 1000000000"))  # nor a list
    assert time.perf_counter() - started < 1


@OLD_PARSER
def test_a_singular_root_query_in_a_filter_still_works() -> None:
    data = {"limit": 2, "a": [{"n": 1, "v": 10}, {"n": 2, "v": 20}]}
    assert read_score(data, "v", "$.a[?(@.n == $.limit)].v") == 20.0


def _remote(path: str) -> dict[str, Any]:
    return {"url": "http://127.0.0.1:1/score", "body": {"q": "{{ item.q }}"},
            "scores": [{"name": "accuracy", "parser": {"type": "json", "json_path": path}}]}


def test_a_remote_scorer_config_with_a_regex_path_is_refused() -> None:
    with pytest.raises(InvalidInputError) as info:
        get_scorer("remote", _remote(ISSUE_PATH))
    violation = info.value.violations[0]
    assert violation.field == "config.scores.0.parser.json_path"
    assert "regular expressions" in violation.description and "cannot be interrupted" in violation.description


@pytest.mark.parametrize("field", ["response_path", "tool_calls_path"])
def test_an_agent_target_with_a_regex_path_is_refused(field: str) -> None:
    config = {"type": "agent", "url": "http://127.0.0.1:1/agent", "body": {"q": "{{ item.q }}"}, "response_path": "$.answer"}
    with pytest.raises(InvalidInputError) as info:
        parse_target({**config, field: ISSUE_PATH})
    assert info.value.violations[0].field == f"target.{field}"
    assert "regular expressions" in info.value.violations[0].description


def test_a_job_with_a_regex_path_is_refused_at_submission(tmp_path: Path) -> None:
    executor = JobExecutor(JobStore(tmp_path / "jobs.sqlite"))
    spec = {"scorer": "remote", "scorer_config": _remote(ISSUE_PATH), "dataset": {"rows": [{"q": "a" * 28}]}}
    with pytest.raises(InvalidInputError, match="regular expressions"):
        executor.submit(spec)
    assert executor.store.list_jobs() == []
