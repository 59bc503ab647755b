"""Write NeMo Evaluator SDK reference results (aggregate scores, remote-metric parsing) as test data.

This is a tool for producing test data, not part of gym-metrics: it runs the SDK's own code
(`nemo_evaluator_sdk/`, shipped inside the `nemo-platform` wheel), which is NOT a project
dependency. Run it with a throwaway interpreter:

    pip download --no-deps nemo-platform==0.3.0 -d /tmp/np && (cd /tmp/np && unzip -q *.whl)
    python3.11 -m venv /tmp/npvenv
    /tmp/npvenv/bin/pip install pydantic jsonschema jsonpath-ng jinja2 httpx pyarrow openai
    /tmp/npvenv/bin/python scripts/make_evaluator_reference.py --sdk /tmp/np

It writes, under `tests/data/evaluator_reference/` (or `--out`; `--check` compares instead):

- `aggregates.json`: `[{case, values, sdk}]`: a score's row values (`null` = NaN) and what
  `nemo_evaluator_sdk.metrics.aggregation.aggregate_metrics` gives for them (the
  `AggregateRangeScore` as JSON: count, nan_count, sum, mean, min, max, std_dev, variance,
  score_type, percentiles, histogram).
- `remote.json`: `{remote: [...], nat: [...], aggregate: {...}}`: per case the endpoint's answer
  (raw JSON text), the JSONPath, and what the SDK's `RemoteMetric` / `NemoAgentToolkitRemoteMetric`
  made of it, run through the SDK's own `score_row` against a real HTTP server on 127.0.0.1:
  `{"value": x}` (`null` for NaN), or `{"error": "<the SDK's row error>"}`; plus the SDK's
  `finalize_evaluation_result` aggregate over all remote rows.

The files in the repository were written on Python 3.11. On 3.12+ only `variance` and
`std_dev` change, in the last bit or two: the SDK adds the squared deviations with Python's
`sum`, which is compensated from 3.12 (the test compares those two fields to 1e-12).

The SDK package's `__init__` imports every metric (RAGAS, LangChain, ...); this script loads
only the modules it needs by registering an empty `nemo_evaluator_sdk` package first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import threading
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "evaluator_reference"


def load_sdk(root: Path) -> types.SimpleNamespace:
    """The SDK modules this script calls, imported from the unzipped wheel at `root`."""
    package = types.ModuleType("nemo_evaluator_sdk")
    package.__path__ = [str(root / "nemo_evaluator_sdk")]
    sys.modules["nemo_evaluator_sdk"] = package
    sys.path.insert(0, str(root))
    from nemo_evaluator_sdk.execution import scoring
    from nemo_evaluator_sdk.metrics import aggregation, remote
    from nemo_evaluator_sdk.metrics.protocol import MetricOutput, MetricOutputSpec, MetricResult
    from nemo_evaluator_sdk.values.scores import JSONScoreParser, RemoteScore

    return types.SimpleNamespace(
        aggregation=aggregation, remote=remote, scoring=scoring, MetricOutput=MetricOutput,
        MetricOutputSpec=MetricOutputSpec, MetricResult=MetricResult, JSONScoreParser=JSONScoreParser,
        RemoteScore=RemoteScore,
    )


# ---------------------------------------------------------------- aggregate scores

def aggregate_cases() -> list[tuple[str, list[float | None]]]:
    """Score columns (None = NaN): the issue's example, edge cases of the percentile rank and
    the histogram's bin edges, and random columns of several sizes and shapes."""
    rng = random.Random(20260710)
    cases: list[tuple[str, list[float | None]]] = [
        ("issue_example", [1.0, 0.0, 0.5]),
        ("single", [0.7]),
        ("two", [0.0, 1.0]),
        ("constant", [0.5, 0.5, 0.5, 0.5]),
        ("all_missing", [None, None, None]),
        ("with_missing", [0.2, None, 0.9, 0.4, None]),
        ("negative", [-3.0, -1.0, -2.0, -2.5]),
        ("tenths", [i / 10 for i in range(11)]),
        ("tenths_shuffled_repeated", rng.sample([i / 10 for i in range(11)] * 3, 33)),
        ("near_one", [1.0 + k * 2.0**-52 for k in range(12)]),
        ("thirds", [1 / 3, 2 / 3, 1.0, 0.0, 1 / 3]),
        ("binary_20", [float(rng.random() < 0.6) for _ in range(20)]),
        ("likert_50", [float(rng.randint(1, 5)) for _ in range(50)]),
        ("uniform_37", [rng.random() for _ in range(37)]),
        ("wide_range_25", [rng.choice([-1.0, 1.0]) * 10 ** rng.uniform(-3, 6) for _ in range(25)]),
        ("skewed_1000", [round(rng.expovariate(3.0), 3) for _ in range(1000)]),
        ("uniform_2000_with_missing", [None if rng.random() < 0.05 else rng.random() for _ in range(2000)]),
        ("small_spread", [0.1 + rng.random() * 1e-12 for _ in range(40)]),
    ]
    return cases


def sdk_aggregate(sdk: types.SimpleNamespace, values: list[float | None]) -> dict[str, Any]:
    items = [
        sdk.MetricResult(outputs=[sdk.MetricOutput(name="x", value=math.nan if v is None else v)]) for v in values
    ]
    result = sdk.aggregation.aggregate_metrics(items, [sdk.MetricOutputSpec.continuous_score("x")])
    (score,) = result.scores
    return score.model_dump(mode="json")


# ---------------------------------------------------------------- remote metrics

# (case, the endpoint's raw JSON answer, JSONPath). The server answers each request with the
# answer of the case named in the request body.
REMOTE_CASES: list[tuple[str, str, str]] = [
    ("number", '{"result": {"score": 0.75}}', "$.result.score"),
    ("integer", '{"result": {"score": 3}}', "$.result.score"),
    ("big_integer", '{"result": {"score": 100000000000000000000}}', "$.result.score"),
    ("true", '{"result": {"score": true}}', "$.result.score"),
    ("false", '{"result": {"score": false}}', "$.result.score"),
    ("numeric_string", '{"result": {"score": "0.25"}}', "$.result.score"),
    ("padded_numeric_string", '{"result": {"score": " 0.5\\n"}}', "$.result.score"),
    ("underscored_numeric_string", '{"result": {"score": "1_000"}}', "$.result.score"),
    ("exponent_string", '{"result": {"score": "1e-3"}}', "$.result.score"),
    ("nan_string", '{"result": {"score": "nan"}}', "$.result.score"),
    ("nan_literal", '{"result": {"score": NaN}}', "$.result.score"),
    ("infinity_string", '{"result": {"score": "Infinity"}}', "$.result.score"),
    ("overflowing_number", '{"result": {"score": 1e999}}', "$.result.score"),
    ("huge_integer", '{"result": {"score": 1' + "0" * 400 + "}}", "$.result.score"),
    ("text", '{"result": {"score": "high"}}', "$.result.score"),
    ("empty_string", '{"result": {"score": ""}}', "$.result.score"),
    ("hex_string", '{"result": {"score": "0x10"}}', "$.result.score"),
    ("null", '{"result": {"score": null}}', "$.result.score"),
    ("object", '{"result": {"score": {"value": 1}}}', "$.result.score"),
    ("list", '{"result": {"score": [0.2, 0.4]}}', "$.result.score"),
    ("empty_list", '{"result": {"score": []}}', "$.result.score"),
    ("missing", '{"result": {"other": 1}}', "$.result.score"),
    ("answer_is_a_list", "[0.5, 0.6]", "$[0]"),
    ("several_matches", '{"scores": [0.2, 0.9, 0.4]}', "$.scores[*]"),
    ("several_matches_first_bool", '{"scores": [true, 0.3]}', "$.scores[*]"),
    ("several_matches_first_null", '{"scores": [null, 0.3]}', "$.scores[*]"),
    ("several_matches_first_text", '{"scores": ["n/a", 0.3]}', "$.scores[*]"),
    ("recursive_descent", '{"a": {"score": 0.1}, "b": {"c": {"score": 0.2}}, "score": 0.3}', "$..score"),
    ("field_union", '{"p": 0.6, "r": 0.8}', "$.['r','p']"),
    ("slice", '{"scores": [0.2, 0.9, 0.4]}', "$.scores[1:]"),
]

# (case, the endpoint's raw JSON answer) for the NeMo Agent Toolkit format ($.result.score).
NAT_CASES: list[tuple[str, str]] = [
    ("number", '{"success": true, "result": {"id": 1, "score": 0.8, "reasoning": "close"}, "error": null}'),
    ("true", '{"success": true, "result": {"score": true}}'),
    ("numeric_string", '{"success": true, "result": {"score": "0.4"}}'),
    ("null", '{"success": true, "result": {"score": null}}'),
    ("text", '{"success": true, "result": {"score": "good"}}'),
    ("no_result", '{"success": false, "result": null, "error": "evaluator crashed"}'),
]
NAT_EVALUATOR = "similarity_eval"
NOT_AGGREGATED = ("infinity_string", "overflowing_number")
"""Left out of the aggregate: the SDK keeps an infinite score, so its sum, mean, max, variance
and histogram become inf or NaN (null in JSON); gym-metrics counts a non-finite score as
missing (README, deliberate differences)."""


class _Answers(BaseHTTPRequestHandler):
    answers: dict[str, str] = {}
    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append(body)
        case = body.get("case") or body.get("item", {}).get("case")
        data = self.answers[case].encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


async def _score(sdk: types.SimpleNamespace, metric: Any, rows: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    return [await sdk.scoring.score_row(metric, row, {}, i, "m", False, []) for i, row in enumerate(rows)]


def _outcome(row_score: Any, name: str) -> dict[str, Any]:
    if row_score.metric_errors:
        return {"error": row_score.metric_errors["m"]}
    (output,) = [o for o in row_score.metrics["m"] if o.name == name]
    value = float(output.value)
    if math.isnan(value):
        return {"value": None}
    if math.isinf(value):
        return {"value": "inf" if value > 0 else "-inf"}
    return {"value": value}


def sdk_remote(sdk: types.SimpleNamespace) -> dict[str, Any]:
    _Answers.answers = {c: answer for c, answer, _ in REMOTE_CASES}
    _Answers.answers.update({f"nat_{c}": answer for c, answer in NAT_CASES})
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/evaluate"
    try:
        remote, all_rows = [], []
        for case, answer, path in REMOTE_CASES:
            metric = sdk.remote.RemoteMetric(
                url=url, body={"case": "{{ item.case }}"}, max_retries=0,
                scores=[sdk.RemoteScore(name="s", parser=sdk.JSONScoreParser(json_path=path))],
            )
            ((_, _, row_score),) = asyncio.run(_score(sdk, metric, [{"case": case}]))
            remote.append({"case": case, "answer": answer, "json_path": path, "sdk": _outcome(row_score, "s")})
        # The aggregate over every remote case (one score path for all: $.result.score).
        metric = sdk.remote.RemoteMetric(
            url=url, body={"case": "{{ item.case }}"}, max_retries=0,
            scores=[sdk.RemoteScore(name="s", parser=sdk.JSONScoreParser(json_path="$.result.score"))],
        )
        all_rows = [{"case": c} for c, _, path in REMOTE_CASES if path == "$.result.score" and c not in NOT_AGGREGATED]
        scored = asyncio.run(_score(sdk, metric, all_rows))
        final = asyncio.run(sdk.scoring.finalize_evaluation_result(metric, scored))
        aggregate = {"cases": [r["case"] for r in all_rows], "sdk": final.aggregate_scores.scores[0].model_dump(mode="json")}
        nat = []
        for case, answer in NAT_CASES:
            metric = sdk.remote.NemoAgentToolkitRemoteMetric(url=url, evaluator_name=NAT_EVALUATOR, max_retries=0)
            ((_, _, row_score),) = asyncio.run(_score(sdk, metric, [{"case": f"nat_{case}"}]))
            names = [s.name for s in metric.output_spec()]
            nat.append({"case": case, "answer": answer, "score_names": names, "sdk": _outcome(row_score, NAT_EVALUATOR)})
        return {"evaluator_name": NAT_EVALUATOR, "remote": remote, "nat": nat, "aggregate": aggregate}
    finally:
        server.shutdown()
        server.server_close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sdk", type=Path, required=True, help="the unzipped nemo-platform wheel")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="compare with the files there; write nothing")
    args = parser.parse_args(argv)
    sdk = load_sdk(args.sdk)
    files = {
        "aggregates.json": [{"case": c, "values": v, "sdk": sdk_aggregate(sdk, v)} for c, v in aggregate_cases()],
        "remote.json": sdk_remote(sdk),
    }
    status = 0
    for name, doc in files.items():
        if isinstance(doc, list):  # one case a line
            text = "[\n" + ",\n".join(json.dumps(case, allow_nan=False) for case in doc) + "\n]\n"
        else:
            text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
        path = args.out / name
        if args.check:
            same = path.exists() and path.read_text() == text
            print(f"{path}: {'same' if same else 'DIFFERS'}")
            status |= not same
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
