"""Run NeMo Gym 0.7.0's own per-environment test suites (`resources_servers/<env>/tests/`) twice:
as NeMo Gym runs them (its tree, its venv) and ported (`python -m gym_metrics.nemo_gym.port`
into a fresh tree, a venv with gym-metrics[nemo-gym]); then list every test that passes under
NeMo Gym and not ported, with its first error line, and count them by cause (docs/nemo-gym.md's
figures).

    python scripts/check_nemo_env_tests.py --root /tmp/ng --nemo-python /tmp/ngvenv/bin/python \
        --port-python /tmp/portvenv/bin/python --out /tmp/envtests [--extra-path DIR] [ENV ...]

Both sides run pytest as NeMo Gym's CI does (the environment's folder as the working directory,
the tree's root on PYTHONPATH, `asyncio_mode=auto`), each environment bounded by --timeout.
Both venvs need pytest and pytest-asyncio; `--extra-path` puts a folder first on the ported
side's path (the third-party packages nemo-gym itself brings: ray, pandas, datasets,
installed there with `pip install --target`). `--nemo-results FILE` reuses an earlier run's
NeMo Gym side. Writes OUT/results.json (per environment: both sides' counts and per-test
outcomes, the regressions) and prints one line per environment, then the causes.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

_ERROR_LINE = re.compile(r"^E\s+((?:[\w.]+\.)?\w*(?:Error|Exception|Exit|Failed)\b.*|assert .*|AssertionError.*)$")
_KINDS = ("resources_servers", "responses_api_agents", "responses_api_models", "benchmarks", "environment_servers", "environments")


def first_error(text: str, message: str = "") -> str:
    """The telling line of a failure: its first `E   SomeError: ...` line, else its message."""
    lines = (text or "").splitlines()
    found = next((m.group(1) for m in map(_ERROR_LINE.match, lines) if m), None)
    found = found or next((line[1:].strip() for line in lines if line.startswith("E ")), None)
    return (found or message.strip().split("\n")[0] or next((line for line in reversed(lines) if line.strip()), "")).strip()[:400]


def node_id(case: ET.Element) -> str:
    file, cls, name = case.get("file") or "", case.get("classname") or "", case.get("name") or ""
    if not file:
        return f"{cls}::{name}" if cls else name
    module = file[:-3].replace("/", ".")
    inner = cls[len(module):].lstrip(".") if cls.startswith(module) else ""
    return "::".join([file, *([inner.replace(".", "::")] if inner else []), name])


def read_junit(path: Path) -> tuple[dict[str, dict[str, str]], list[dict[str, str]]]:
    """Per test id its outcome (and error line); the modules that failed to collect."""
    tests: dict[str, dict[str, str]] = {}
    broken: list[dict[str, str]] = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome, line = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                line = first_error(child.text or "", child.get("message") or "")
                break
        if outcome == "error" and not case.get("classname") and "collection failure" in (case[0].get("message") or ""):
            broken.append({"module": case.get("name") or "", "error": line})
            continue
        earlier = tests.get(node_id(case))
        if earlier and earlier["outcome"] in ("failed", "error"):
            continue  # a test that passed and then failed its teardown: the failure counts
        tests[node_id(case)] = {"outcome": outcome, **({"error": line} if outcome in ("failed", "error") else {})}
    return tests, broken


def run_suite(python: Path, tree: Path, env: str, logs: Path, timeout: float, extra_path: str = "") -> dict[str, Any]:
    """pytest of one environment's tests in `tree`, killed (its process group) after `timeout`."""
    logs.mkdir(parents=True, exist_ok=True)
    junit, log = logs / f"{env}.xml", logs / f"{env}.log"
    junit.unlink(missing_ok=True)
    command = [str(python), "-m", "pytest", "-o", "asyncio_mode=auto", "-p", "no:cacheprovider", "-o", "junit_family=xunit1",
               f"--junitxml={junit}", "-q", "--tb=short", "--continue-on-collection-errors"]  # fmt: skip
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    environ.update(PYTHONPATH=os.pathsep.join([*([extra_path] if extra_path else []), str(tree)]), PYTHONDONTWRITEBYTECODE="1")
    started = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=tree / "resources_servers" / env, env=environ, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        try:
            process.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            timed_out = True
    tests, broken = read_junit(junit) if junit.exists() else ({}, [{"module": "<session>", "error": first_error(log.read_text(errors="replace"))}])
    counts = collections.Counter(t["outcome"] for t in tests.values())
    return {"seconds": round(time.monotonic() - started, 1), "timed_out": timed_out, "counts": dict(counts), "collection_errors": broken, "tests": tests}


def port_tree(root: Path, env: str, port_python: Path, tree: Path) -> None:
    """`env` ported into a fresh `tree` (the tool takes along what it imports or names); the
    kinds' package files (`resources_servers/__init__.py`) copied as the tree has them."""
    if tree.exists():
        shutil.rmtree(tree)
    for kind in _KINDS:
        if (root / kind / "__init__.py").is_file():
            (tree / kind).mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / kind / "__init__.py", tree / kind / "__init__.py")
    done = subprocess.run([str(port_python), "-m", "gym_metrics.nemo_gym.port", str(root / "resources_servers" / env), str(tree / "resources_servers" / env)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode:
        raise SystemExit(f"{env}: the port tool failed: {done.stderr.strip()}")


def regressions(nemo: dict[str, Any], port: dict[str, Any]) -> list[dict[str, str]]:
    """The tests passing under NeMo Gym that fail, error or are never collected ported."""
    out = []
    for test, seen in nemo["tests"].items():
        if seen["outcome"] != "passed":
            continue
        ours = port["tests"].get(test)
        if ours is None:
            module = test.split("::")[0][:-3].replace("/", ".")
            why = next((b["error"] for b in port["collection_errors"] if b["module"] in (module, "<session>")), "not collected")
            out.append({"test": test, "error": why})
        elif ours["outcome"] in ("failed", "error"):
            out.append({"test": test, "error": ours.get("error", "")})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("envs", nargs="*", help="environments (default: every one with tests/)")
    parser.add_argument("--root", type=Path, required=True, help="the unzipped nemo-gym 0.7.0 wheel")
    parser.add_argument("--nemo-python", type=Path, required=True)
    parser.add_argument("--port-python", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--extra-path", default="")
    parser.add_argument("--nemo-results", type=Path, help="an earlier results.json: its NeMo Gym side is reused")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds for one suite")
    args = parser.parse_args()
    envs = args.envs or sorted(d.name for d in (args.root / "resources_servers").iterdir() if (d / "tests").is_dir())
    earlier = json.loads(args.nemo_results.read_text()) if args.nemo_results else {}
    nemo_tree = args.out / "nemo_tree"
    if not nemo_tree.exists():  # NeMo Gym's tests write beside themselves: a copy of the tree
        shutil.copytree(args.root, nemo_tree, ignore=shutil.ignore_patterns("*.whl"))
    results: dict[str, Any] = {}
    for i, env in enumerate(envs, 1):
        nemo = earlier[env]["nemo"] if env in earlier else run_suite(args.nemo_python, nemo_tree, env, args.out / "logs" / "nemo", args.timeout)
        port_tree(args.root, env, args.port_python, args.out / "port_tree" / env)
        port = run_suite(args.port_python, args.out / "port_tree" / env, env, args.out / "logs" / "port", args.timeout, args.extra_path)
        lost = regressions(nemo, port)
        results[env] = {"nemo": nemo, "port": port, "regressions": lost}
        (args.out / "results.json").write_text(json.dumps(results, indent=1, sort_keys=True))
        print(f"[{i}/{len(envs)}] {env}: NeMo Gym {nemo['counts']} | ported {port['counts']}"
              f"{' TIMEOUT' if port['timed_out'] else ''} | passing under NeMo Gym only: {len(lost)}", flush=True)  # fmt: skip
    passed = {side: sum(r[side]["counts"].get("passed", 0) for r in results.values()) for side in ("nemo", "port")}
    lost = [(env, r) for env, r in results.items() for r in r["regressions"]]
    print(f"\n{len(results)} environments: {passed['nemo']} tests pass under NeMo Gym, {passed['port']} ported; "
          f"{len(lost)} pass under NeMo Gym only, in {len({env for env, _ in lost})} environments")  # fmt: skip
    causes = collections.Counter(re.sub(r"'/[^']*'", "'...'", r["error"])[:120] for _, r in lost)
    for cause, n in causes.most_common(30):
        print(f"{n:6d}  {cause}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
