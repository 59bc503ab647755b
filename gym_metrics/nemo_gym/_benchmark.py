"""NeMo Gym's benchmark configs read as `gym eval run --benchmark NAME` reads them, for
`collect --benchmark`: the config's one `type: benchmark` dataset (its rows, prompt template
and repeats), the agent that runs it, and its rows made as NeMo Gym collates and dispatches them.

- A benchmark is a config with exactly one dataset of `type: benchmark` on an agent block or a
  resources server block (several: an eval suite, refused; NeMo Gym skips those too).
- Its agent (NeMo Gym's `resolve_dataset_agent`): the declaring agent; for a dataset on a
  resources server, the one agent pointing at that server, or the dataset's `agent` pin, which
  must be one of them. Datasets routed by `taskset` (an environment server) are refused.
- Each raw row: the prompt template applied (a row with an input already is refused, as there),
  a legacy `agent_ref` dropped, `task_source` set to the declaring block, then the agent's
  `agent_ref` added. Rows are one task when their collated lines are equal (NeMo Gym re-dumps
  each row, so two rows differing only in spacing are one task; in key order, two).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.nemo_gym._compose import Blocks, agents_of, read_blocks, refuse_dangling_refs, resolve_under, search_roots, tree_root

BENCHMARK = "benchmark"
TASK_SOURCE = "task_source"


@dataclass(frozen=True)
class Benchmark:
    """One benchmark of a config, as NeMo Gym's BenchmarkConfig reads it."""

    name: str
    """The dataset's name (usually the benchmark's)."""
    config: Path
    declared_by: str
    """The block declaring the dataset: its rows' `task_source`."""
    agent: str
    """The agent block that runs it: its rows' `agent_ref.name`."""
    num_repeats: int
    data: Path
    """The dataset's `jsonl_fpath`, found under the working directory, then the config's tree."""
    prompt_config: Path | None
    prepare_script: str | None
    """None: a train or validation dataset without one (NeMo Gym downloads those from their source)."""
    prepare_dependencies: tuple[str, ...] = ()
    """Packages its prepare script needs (NeMo Gym installs them first; here the user does)."""
    agents: tuple[str, ...] = ()
    """Every agent block of the config (what its rows may be re-routed to)."""

    def missing_data(self) -> InvalidInputError:
        """The error of a dataset not prepared yet, saying how to prepare it."""
        if self.prepare_script is None:
            return InvalidInputError(f"the data of dataset {self.name} is not there", [FieldViolation("--benchmark", f"{self.data}: download it "
                                     "(NeMo Gym's ng_prepare_data +should_download=true fetches it from its source), or give --input")])  # fmt: skip
        module = Path(self.prepare_script).with_suffix("").as_posix().replace("/", ".")
        root = tree_root(self.config) or Path.cwd()
        how = (f"prepare it first: cd {root} && python -c 'from {module} import prepare; prepare()' "
               f"(NeMo Gym: gym eval prepare --benchmark {self.name}), or give --input")  # fmt: skip
        return InvalidInputError(f"the data of benchmark {self.name} is not there", [FieldViolation("--benchmark", f"{self.data}: {how}")])

    def prepare(self) -> Path:
        """Run its prepare script's `prepare()` as `gym eval prepare` does (imported by its module
        path from the tree's root, in a process of its own, its output shown), and check it
        wrote the dataset's file; InvalidInputError naming what went wrong."""
        import subprocess
        import sys
        import tempfile

        root = tree_root(self.config) or Path.cwd()
        if self.prepare_script is None:
            raise InvalidInputError("no prepare script", [FieldViolation("prepare_script", f"dataset {self.name} of {self.config} declares none")])
        script = root / self.prepare_script
        if not script.is_file():
            raise InvalidInputError("no prepare script", [FieldViolation("prepare_script", f"{script}: not a file")])
        module = Path(self.prepare_script).with_suffix("").as_posix().replace("/", ".")
        with tempfile.TemporaryDirectory() as temp:
            said = Path(temp) / "prepared"
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)}
            done = subprocess.run([sys.executable, "-c", _PREPARE, module, str(said)], cwd=root, env=env, check=False)
            if done.returncode:
                needs = f"; it declares prepare_dependencies: pip install {' '.join(self.prepare_dependencies)}" if self.prepare_dependencies else ""
                raise InvalidInputError(f"the prepare script of {self.name} failed", [FieldViolation("prepare_script", f"{script}: exit {done.returncode} (its output is above){needs}")])
            written = Path(said.read_text())
        written = written if written.is_absolute() else root / written
        if written.resolve() != self.data.resolve() or not self.data.is_file():
            raise InvalidInputError(f"the prepare script of {self.name} wrote elsewhere", [FieldViolation("jsonl_fpath", f"{self.data}: prepare() returned {written}")])
        return self.data

    def routed_agent(self, agent_map: Mapping[str, str] | None = None) -> str:
        """The agent its rows run with: `agent_map[declaring block]`, else `agent_map["_default"]`,
        else the resolved one (NeMo Gym's agent_map); InvalidInputError for one the config lacks."""
        given = agent_map or {}
        routed = given.get(self.declared_by, given.get("_default", self.agent))
        if routed not in self.agents:
            raise InvalidInputError("re-routed to an unknown agent", [FieldViolation("--agent-map", f"{routed!r} is not an agent of {self.config}: {', '.join(self.agents) or 'none'}")])
        return routed

    def row_maker(
        self, prompt: Callable[[dict[str, Any]], dict[str, Any]] | None, agent_map: Mapping[str, str] | None = None,
    ) -> Callable[[dict[str, Any]], tuple[dict[str, Any], bytes]]:
        """Each raw row made as NeMo Gym collates and dispatches it (module docstring), `prompt`
        applying its template: (the row, its collated line, which says which rows are one
        task); ValueError for a row it refuses. `agent_map`: see routed_agent."""
        source, agent = self.declared_by, {"name": self.routed_agent(agent_map)}

        def make(row: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
            row = prompt(row) if prompt is not None else dict(row)
            row.pop("agent_ref", None)
            row[TASK_SOURCE] = source
            line = json.dumps(row).encode()
            row["agent_ref"] = agent
            return row, line

        return make


_PREPARE = """
import importlib, pathlib, sys
module = importlib.import_module(sys.argv[1])
if not callable(getattr(module, "prepare", None)):
    sys.exit(f"{sys.argv[1]} has no prepare() function")
pathlib.Path(sys.argv[2]).write_text(str(module.prepare()))
"""
"""The child that runs a prepare script: imports it by module path, writes where prepare() says it wrote."""


def benchmark_names(root: Path) -> list[str]:
    """The benchmarks under `root/benchmarks/`, named as `gym eval run --benchmark` takes them:
    every YAML there that declares exactly one `type: benchmark` dataset in its own text (NeMo
    Gym's discovery), `NAME/config.yaml` named NAME, any other by its path without `.yaml`."""
    import yaml

    def count(node: Any) -> int:
        if isinstance(node, dict):
            return (node.get("type") == BENCHMARK) + sum(count(v) for v in node.values())
        return sum(count(v) for v in node) if isinstance(node, list) else 0

    names = []
    for path in sorted((root / "benchmarks").glob("**/*.yaml")):
        try:
            declared = count(yaml.safe_load(path.read_text(errors="ignore")))
        except yaml.YAMLError as exc:  # said, as NeMo Gym's listing says it (it was left out without a word)
            print(f"warning: skipping benchmark config {path} ({type(exc).__name__}: {str(exc).splitlines()[0]})", file=sys.stderr)
            continue
        if declared == 1 and path.name != "manifest.yaml":
            relative = path.relative_to(root / "benchmarks").with_suffix("")
            names.append(relative.parent.as_posix() if relative.name == "config" and len(relative.parts) == 2 else relative.as_posix())
    return sorted(names)


def benchmark_config(spec: str) -> Path:
    """The config `--benchmark` names: a YAML path, or a name as `gym eval run --benchmark`
    takes it (`NAME`: benchmarks/NAME/config.yaml; `NAME/FLAVOR`: benchmarks/NAME/FLAVOR/config.yaml,
    else benchmarks/NAME/FLAVOR.yaml) under $NEMO_GYM_EXTRA_ROOTS, then the working directory."""
    given = Path(spec)
    if given.suffix in (".yaml", ".yml"):
        if not given.is_file():
            raise InvalidInputError("no such benchmark config", [FieldViolation("--benchmark", f"{spec}: not a file")])
        return given
    extra = [Path(p) for p in os.environ.get("NEMO_GYM_EXTRA_ROOTS", "").split(os.pathsep) if p]
    name, _, flavor = spec.partition("/")
    candidates = [f"benchmarks/{spec}/config.yaml"] if flavor else []
    candidates.append(f"benchmarks/{name}/{flavor or 'config'}.yaml")
    for root in [*extra, Path.cwd()]:
        for candidate in candidates:
            if (root / candidate).is_file():
                return root / candidate
    known = sorted(p.parent.name for root in [*extra, Path.cwd()] for p in root.glob("benchmarks/*/config.yaml"))
    hint = f"known here: {', '.join(known[:20])}{' ...' if len(known) > 20 else ''}" if known else "run from NeMo Gym's tree, or give the config's path"
    raise InvalidInputError("unknown benchmark", [FieldViolation("--benchmark", f"{spec}: no {candidates[-1]}; {hint}")])


@dataclass(frozen=True)
class Suite:
    """A config declaring several benchmark datasets (an eval suite, as NeMo Gym's Nemotron
    configs compose them): `gym eval run` collates them into one file, in the order the config
    declares them, and runs each row with its dataset's agent on that agent's resources server."""

    config: Path
    benchmarks: tuple[Benchmark, ...]
    servers: Mapping[str, str]
    """Each agent block of the config: the resources server block it points at."""
    kinds: Mapping[str, str] = field(default_factory=dict)
    """Each agent block of the config: its implementation (`simple_agent`, `tau2`, ...)."""

    def collate(self, target: Path) -> int:
        """NeMo Gym's collated file of the suite written to `target` (each dataset's rows as
        Benchmark.row_maker makes them, each line repeated its `num_repeats` times, no agent:
        it is resolved from `task_source` at dispatch); the lines written. InvalidInputError
        naming a dataset not prepared, or a row NeMo Gym refuses (file and line)."""
        missing = [b for b in self.benchmarks if not b.data.is_file()]
        if missing:
            raise missing[0].missing_data()
        tmp = target.with_name(f".{target.name}.collating")
        try:
            written = self._write_collated(tmp)
        except BaseException:
            tmp.unlink(missing_ok=True)  # (a refused row left it behind)
            raise
        os.replace(tmp, target)
        return written

    def _write_collated(self, tmp: Path) -> int:
        written = 0
        with tmp.open("wb") as out:
            for benchmark in self.benchmarks:
                make = benchmark.row_maker(prompt_step(str(benchmark.prompt_config), f"{benchmark.declared_by}.prompt_config") if benchmark.prompt_config else None)
                with benchmark.data.open("rb") as rows:
                    for number, raw in enumerate(rows, 1):
                        try:
                            row = json.loads(raw)
                            if not isinstance(row, dict):
                                raise ValueError("not a JSON object")
                            line = make(row)[1] + b"\n"
                        except ValueError as exc:
                            raise InvalidInputError(f"benchmark {benchmark.name}: a row NeMo Gym refuses", [FieldViolation(f"{benchmark.data}:{number}", str(exc))]) from None
                        out.write(line * benchmark.num_repeats)
                        written += benchmark.num_repeats
        return written

    def agent_of(self, agent_map: Mapping[str, str] | None = None) -> dict[str, str]:
        """Each benchmark's declaring block (its rows' `task_source`): the agent its rows run with."""
        return {b.declared_by: b.routed_agent(agent_map) for b in self.benchmarks}


def read_benchmark(path: Path) -> Benchmark:
    """The benchmark of the config at `path` (composed as NeMo Gym composes it); InvalidInputError
    naming what is wrong (no benchmark dataset, several: a suite, an agent that cannot be resolved)."""
    found = read_benchmarks(path)
    if isinstance(found, Suite):
        names = ", ".join(f"{b.name} ({b.declared_by})" for b in found.benchmarks)
        raise InvalidInputError("an eval suite, not one benchmark", [FieldViolation("--benchmark", f"{path}: {len(found.benchmarks)} benchmark datasets: {names}")])
    return found


def read_benchmarks(path: Path, split: str = BENCHMARK) -> Benchmark | Suite:
    """The benchmark of the config at `path`, or its suite when it declares several (in the
    order NeMo Gym collates them); InvalidInputError naming what is wrong. `split`: the datasets
    of that type instead (`gym eval run ++split=train`: its prompt templates unused, as NeMo
    Gym templates benchmark rows only, a license required, a prepare script not)."""
    from gym_metrics.nemo_gym.global_config import GlobalConfigDictParserConfig

    policy_keys = {k: v for k, v in GlobalConfigDictParserConfig.NO_MODEL_GLOBAL_CONFIG_DICT.items() if k != "policy_model"}
    document = read_blocks(path, policy_keys)  # as NeMo Gym reads a benchmark: its policy keys empty
    refuse_dangling_refs(document, path)
    declared = [(block, i, d) for block, datasets in _declared(document) for i, d in enumerate(datasets) if isinstance(d, Mapping)]
    found = [(block, i, d) for block, i, d in declared if d.get("type") == split]
    if not found and split == BENCHMARK:
        raise InvalidInputError("not a benchmark config", [FieldViolation("--benchmark", f"{path}: no dataset of `type: benchmark` on an agent or resources server")])
    if not found:
        named = "; ".join(f"{block}: {d.get('name')} (type: {d.get('type')})" for block, _, d in declared) or "none"
        raise InvalidInputError(f"no {split} dataset", [FieldViolation("--split", f"{path} declares no dataset of type `{split}`; it declares: {named}")])
    read = [_one(path, document, block, i, dataset) for block, i, dataset in found]
    if len(read) == 1:
        return read[0]
    servers, kinds = {}, {}
    for name, block in document.items():
        agent = _inner(block, "responses_api_agents")
        if agent is None:
            continue
        kinds[str(name)] = str(next(iter(block["responses_api_agents"])))
        ref = agent.get("resources_server")
        if isinstance(ref, Mapping) and isinstance(ref.get("name"), str):
            servers[str(name)] = ref["name"]
    return Suite(path, tuple(read), servers, kinds)


def _one(path: Path, document: Blocks, block: str, i: int, dataset: Mapping[str, Any]) -> Benchmark:
    """The benchmark of dataset `i` of `block`."""
    where = f"{block}.datasets[{i}]"
    unresolved = [k for k, v in dataset.items() if isinstance(v, str) and "${" in v] if block in document.unresolved else []
    if unresolved:  # (the block's other fields may stay unresolved: collect does not run its agent)
        raise InvalidInputError("config interpolation failed", [FieldViolation(f"{where}.{unresolved[0]}", f"{path}: {document.unresolved[block]}")])
    benchmark = dataset.get("type") == BENCHMARK
    for key in ("name", "jsonl_fpath", "prepare_script") if benchmark else ("name", "jsonl_fpath"):
        if not isinstance(dataset.get(key), str) or not dataset[key]:
            raise InvalidInputError("bad benchmark dataset", [FieldViolation(f"{where}.{key}", f"{path}: a non-empty string is required")])
    if not benchmark and dataset.get("license") is None:  # (NeMo Gym's words: its config refuses it)
        raise InvalidInputError("bad dataset", [FieldViolation(f"{where}.license", f"{path}: A license is required for {dataset['name']}")])
    repeats = dataset.get("num_repeats", 1)
    if type(repeats) is not int or repeats < 1:
        raise InvalidInputError("bad benchmark dataset", [FieldViolation(f"{where}.num_repeats", f"{path}: {repeats!r} is not a whole number >= 1")])
    if dataset.get("taskset") is not None:
        raise InvalidInputError("a taskset benchmark", [FieldViolation(f"{where}.taskset", f"{path}: routed to an environment server, which collect does not run")])
    roots = search_roots(tree_root(path))
    prompt = dataset.get("prompt_config") if benchmark else None  # NeMo Gym templates benchmark rows only
    script = dataset.get("prepare_script")
    return Benchmark(
        name=dataset["name"], config=path, declared_by=block, agent=resolve_agent(document, block, dataset.get("agent"), f"{where}.agent"),
        num_repeats=repeats, data=resolve_under(dataset["jsonl_fpath"], roots), prepare_script=str(script) if script else None,
        prompt_config=resolve_under(prompt, roots) if prompt else None,
        prepare_dependencies=tuple(str(d) for d in dataset.get("prepare_dependencies") or ()),
        agents=tuple(name for name, block in document.items() if _inner(block, "responses_api_agents") is not None),
    )  # fmt: skip


def resolve_agent(document: Mapping[str, Any], declaring: str, pin: Any, where: str = "agent") -> str:
    """The agent that runs a dataset `declaring` declares (NeMo Gym's rules, module docstring)."""
    if _inner(document.get(declaring), "responses_api_agents") is not None:
        if pin is not None and pin != declaring:
            raise InvalidInputError("an agent pin that would not apply", [FieldViolation(where, f"{pin!r}: the dataset is on agent {declaring!r}, which runs it")])
        return declaring
    candidates = [name for name, _, _ in agents_of(document, declaring)]
    if pin is not None:
        if pin not in candidates:
            raise InvalidInputError("a pinned agent that does not run this server",
                                    [FieldViolation(where, f"{pin!r} does not point at {declaring!r}; agents that do: {sorted(candidates) or 'none'}")])  # fmt: skip
        return str(pin)
    if len(candidates) != 1:
        why = "none points at it: point an agent's resources_server at it" if not candidates else f"{sorted(candidates)} point at it: pin one with `agent:`"
        raise InvalidInputError("no single agent runs the benchmark", [FieldViolation(where, f"the dataset is on resources server {declaring!r}; {why}")])
    return candidates[0]


def _declared(document: Mapping[str, Any]) -> list[tuple[str, list[Any]]]:
    """(block, its datasets) of every agent and resources server block."""
    found = []
    for name, block in document.items():
        for kind in ("responses_api_agents", "resources_servers"):
            inner = _inner(block, kind)
            if inner is not None and isinstance(inner.get("datasets"), list):
                found.append((str(name), inner["datasets"]))
    return found


def _inner(block: Any, kind: str) -> dict[str, Any] | None:
    """The fields of `block` when it is `<kind>: <impl>: {fields}`."""
    inner = block.get(kind) if isinstance(block, Mapping) else None
    if not isinstance(inner, Mapping) or not inner:
        return None
    fields = next(iter(inner.values()))
    return fields if isinstance(fields, dict) else None


def prompt_step(path: str | None, flag: str = "--prompt-config") -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    """The row change of a NeMo Gym prompt template (`--prompt-config`, `+prompt_config`, a
    benchmark's `prompt_config`), its file read now; InvalidInputError naming `flag` and the file."""
    if path is None:
        return None
    import pydantic
    import yaml

    from gym_metrics.nemo_gym.prompt import apply_prompt_to_row, load_prompt_config

    try:
        template = load_prompt_config(path)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, pydantic.ValidationError) as exc:
        if isinstance(exc, UnicodeDecodeError):
            detail = f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})"
        elif isinstance(exc, pydantic.ValidationError):
            detail = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'file'}: {e['msg']}" for e in exc.errors()[:3])
        else:
            detail = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc).splitlines()[0]
        why = f"{path}: {detail}"
        raise InvalidInputError(f"bad {flag}", [FieldViolation(flag, why)]) from None

    def prepare(row: dict[str, Any]) -> dict[str, Any]:
        params = row.get("responses_create_params")
        if isinstance(params, dict) and params.get("input"):  # NeMo Gym refuses the run
            raise ValueError(f"is given, and {flag} too: they are mutually exclusive")
        try:
            return apply_prompt_to_row(row, template)
        except (KeyError, IndexError, AttributeError, ValueError) as exc:  # a field the row lacks, a bad placeholder
            raise ValueError(f"{flag} {path}: {exc.args[0] if exc.args else exc}") from None

    return prepare
