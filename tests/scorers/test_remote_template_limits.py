"""Remote-metric body templates cannot escape the sandbox nor build without limit (issue 9.12).

One test per class of attempt, through a real remote metric and a real HTTP endpoint on
127.0.0.1: the row fails with a RowError naming the limit (or the sandbox refusal) and nothing
is sent. Memory safety shows as each test finishing quickly with that error (timeout marks),
never as a timing assertion: the unbounded versions allocate gigabytes or spin for minutes.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from gym_metrics.errors import InvalidInputError
from gym_metrics.evaluation import evaluate_async
from gym_metrics.scorers import RowError, get_scorer
from gym_metrics.scorers.remote import _limits
from gym_metrics.scorers.remote._limits import MAX_INT_BITS, MAX_RANGE

from gym_metrics.testing import Reply, ScriptedJudge

pytestmark = pytest.mark.timeout(30)

ROW: dict[str, Any] = {"question": "2+2?", "tags": ["math", 1], "n": 3, "meta": {"a": 1}}
SCORES = [{"name": "accuracy", "parser": {"type": "json", "json_path": "$.accuracy"}}]


def ok(data: Any) -> Reply:
    return Reply(200, json.dumps(data), {"Content-Type": "application/json"})


@pytest.fixture(scope="module")
def judge() -> Iterator[ScriptedJudge]:
    """One loopback endpoint for the module; a request nobody scripted gets HTTP 500."""
    with ScriptedJudge() as server:
        yield server


def config(judge: ScriptedJudge, body: dict[str, Any], **over: Any) -> dict[str, Any]:
    return {"type": "remote", "url": f"{judge.url}/chat/completions", "body": body, "scores": SCORES,
            "max_retries": 0, **over}


async def refused(judge: ScriptedJudge, template: str, row: dict[str, Any] = ROW, **over: Any) -> RowError:
    """Score `row` with body {"q": template}: it must fail on the template, with nothing sent."""
    sent = len(judge.requests)
    metric = get_scorer("remote", config(judge, {"q": template}, **over))
    try:
        with pytest.raises(RowError) as info:
            await metric.score(row)
    finally:
        await metric.aclose()
    assert len(judge.requests) == sent, "the body was sent"
    assert info.value.field in ("body", "body.q"), info.value
    return info.value


async def sent_body(body: dict[str, Any], **over: Any) -> Any:
    """Score ROW through a fresh endpoint and return the body it received."""
    with ScriptedJudge([ok({"accuracy": 1})]) as server:
        metric = get_scorer("remote", config(server, body, **over))
        try:
            assert (await metric.score(ROW))["accuracy"] == 1.0
        finally:
            await metric.aclose()
    assert len(server.requests) == 1
    return server.requests[0].body


# -- escapes: Python internals, mutation, format strings (the sandbox refuses them) --------------

ESCAPES = {
    "attribute __class__": "{{ item.__class__ }}",
    "mro": "{{ item.__class__.__mro__ }}",
    "__subclasses__": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "__globals__ of a global": "{{ cycler.__init__.__globals__ }}",
    "__globals__ of namespace": "{{ namespace.__init__.__globals__ }}",
    "attr filter": "{{ item|attr('__class__') }}",
    "subscript of a dunder": "{{ item.question['__class__'] }}",
    "template internals": "{{ self.__init__.__globals__ }}",
    "format string attribute": "{{ '{0.__class__}'.format(item) }}",
    "format string globals": "{{ '{0.__init__.__globals__}'.format(namespace) }}",
    "format_map attribute": "{{ '{x.__class__}'.format_map({'x': item}) }}",
    "mutating a dict": "{{ item.update({'a': 1}) }}",
    "mutating a list": "{{ item.tags.append(1) }}",
    "popping a list": "x {{ item.tags.pop() }}",
    "clearing a dict": "{{ item.meta.clear() }}",
}


@pytest.mark.parametrize("template", ESCAPES.values(), ids=ESCAPES.keys())
async def test_sandbox_escapes_are_refused(judge: ScriptedJudge, template: str) -> None:
    error = await refused(judge, template)
    assert "refused by the sandbox" in error.reason and "unsafe" in error.reason


async def test_lipsum_is_not_available(judge: ScriptedJudge) -> None:
    error = await refused(judge, "{{ lipsum(10**6, max=10**6) }}")  # would print n x max words
    assert "undefined name" in error.reason


# -- growth: every way of building a bigger value stops at a limit named in the error -----------

GROWTH = {
    "huge string repeat (the issue's case)": ("{{ 'a'*10**9 }}", "max_body_bytes"),
    "huge string repeat in text": ("q: {{ 'a' * 10**9 }}", "max_body_bytes"),
    "huge list repeat": ("{{ [0]*10**9 }}", "max_body_bytes"),
    "nested list repeat": ("{{ [[0]*1000]*100000 }}", "max_body_bytes"),
    "huge pow": ("{{ 10**(10**9) }}", f"{MAX_INT_BITS:,} bits"),
    "pow just over the integer limit": (f"{{{{ 2**{MAX_INT_BITS} }}}}", f"{MAX_INT_BITS:,} bits"),
    "huge range": ("{{ range(10**9)|list }}", f"limit of {MAX_RANGE:,}"),
    "range just over MAX_RANGE": (f"{{{{ range({MAX_RANGE + 1})|length }}}}", f"limit of {MAX_RANGE:,}"),
    "concatenation with ~ in a loop": (
        "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
        "max_body_bytes",
    ),
    "concatenation with + in a loop": (
        "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
        "max_body_bytes",
    ),
    "list concatenation in a loop": (
        "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
        "max_body_bytes|steps|MAX_RENDER_SECONDS",  # measuring both sides each time: a CPU bound may come first
    ),
    "integer squaring in a loop": (
        "{% set ns = namespace(n=3) %}{% for i in range(64) %}{% set ns.n = ns.n * ns.n %}{% endfor %}",
        "bits",
    ),
    "shared references doubling (list literal)": (
        "{% set ns = namespace(l=[0]) %}{% for i in range(64) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l }}",
        "max_body_bytes|MAX_RENDER_SECONDS",  # measuring near the cap is CPU too
    ),
    "shared references doubling (namespace)": (
        "{% set ns = namespace(v=0) %}{% for i in range(64) %}{% set ns.v = namespace(a=ns.v, b=ns.v) %}{% endfor %}",
        "max_body_bytes|MAX_RENDER_SECONDS",  # measuring near the cap is CPU too
    ),
    "macro doubling its argument": (
        "{% macro twice(x) %}{{ x }}{{ x }}{% endmacro %}{% set ns = namespace(s='ab') %}"
        "{% for i in range(64) %}{% set ns.s = twice(ns.s) %}{% endfor %}",
        "max_body_bytes",
    ),
    "block set doubling": (
        "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s %}{{ ns.s }}{{ ns.s }}{% endset %}{% endfor %}",
        "max_body_bytes",
    ),
    "output past the body cap": ("{% for i in range(5000) %}{{ 'x' * 1000 }}{% endfor %}", "max_body_bytes"),
    "str method width": ("{{ 'a'.ljust(10**9) }}", "max_body_bytes"),
    "str.replace doubling": (
        "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s.replace('', ns.s) %}{% endfor %}",
        "max_body_bytes",
    ),
    "str.join doubling": (
        "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s.join([ns.s, ns.s]) %}{% endfor %}",
        "max_body_bytes",
    ),
    "expandtabs": ("{{ '\t\t'.expandtabs(10**9) }}", "max_body_bytes"),
    "translate to long strings": (
        "{% set ns = namespace(s='aa') %}{% for i in range(64) %}{% set ns.s = ns.s.translate({97: ns.s}) %}{% endfor %}",
        "max_body_bytes",
    ),
    "int.to_bytes": ("{{ (1).to_bytes(10**9, 'big') }}", "max_body_bytes"),
    "% format width": ("{{ '%1000000000d' % 1 }}", "format width"),
    "% format star width": ("{{ '%*d' % (10**9, 1) }}", "format width"),
    "str.format width": ("{{ '{:>1000000000}'.format(1) }}", "format width"),
    "str.format nested width": ("{{ '{:{}}'.format(1, 10**9) }}", "format width"),
    "format filter width": ("{{ '%1000000000s'|format('x') }}", "format width"),
    "center filter": ("{{ 'a'|center(10**9) }}", "max_body_bytes"),
    "indent filter": ("{{ 'a\nb'|indent(10**9) }}", "max_body_bytes"),
    "join filter separator": ("{{ range(10000)|join('x' * 1000) }}", "max_body_bytes"),
    "replace filter doubling": (
        "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s|replace('a', ns.s ~ ns.s) %}{% endfor %}",
        "max_body_bytes",
    ),
    "wordwrap wrapstring": ("{{ ('a ' * 500000)|wordwrap(1, wrapstring='x' * 1000) }}", "max_body_bytes"),
    "batch fill": ("{{ [1]|batch(10**9, 0)|list }}", "limit of"),
    "slice count": ("{{ [1]|slice(10**9)|list }}", f"limit of {MAX_RANGE:,}"),
    "a filter through map": ("{{ item.tags|map('center', 10**9)|list }}", "max_body_bytes"),
    "nested loops (steps)": (
        "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}",
        "steps|MAX_RENDER_SECONDS",  # whichever CPU bound comes first on this machine
    ),
}


@pytest.mark.parametrize(("template", "limit"), GROWTH.values(), ids=GROWTH.keys())
async def test_growth_stops_at_a_named_limit(judge: ScriptedJudge, template: str, limit: str) -> None:
    error = await refused(judge, template)
    assert "exceeds a limit" in error.reason or "max_body_bytes" in error.reason, error
    assert re.search(limit, error.reason), error


async def test_values_just_under_the_limits_are_allowed() -> None:
    body = {
        "pow": f"n={{{{ 2**{MAX_INT_BITS - 1} }}}}",  # as text: JSON numbers stop at 64 bits
        "range": f"{{{{ range({MAX_RANGE})|length }}}}",
        "text": "{{ 'x' * 500 }}",
    }
    sent = await sent_body(body, max_body_bytes=5000)
    assert sent == {"pow": f"n={2 ** (MAX_INT_BITS - 1)}", "range": MAX_RANGE, "text": "x" * 500}


async def test_the_body_cap_is_configurable_and_counts_json_bytes(judge: ScriptedJudge) -> None:
    error = await refused(judge, "{{ 'x' * 200 }}", max_body_bytes=100)
    assert "max_body_bytes (100)" in error.reason
    assert (await sent_body({"q": "{{ 'x' * 80 }}"}, max_body_bytes=100)) == {"q": "x" * 80}
    # 40 control characters are 40 characters but 240 bytes of JSON (\u0001 each): the exact check
    error = await refused(judge, "{{ '\x01' * 40 }}", max_body_bytes=100)
    assert error.field == "body" and "bytes of JSON, over max_body_bytes (100)" in error.reason


async def test_the_cap_is_for_the_whole_body(judge: ScriptedJudge) -> None:
    metric = get_scorer("remote", config(judge, {"a": "{{ 'x' * 600 }}", "b": "{{ 'y' * 600 }}"}, max_body_bytes=1000))
    with pytest.raises(RowError, match=r"max_body_bytes \(1,000\)") as info:
        await metric.score(ROW)
    await metric.aclose()
    assert info.value.field == "body.b"


def test_the_cap_is_validated() -> None:
    for bad in (0, -1, 2**31):
        with pytest.raises(InvalidInputError):
            get_scorer("remote", {"url": "http://127.0.0.1:1/x", "body": {"q": "x"}, "scores": SCORES,
                                      "max_body_bytes": bad})


def test_constant_templates_are_not_built_when_the_config_is_read() -> None:
    # Jinja folds constant expressions at compile time; the bounded ones must not fold into gigabytes.
    body = {"a": "{{ 'a' * 1000000000 }}", "b": "{{ 'a'|center(1000000000) }}", "c": "x{{ 'ab' ~ 'cd' }}"}
    metric = get_scorer("remote", {"url": "http://127.0.0.1:1/x", "body": body, "scores": SCORES})
    assert metric.config.body == body  # type: ignore[attr-defined]


async def test_ordinary_templates_keep_their_behaviour() -> None:
    body = {
        "tags": "{{ item.tags }}",
        "n": "{{ item.n * 2 }}",
        "pair": "{{ [item.question, item.n] }}",
        "meta": "{{ {'k': item.meta} }}",
        "text": "{{ item.question ~ '!' }} {{ '%s-%03d'|format('a', 7) }} {{ '{:>4}'.format(item.n) }}",
        "loop": "{% for t in item.tags %}{{ loop.index }}:{{ t }};{% endfor %}{{ item.tags|join(',') }}",
        "repeat": "{{ item.question * 2 }}",
    }
    sent = await sent_body(body)
    assert sent == {
        "tags": ["math", 1], "n": 6, "pair": ["2+2?", 3], "meta": {"k": {"a": 1}},
        "text": "2+2?! a-007    3", "loop": "1:math;2:1;math,1", "repeat": "2+2?2+2?",
    }


async def test_a_row_over_a_limit_is_a_row_error_not_a_failed_run() -> None:
    rows = [{"n": 2}, {"n": 10**9}, {"n": 3}]
    with ScriptedJudge([ok({"accuracy": 1}), ok({"accuracy": 0})]) as server:
        cfg = config(server, {"q": "{{ 'a' * item.n }}"})
        result = await evaluate_async("remote", rows, config=cfg, parallelism=1)
    assert [r.body for r in server.requests] == [{"q": "aa"}, {"q": "aaa"}]
    values = result.column("accuracy")
    assert values[0] == 1.0 and math.isnan(values[1]) and values[2] == 0.0
    failure = result.to_dict()["row_scores"][1]["error"]
    assert failure["field"] == "body.q" and "max_body_bytes" in failure["reason"]


# -- issue 23.5: str.format and the other builders that bypassed the per-value checks -----------

WIDE = {"w": "1000000000", "l": [1000000000], "f": 1e9}
"""A row giving a width as a string, in a list and as a float: none of them an int argument."""

BYPASSES = {
    "str.format width from a string (the issue's case)": ("{{ '{:{}}'.format('x', item.w) }}", "format width"),
    "str.format width from a list item (the issue's case)": ("{{ '{0:{1[0]}}'.format('x', item.l) }}", "format width"),
    "format_map width (the issue's case)": ("{{ '{a:{b}}'.format_map({'a': 'x', 'b': item.w}) }}", "format width"),
    "str.format width from a float": ("{{ '{:{}}'.format(1.5, item.f) }}", "format width"),
    "str.format precision from a string": ("{{ '{:.{}f}'.format(1.5, item.w) }}", "format width"),
    "str.format: many fields each under the cap": ("{{ ('{0:1000000}' * 2000).format('x') }}", r"str.format\(\) would build"),
    "str.format: one large value repeated": ("{% set s = 'x' * 1000000 %}{{ ('{0}' * 2000).format(s) }}", r"str.format\(\) would build"),
    "%: many widths each under the cap": ("{{ ('%1000000s' * 2000) % (('x',) * 2000) }}", "a % format would build"),
    "%: one mapping value repeated": ("{% set s = 'x' * 1000000 %}{{ ('%(a)s' * 2000) % {'a': s} }}", "a % format would build"),
    "|format: one keyword repeated": ("{% set s = 'x' * 1000000 %}{{ ('%(a)s' * 2000)|format(a=s) }}", "a % format would build"),
    "|tojson indent": ("{{ [1]|tojson(indent=1000000000) }}", "tojson indent of 1,000,000,000"),
    "integer growth by '-'": (
        "{% set ns = namespace(n=3) %}{% for i in range(5000) %}{% set ns.n = ns.n - (0 - ns.n) %}{% endfor %}",
        f"'-' would build an integer .* over {MAX_INT_BITS:,} bits",
    ),
    "|int of a long hex text": ("{{ ('f' * 500000)|int(base=16) % 7 }}", f"over {MAX_INT_BITS:,} bits"),
    "int.from_bytes": ("{{ (0).from_bytes(('f' * 100000).encode(), 'big') % 7 }}", f"over {MAX_INT_BITS:,} bits"),
    "|tojson indent of a deep value": (  # 300,000 items 400 levels deep: 1.9 GB of indentation
        "{% set ns = namespace(l=[[0] * 300000]) %}{% for i in range(400) %}{% set ns.l = ns.l|batch(1)|list %}{% endfor %}"
        "{{ ns.l|tojson(indent=16) }}",
        "tojson output would build|MAX_RENDER_SECONDS",  # counted as it streams; on a slow machine the CPU bound may come first
    ),
    "|wordwrap breaking a long word (quadratic copies)": ("{{ ('a' * 1000000)|wordwrap(1) }}", "steps"),
    "macros calling themselves twice (time)": (
        "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}",
        "MAX_RENDER_SECONDS|steps",
    ),
}


@pytest.mark.parametrize(("template", "limit"), BYPASSES.values(), ids=BYPASSES.keys())
async def test_builders_that_bypassed_the_checks_stop_at_a_named_limit(judge: ScriptedJudge, template: str, limit: str) -> None:
    error = await refused(judge, template, row={**ROW, **WIDE})
    assert "exceeds a limit" in error.reason and re.search(limit, error.reason), error


SHARING = {  # shared references that doubled a printed size per step without a measured builder
    "namespace attributes": (
        "{% set ns = namespace(v=0) %}{% for i in range(40) %}{% set t = namespace() %}{% set t.a = ns.v %}"
        "{% set t.b = ns.v %}{% set ns.v = t %}{% endfor %}{{ ('' ~ ns.v)|length }}",
        "a namespace would build",
    ),
    "cycler items": (
        "{% set ns = namespace(v=[0]) %}{% for i in range(40) %}{% set ns.v = cycler(ns.v, ns.v).items %}{% endfor %}",
        r"Cycler\(\) would build",
    ),
    "|batch fill_with": (
        "{% set ns = namespace(l=[0]) %}{% for i in range(40) %}{% set ns.l = ([1]|batch(3, ns.l)|list)[0] %}{% endfor %}",
        "batch fill_with would build",
    ),
}


@pytest.mark.parametrize(("template", "limit"), SHARING.values(), ids=SHARING.keys())
async def test_shared_references_cannot_double_a_value(judge: ScriptedJudge, template: str, limit: str) -> None:
    error = await refused(judge, template, max_body_bytes=10_000)
    assert re.search(limit, error.reason), error


async def test_a_render_has_a_wall_clock_limit(judge: ScriptedJudge, monkeypatch: pytest.MonkeyPatch) -> None:
    # the step budget alone allows seconds of slow steps on the event loop (macro calls)
    monkeypatch.setattr(_limits, "MAX_RENDER_SECONDS", 0.01)
    error = await refused(judge, "{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}")
    assert "ran for more than 0.01 s (MAX_RENDER_SECONDS)" in error.reason


async def test_sum_of_lists_is_linear_and_measured(judge: ScriptedJudge) -> None:
    # sum(start=[]) copies the total once per item: 20,000 lists of 100 took minutes; now one
    # pass, and the 2,000,000 items are over the body cap before anything is printed
    row = {**ROW, "lists": [[0] * 100] * 20_000}
    # measured up to a 100 kB cap (about 100,000 elements, a tenth of a second): the default 1 MB
    # cap took more than the 1 s CPU bound on a loaded 2-core machine; a quadratic sum still would
    error = await refused(judge, "{{ item.lists|sum(start=[])|length }}", row=row, max_body_bytes=100_000)
    assert "|sum would build" in error.reason, error.reason


_MEMORY_CHILD = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (768 << 20, 768 << 20))
from gym_metrics.scorers import RowError
from gym_metrics.scorers.remote import BodyTemplate
row = {"w": "1000000000", "l": [1000000000]}
for template in ["{{ '{:{}}'.format('x', item.w) }}", "{{ '{0:{1[0]}}'.format('x', item.l) }}",
                 "{{ '{a:{b}}'.format_map({'a': 'x', 'b': item.w}) }}"]:
    try:
        BodyTemplate({"q": template}).render(row)
    except RowError as exc:
        print(exc.reason)
"""


def test_the_issues_format_rows_are_refused_before_allocating() -> None:
    # under a 768 MiB address-space cap a 1 GB string cannot be built: the old check measured
    # the result after building it (MemoryError here; 3 GB held by a job server)
    done = subprocess.run([sys.executable, "-c", _MEMORY_CHILD], capture_output=True, text=True, timeout=60)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and len(lines) == 3, done.stderr[-2000:]
    assert all("a format width of 1,000,000,000 is over the limit" in line for line in lines), lines


async def test_the_bounded_builders_keep_their_behaviour() -> None:
    body = {
        "format": "{{ '{:>{}}|{:.2f}|{!r}|{x}'.format(1, 4, 2.5, 'a', x=[1]) }} {{ '{a:{w}}!'.format_map({'a': 'x', 'w': 3}) }}",
        "percent": "{{ '%s-%03d %%'|format('a', 7) }} {{ '%(a)s!'|format(a='b') }} {{ '%-4s|' % 'z' }}",
        "tojson": "{{ {'b': [1, '<'], 'a': 1}|tojson(indent=1) }}",
        "sum": "{{ [[1], [2, 3]]|sum(start=[]) }}",
        "ints": "{{ (10 - 3) // 2 }} {{ '0x1f'|int(0, 16) }} {{ 'ab cd'|wordwrap(2) }}",
        "ns": "{% set ns = namespace(a=[1]) %}{% set ns.b = ns.a %}{{ ns.a ~ ns.b }}",
    }
    sent = await sent_body(body)
    assert sent == {
        "format": "   1|2.50|'a'|[1] x  !", "percent": "a-007 % b! z   |",
        "tojson": {"a": 1, "b": [1, "<"]}, "sum": [1, 2, 3],  # a tojson template is read back as JSON, as the SDK does
        "ints": "3 31 ab\ncd", "ns": "[1][1]",
    }
