"""Every Python and shell example in docs/*.md runs as written (issue 24.11).

Each page's ```python and ```bash blocks run in page order, as a reader would run them: the
Python blocks in one module namespace (top-level `await` allowed; a later block may use what an
earlier one defined), each shell block with `bash -e` in the same working directory, with this
venv's `gym-metrics` first on PATH. The working directory holds the files the examples name
(`rows.jsonl`, `run.jsonl`, `TARGET.json`, ...), and the services they address are real
ones on loopback, put where the page says they are: `127.0.0.1:50051` and `HOST:PORT` are a
`gym-metrics serve math_exact`, `localhost:50052` / `127.0.0.1:50052` a `gym-metrics jobs
serve`, `http://127.0.0.1:8000/v1` a ScriptedPolicyServer, `http://judge:8000/v1` a
ScriptedJudge, `http://127.0.0.1:8001/evaluate` a remote metric answering
`{"result": {"accuracy": 1.0}}`. Registrations the examples make are undone after each page.

Blocks marked ```{.bash .synopsis} are command synopses, not examples: every flag they show
must exist on that command. The only blocks not run are those in SKIP, each with its reason
(an external service or tool that no test machine has); an entry that matches no block fails.
"""

from __future__ import annotations

import argparse

import ast
import asyncio
import contextlib
import importlib
import inspect
import json
import os
import pkgutil
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import _ci
from _buf import buf_binary
from gym_metrics.environments import ENVIRONMENTS
from gym_metrics.cli import _parser as cli_parser
from gym_metrics.exporters._base import EXPORTERS
from gym_metrics.reducers._registry import REDUCERS
from gym_metrics.scorers._base import SCORERS
from gym_metrics.testing import LoopbackServer, PolicyAnswer, Reply, ScriptedJudge, ScriptedPolicyServer

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SAMPLE = ROOT / "gym_metrics_servers" / "math_exact" / "sample.jsonl"
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
RUN = {"python": "python", "bash": "bash", "sh": "bash", "shell": "bash", "console": "bash"}
SYNOPSIS = "{.bash .synopsis}"

SKIP: dict[tuple[str, str], str] = {
    ("environments.md", "gym-metrics serve my_pkg.app:MyMathServer --port 50051"):
        "serves the reader's own package until stopped (serving a file or a built-in is run by tests/cli)",
    ("exporters.md", "gym-metrics collect --server HOST:PORT --input tasks.jsonl --output run.jsonl \\\n    --export"):
        "--export wandb needs a Weights & Biases account (each exporter is run by tests/exporters)",
    ("exporters.md", "pip install 'gym-metrics[prometheus]'"): "installs from the package index; servers run until stopped",
    ("exporters.md", "gym-metrics collect --server HOST:PORT --input tasks.jsonl --output run.jsonl \\\n    --pushgateway"):
        "needs a Prometheus Pushgateway",
    ("exporters.md", "pip install opentelemetry-distro opentelemetry-exporter-otlp"):
        "installs OpenTelemetry from the package index and needs an OTLP collector",
    ("index.md", "# serve math_exact on loopback, collect its shipped sample (3 agents x 12 tasks x 4 repeats)"):
        "creates a venv and installs from the package index (what .ci/run does)",
    ("kubernetes.md", "docker build -t gym-metrics:0.1.0 ."): "needs Docker",
    ("sandbox.md", "docker run --rm -p 50051:50051 --user 0 --cap-add SYS_ADMIN --cap-add NET_ADMIN \\"):
        "needs Docker (tests/deploy/test_sandbox_deploy.py runs the same configuration without it)",
    ("kubernetes.md", "kubectl apply -f deploy/kubernetes/namespace.yaml -f deploy/kubernetes/server.yaml"):
        "needs a Kubernetes cluster",
    ("kubernetes.md", "gym-metrics collect --server dns:///math-exact.gym-metrics.svc.cluster.local:50051 \\"):
        "needs a Kubernetes cluster's DNS",
    ("kubernetes.md", "kubectl apply -f deploy/kubernetes/jobs-server.yaml"): "needs a Kubernetes cluster",
    ("kubernetes.md", "kubectl apply -f deploy/kubernetes/collect-job.yaml"): "needs a Kubernetes cluster",
    ("kubernetes.md", "from gym_metrics.ray import serve_replicas"):
        "needs a Ray cluster of several nodes (tests/ray_backend runs serve_replicas on a local one)",
    ("pipelines.md", "gym-metrics collect --server 10.0.0.5:50051 --server 10.0.0.6:50051 --server 10.0.0.7:50051 \\"):
        "needs three hosts and a cluster's DNS (tests/collector/test_replicas.py runs several servers)",
    ("pipelines.md", "gym-metrics aggregate rollouts.jsonl [more.jsonl ...] --ray            # a local Ray instance"):
        "needs Ray and a Ray cluster (tests/ray_backend runs --ray on a local instance)",
    ("sdk.md", "# NeMo Evaluator"): "NeMo Evaluator's own SDK and platform: the script before the switch",
}


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    info: str
    body: str

    @property
    def key(self) -> tuple[str, str]:
        return self.page, self.body.splitlines()[0] if self.body else ""

    @property
    def kind(self) -> str | None:
        """python / bash / synopsis, or None for other languages (json, yaml, text)."""
        if self.info == SYNOPSIS:
            return "synopsis"
        return RUN.get(self.info.split()[0]) if self.info.split() else None

    def skip_reason(self) -> str | None:
        for (page, head), reason in SKIP.items():
            if page == self.page and self.body.startswith(head):
                return reason
        return None


def doc_blocks() -> list[Block]:
    found = []
    for path in sorted(DOCS.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            found.append(Block(path.name, text[: m.start()].count("\n") + 1, m["info"].strip(), m["body"]))
    return found


BLOCKS = doc_blocks()
PAGES = sorted({b.page for b in BLOCKS if b.kind in ("python", "bash") and b.skip_reason() is None})


# ------------------------------------------------------------------ the services and files


def _start(args: list[str], pattern: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "gym_metrics.cli", *args], stderr=err, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(pattern, log.read_text(errors="replace"))
        if found:
            return proc, found.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"{args} did not start: {log.read_text(errors='replace')}")


class RemoteMetricStub(LoopbackServer):
    """A remote metric service: every POST gets {"result": {"accuracy": 1.0}}."""

    def _take(self, request: Any) -> Any:
        return None

    def _reply(self, item: Any, request: Any) -> Reply:
        return Reply(200, json.dumps({"result": {"accuracy": 1.0}}), {"Content-Type": "application/json"})


def policy_answer(prompt: str) -> PolicyAnswer:
    if "weather" in prompt.lower():
        return PolicyAnswer(text="Checking.", tool_calls=[{"name": "weather", "arguments": {"city": "Paris"}}])
    return PolicyAnswer(text="\\boxed{4}")


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Documented address -> the live one standing in for it."""
    logs = tmp_path_factory.mktemp("services")
    with contextlib.ExitStack() as stack:
        procs = []
        math, math_addr = _start(["serve", "math_exact", "--port", "0"], r"listening on (\S+:\d+)", logs / "serve.err")
        procs.append(math)
        (logs / "data").mkdir()  # beside the database, never around it (refused: a job could read it)
        jobs, jobs_addr = _start(
            ["jobs", "serve", "--db", str(logs / "jobs.sqlite"), "--port", "0", "--data-root", str(logs / "data")],
            r"job server listening on (\S+:\d+)", logs / "jobs.err",
        )  # fmt: skip
        procs.append(jobs)
        for proc in procs:
            stack.callback(proc.wait, 30)
            stack.callback(proc.kill)
        policy = stack.enter_context(ScriptedPolicyServer(policy_answer))
        judge = stack.enter_context(ScriptedJudge(["4"] * 10_000))
        remote = stack.enter_context(RemoteMetricStub())
        yield {
            "127.0.0.1:50051": math_addr,
            "HOST:PORT": math_addr,
            "localhost:50052": jobs_addr,
            "127.0.0.1:50052": jobs_addr,
            "http://127.0.0.1:8000/v1": policy.url,
            "http://judge:8000/v1": judge.url,
            "http://127.0.0.1:8001/evaluate": f"http://127.0.0.1:{remote.port}/evaluate",
        }


def documented_tool_row() -> dict[str, Any]:
    """The complete tool_call_accuracy row docs/evaluation.md shows (its first Python block)."""
    block = next(b for b in BLOCKS if b.page == "evaluation.md" and "rows = [" in b.body)
    namespace: dict[str, Any] = {}
    source = block.body.split("result = ")[0].replace("from gym_metrics.evaluation import evaluate", "")
    exec(source, namespace)
    [row] = namespace["rows"]
    return dict(row)


PAGE_ROWS = {
    # docs/sdk.md's remote metric reads `reference` and `output`, as its inline dataset has them
    "sdk.md": [{"reference": "Paris", "output": "Paris"}, {"reference": "Rome", "output": "Rome"}],
}


@pytest.fixture(scope="module")
def scored_run(services: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of docs/report.md's files, made once for every page (write_files copies them):
    a run's rollouts and metrics file, and the same rows verified by the math server."""
    cwd = tmp_path_factory.mktemp("scored_run")
    (cwd / "run.jsonl").write_text(SAMPLE.read_text(encoding="utf-8"))
    subprocess.run([sys.executable, "-m", "gym_metrics.cli", "aggregate", "run.jsonl", "-q"],
                   cwd=cwd, check=True, capture_output=True, timeout=60)  # fmt: skip
    # new and old runs: the sample verified (report --compare gates their rewards: the sample has none)
    subprocess.run([sys.executable, "-m", "gym_metrics.cli", "collect", "--server", services["127.0.0.1:50051"], "--input", "run.jsonl",
                    "--output", "scored.jsonl"], cwd=cwd, check=True, capture_output=True, timeout=60)  # fmt: skip
    for name in ("new", "old"):
        (cwd / f"{name}_aggregate_metrics.json").write_text((cwd / "scored_aggregate_metrics.json").read_text())
    return cwd


def write_files(cwd: Path, services: dict[str, str], page: str, scored_run: Path) -> None:
    """The files the examples name, in the examples' working directory."""
    sample = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)
    tool_row = documented_tool_row()
    lines = {
        "rows.jsonl": PAGE_ROWS.get(page, [tool_row, {**tool_row, "user_input": "What is the weather in Paris?"}]),
        "qa.jsonl": [{"user_input": "2+2?", "response": "4", "reference": "4"}],
    }
    stock = next(b for b in BLOCKS if b.page == "evaluation.md" and b.info == "json" and '"initial_stock"' in b.body)
    lines["stock.jsonl"] = [json.loads(stock.body)]  # the row docs/evaluation.md shows for its episodes over inventory's tools
    for name, rows in lines.items():
        (cwd / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    tasks = [json.loads(line) for line in sample if '"strong_agent"' in line and '"_ng_rollout_index": 0,' in line]
    keep = ("agent_ref", "responses_create_params", "expected_answer")  # tasks: no response, no indices
    (cwd / "tasks.jsonl").write_text("".join(json.dumps({k: t[k] for k in keep}) + "\n" for t in tasks))
    (cwd / "shard0.jsonl").write_text("".join(sample[: len(sample) // 2]))
    (cwd / "shard1.jsonl").write_text("".join(sample[len(sample) // 2 :]))
    (cwd / "TARGET.json").write_text(json.dumps({"type": "model", "url": services["http://127.0.0.1:8000/v1"], "model": "m"}))
    for server in ("inventory", "code_tests"):  # docs/pipelines.md's agent loop, docs/sandbox.md: the repository's paths
        (cwd / "gym_metrics_servers" / server).mkdir(parents=True)
        (cwd / "gym_metrics_servers" / server / "sample.jsonl").write_text((ROOT / "gym_metrics_servers" / server / "sample.jsonl").read_text())
    (cwd / "data").mkdir()
    (cwd / "data" / "rows.jsonl").write_text((cwd / "rows.jsonl").read_text())
    (cwd / "secrets.json").write_text("{}")
    (cwd / "secrets.json").chmod(0o600)  # the job server refuses a secrets file others can read
    # docs/report.md: a run's metrics file, its rollouts, and an older run's to compare with (a copy each page)
    shutil.copytree(scored_run, cwd, dirs_exist_ok=True)


def localized(body: str, services: dict[str, str]) -> str:
    for documented, live in services.items():
        body = body.replace(documented, live)
    return body


# ------------------------------------------------------------------ running a page


@contextlib.contextmanager
def registries_restored() -> Iterator[None]:
    _import_builtins()  # registered before the snapshot: a restore must not drop what an import registered once
    before = [(r, r.snapshot()) for r in (ENVIRONMENTS, REDUCERS, SCORERS, EXPORTERS)]
    try:
        yield
    finally:
        for registry, snapshot in before:
            registry.restore(snapshot)


def _import_builtins() -> None:
    """Every module of the packages whose imports register built-ins (scorers, reducers)."""
    for package in ("gym_metrics.scorers", "gym_metrics.reducers"):
        for info in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
            if ".tests" not in info.name:
                importlib.import_module(info.name)


def run_python(block: Block, source: str, module: types.ModuleType) -> None:
    code = compile(source, f"docs/{block.page}:{block.line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, module.__dict__)  # noqa: S307 - the documented example itself
    if inspect.iscoroutine(result):
        asyncio.run(result)


OWN_SERVER = re.compile(r"gym-metrics serve \S+ --port (\d+) &")


def own_server_port(body: str) -> str:
    """A block that starts its own server in the background (`serve NAME --port P &`, then
    calls 127.0.0.1:P) gets a free port for P, so that it talks to that server."""
    found = OWN_SERVER.search(body)
    if found is None:
        return body
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    return body.replace(f"--port {found[1]}", f"--port {port}").replace(f"127.0.0.1:{found[1]}", f"127.0.0.1:{port}")


def stop_group(proc: subprocess.Popen[bytes], grace_s: float = 15.0) -> None:
    """Stop a block's process group as a user stops a server: SIGTERM (it closes its sandbox
    and removes its folders), then SIGKILL for whatever is left after `grace_s`."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    deadline = time.monotonic() + grace_s
    try:
        while time.monotonic() < deadline:
            os.killpg(proc.pid, 0)  # ProcessLookupError once none of the group is left
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_bash(block: Block, source: str, cwd: Path) -> None:
    """The block in its own process group, stopped when the block ends (stop_group): a server
    it started in the background stops with it. buf (for `buf curl`) is on its PATH."""
    tools = [str(Path(sys.executable).parent)] + ([str(Path(buf_binary()).parent)] if "buf " in source else [])
    env = {**os.environ, "PATH": os.pathsep.join([*tools, os.environ.get("PATH", "")]),
           "POLICY_API_KEY": "not-a-secret", "BUF_CACHE_DIR": str(cwd / ".buf-cache")}  # fmt: skip
    out, err = cwd / f".block{block.line}.out", cwd / f".block{block.line}.err"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        proc = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", source], cwd=cwd, env=env,
                                stdout=stdout, stderr=stderr, start_new_session=True)  # fmt: skip
    try:
        code = proc.wait(timeout=120)
    finally:
        stop_group(proc)
    text = lambda p: p.read_text(errors="replace")[-3000:]  # noqa: E731
    assert code == 0, f"docs/{block.page}:{block.line} exited {code}\n{source}\nstdout:\n{text(out)}\nstderr:\n{text(err)}"


NEEDS_SANDBOX = {"sandbox.md"}
"""Pages whose examples run model code: they need the sandbox's strict isolation."""


@pytest.mark.slow  # servers in subprocesses, CLI subprocesses: ~1-10 s a page
@pytest.mark.timeout(300)
@pytest.mark.parametrize("page", PAGES)
def test_the_examples_of_a_page_run_as_written(
    page: str, services: dict[str, str], scored_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if page in NEEDS_SANDBOX:
        _ci.need_sandbox()
    write_files(tmp_path, services, page, scored_run)
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType(f"docs_{page[:-3]}")
    module.__file__ = str(DOCS / page)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    with registries_restored():
        for block in BLOCKS:
            if block.page != page or block.kind not in ("python", "bash") or block.skip_reason() is not None:
                continue
            source = localized(own_server_port(block.body), services)
            if block.kind == "python":
                run_python(block, source, module)
            else:
                run_bash(block, source, tmp_path)


# ------------------------------------------------------------------ what is checked, and synopses


def test_every_python_and_shell_block_is_run_or_skipped_with_a_reason() -> None:
    kinds = {b.info for b in BLOCKS if b.kind is None}
    assert kinds <= {"json", "toml", "yaml", "text"}, f"blocks of an unchecked language: {kinds - {'json', 'toml', 'yaml', 'text'}}"
    for key, reason in SKIP.items():
        matched = [b for b in BLOCKS if b.skip_reason() == reason and b.key[0] == key[0] and b.body.startswith(key[1])]
        assert len(matched) == 1, f"SKIP entry {key} matches {len(matched)} blocks: fix or drop it"
        assert matched[0].kind in ("python", "bash"), key
    assert len(SKIP) <= 16, "the skip-list is for blocks that need an external service only"
    assert {"sdk.md", "evaluation.md", "targets.md", "environments.md", "grpc.md", "pipelines.md"} <= set(PAGES)


def _subparser(parser: Any, words: list[str]) -> tuple[Any, list[str]]:
    """The (sub)parser the command words name, and the words after them."""
    while words:
        actions = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
        if not actions or words[0] not in actions[0].choices:
            break
        parser, words = actions[0].choices[words[0]], words[1:]
    return parser, words


SYNOPSES = [b for b in BLOCKS if b.kind == "synopsis"]


@pytest.mark.parametrize("block", SYNOPSES, ids=[f"{b.page}:{b.line}" for b in SYNOPSES])
def test_synopses_name_real_flags(block: Block) -> None:
    commands = re.split(r"\n(?=gym-metrics )", block.body.replace("\\\n", " "))
    for command in commands:
        words = command.split()
        assert words and words[0] == "gym-metrics", command
        parser, rest = _subparser(cli_parser(), [w for w in words[1:] if not w.startswith(("[", "-"))][:2])
        known = {opt for action in parser._actions for opt in action.option_strings}
        flags = {f for f in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", command)}
        assert flags - known == set(), f"docs/{block.page}:{block.line}: {sorted(flags - known)} not flags of `{parser.prog}`"


def test_pipelines_resume_heading_and_metrics_file_claim() -> None:
    """docs/pipelines.md: the Resume heading is over the text about --resume (it sat over the
    one about --workers), and "the same metrics file" says it needs `aggregate --env`."""
    text = (DOCS / "pipelines.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"^### (.+?)\n(.*?)(?=^#)", text, re.MULTILINE | re.DOTALL))
    resume = next(body for head, body in sections.items() if head.startswith("Resume"))
    assert "--resume" in resume and "--workers" not in resume
    claim = next(line for line in text.split("\n- ") if "the same metrics file" in line or "same metrics file" in line)
    assert "--env" in claim, claim


def _leaf_commands(parser: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    actions = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    if not actions:
        yield path, parser
        return
    for name, sub in actions[0].choices.items():
        yield from _leaf_commands(sub, (*path, name))


def test_the_command_reference_holds_every_flag_of_every_command() -> None:
    """docs/commands.md is the whole synopsis: every (sub)command, and each of its options in
    one of its spellings (a new flag cannot go missing); the global ones are said in prose."""
    [block] = [b for b in SYNOPSES if b.page == "commands.md"]
    commands = re.split(r"\n(?=gym-metrics )", block.body.replace("\\\n", " "))
    missing = []
    for path, parser in _leaf_commands(cli_parser()):
        lines = [c for c in commands if c.split()[1 : 1 + len(path)] == list(path)]
        if not lines:
            missing.append(f"gym-metrics {' '.join(path)}: no synopsis")
            continue
        shown = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", " ".join(lines)))
        for action in parser._actions:
            options = set(action.option_strings) - {"-h", "--help", "--log-level", "--debug"}
            if action.help == argparse.SUPPRESS:  # internal (collect --shard: one process of --processes N)
                continue
            if options and not options & shown:
                missing.append(f"gym-metrics {' '.join(path)}: {'/'.join(sorted(options))}")
    assert not missing, "docs/commands.md lacks:\n" + "\n".join(missing)
