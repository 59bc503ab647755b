"""Differential test of config composition against NeMo Gym 0.7.0 on random config trees: each
seed writes YAML files naming each other in `config_paths` (relative, `./`, absolute, repeated,
cyclic, missing, malformed) with `_inherit_from` / `_copy` / `${inherit_from:..}` / `${copy:..}`
(chains, self-references, both keys, missing or nested sources), `_delete_key`, interpolations,
lists, nulls, odd scalars and keys, and server blocks of the four kinds. NeMo Gym's parser composes
the tree's benchmark config as scripts/make_nemo_config_reference.py calls it (one nemo-gym
subprocess for the batch), ours as tests/nemo_gym/test_config_composition.py does (`parse`); each
top-level block, resolved, is compared exactly (order too) less what NeMo Gym adds to run servers.
When both refuse, the error kinds are compared. Trees NeMo Gym refuses after composing (`???`
values, dangling references, invalid server blocks) or crashes on (NEMO_CRASHES) are counted apart.

    .venv/bin/python scripts/fuzz_nemo_config.py --seeds 0:1000 --nemo-python /tmp/ngvenv/bin/python [--keep DIR]

Exit 0 when every tree composes (or is refused) alike; 1 when one differs (--keep: its tree, both answers).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import make_nemo_config_reference as recorder  # noqa: E402  (NeMo Gym's side, as recorded)

from gym_metrics.nemo_gym._compose import parse, search_roots  # noqa: E402
from gym_metrics.nemo_gym.global_config import GlobalConfigDictParserConfig  # noqa: E402

NEMO_SIDE = """
import json, os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import make_nemo_config_reference as recorder
found = []
for root, main in json.load(open(sys.argv[2])):
    os.chdir(root)
    found.append(recorder.composed(Path(main)))
Path(sys.argv[3]).write_text(json.dumps(found, default=str))
"""
BEYOND = {"ConfigMissingValuesError", "ServerRefNotFoundError", "AlmostServerError", "AgentCompositionError", "NoServerInstancesError",
          "AmbiguousAgentRenameError", "UnsupportedAgentPairingError", "UnsupportedModelPairingError"}  # fmt: skip  (after composing)
KINDS = {  # ours: an error's message, or its class -> what is refused
    "config not found": "missing file", "bad config_paths": "config_paths", "config is not valid YAML": "yaml",
    "config is not a mapping": "not a mapping", "config inherits or copies from a path that does not exist": "source path",
    "config deletes a key it does not have": "_delete_key", "bad _delete_key": "_delete_key", "TypeError": "merge",
}  # fmt: skip
ALIKE = {  # NeMo Gym's error class -> our kinds that refuse the same thing (NeMo Gym fails on bad values as Python does)
    "ConfigPathNotFoundError": {"missing file", "config_paths"},  # (text, not a list, in an included file: its letters as paths)
    "IsADirectoryError": {"config_paths"}, "TypeError": {"config_paths", "source path"}, "MalformedConfigPathsError": {"config_paths"},
    "ConfigError": {"yaml", "config_paths"}, "KeyValidationError": {"yaml", "not a mapping", "config_paths"}, "InheritPathNotFoundError": {"source path"},
    "AttributeError": {"_delete_key", "source path"}, "ConfigAttributeError": {"_delete_key", "source path"},
    "ConfigKeyError": {"_delete_key"}, "ConfigTypeError": {"merge"},
}  # fmt: skip
NEMO_CRASHES = {
    "StopIteration": "a policy_model block with keys beside responses_api_models and no model but the placeholder",
    "Interpolation": "an item of a list whose ${...} does not resolve (NeMo Gym resolves list items as it composes)",
    "TypeError": "a key that is no text in a config with an invalid server block (its secret masking fails on it)",
}
"""NeMo Gym's failures on configs that compose (its bugs, reported, not mirrored): counted apart."""


class Raw(str):
    """A YAML scalar written as it is (`yes`, `2024-01-02`, `${a.b}`)."""


ODD = ["yes", "no", "on", "off", "~", "null", "2024-01-02", "1e-6", "0x1F", ".inf", ".nan", "1_000", "+1", "-0", "12:30", "'???'", "''"]
NAMES = ["env_a", "env_b", "agent_a", "judge", "shared", "tmpl", "policy_model", "bench_rs", "bench_agent", "with.dot", 7]
KEYS = ["a", "b", "level", "label", "extra", "items", "entrypoint", "1", 2]
ODD_KEYS = [Raw("yes"), Raw("null"), Raw("2024-01-02"), 1.5, Raw("~")]
SERVER_KINDS = ["resources_servers", "responses_api_agents", "responses_api_models", "environment_servers"]


def _scalar(rng: random.Random, names: list[Any]) -> Any:
    roll = rng.random()
    if roll < 0.25:
        return Raw(rng.choice(ODD))
    if roll < 0.40:  # an interpolation: to a block, a nested key, nothing, or with a default
        # (not `${7...}`: omegaconf 2.4 finds the int key 7 there, NeMo Gym's 2.3 does not; a version's difference)
        name = rng.choice([n for n in names if n != 7] or ["nowhere"]) if rng.random() < 0.95 else "nowhere"
        return Raw(rng.choice([f"${{{name}}}", f"${{{name}.{rng.choice(KEYS)}}}", f"${{oc.select:{name}.a,dflt}}", f"x-${{{name}.level}}"]))
    if roll < 0.43:
        return Raw("'???'") if rng.random() < 0.1 else Raw(rng.choice(["3", "0.5", "true"]))
    return rng.choice([0, 1, -3, 2.5, True, False, None, "text", "", "ünï", 10**20])


def _value(rng: random.Random, names: list[Any], depth: int) -> Any:
    roll = rng.random()
    if depth > 2 or roll < 0.5:
        return _scalar(rng, names)
    if roll < 0.65:
        return [_value(rng, names, depth + 1) for _ in range(rng.randint(0, 3))]
    return _mapping(rng, names, depth + 1)


def _directive(rng: random.Random, names: list[Any]) -> str:
    """A source path: a block, a key in one, a missing block or key."""
    usual = [n for n in names if n not in ("with.dot", 7)] or names  # (those two name no path: `with`, then `dot`; "7")
    name = str(rng.choice(usual) if rng.random() < 0.94 else rng.choice(names + ["nowhere"]))
    roll = rng.random()
    return name if roll < 0.85 else f"{name}.{rng.choice(KEYS)}" if roll < 0.95 else f"{name}.{rng.choice(SERVER_KINDS)}"


def _mapping(rng: random.Random, names: list[Any], depth: int) -> dict[Any, Any]:
    block: dict[Any, Any] = {k: _value(rng, names, depth) for k in rng.sample(KEYS, rng.randint(0, 4))}
    if rng.random() < 0.005:  # a key OmegaConf refuses (or reads as a bool)
        block[rng.choice(ODD_KEYS)] = 1
    if rng.random() < (0.2 if depth < 2 else 0.05):  # (both: NeMo Gym takes `_copy`'s path and removes that source)
        for key in rng.choice([["_inherit_from"]] * 6 + [["_copy"]] * 3 + [["_inherit_from", "_copy"]]):
            block[key] = _directive(rng, names) if rng.random() < 0.95 else rng.choice([Raw("~"), 5, 7])
    if rng.random() < 0.1:
        gone = rng.sample(KEYS[:6], rng.randint(1, 2))
        block["_delete_key"] = ", ".join(map(str, gone)) if rng.random() < 0.9 else rng.choice([gone, Raw("~")])
    return block


def _block(rng: random.Random, names: list[Any], name: Any) -> Any:
    roll = rng.random()
    if roll < 0.45 or name == "policy_model" and roll < 0.8:  # a server block
        kind = "responses_api_models" if name == "policy_model" else rng.choice(SERVER_KINDS)
        fields = _mapping(rng, names, 2) if rng.random() < 0.5 else {}
        fields["entrypoint"] = "app.py"
        if rng.random() < 0.15:
            del fields["entrypoint"]
        for ref_kind in rng.sample(SERVER_KINDS[:3], rng.choice([0, 0, 0, 1, 2])):
            ref_name = rng.choice(names + ["nowhere"]) if rng.random() < 0.3 else rng.choice(["env_a", "agent_a", "judge", "policy_model"])
            fields[rng.choice(["resources_server", "model_server", "agent_server", "judge"])] = {"type": ref_kind, "name": ref_name}
        block: Any = {kind: {rng.choice(["demo", "simple_agent", "openai_model", "legacy_agent"]): fields}}
        if rng.random() < 0.3:
            block["_inherit_from" if rng.random() < 0.7 else "_copy"] = _directive(rng, names)
        return block
    if roll < 0.55:
        return Raw(f"${{{rng.choice(['inherit_from', 'copy'])}:{_directive(rng, names)}}}")
    if roll < 0.85:
        return _mapping(rng, names, 0)
    return _value(rng, names, 2)


def _yaml(value: Any, indent: int = 0) -> str:
    """`value` as block YAML: Raw scalars (and int keys) as written, other text double-quoted."""
    pad = " " * indent
    if isinstance(value, dict) and value:
        return "".join(f"\n{pad}{k if isinstance(k, (int, Raw)) else json.dumps(k)}:{_yaml(v, indent + 2)}" for k, v in value.items())
    if isinstance(value, list) and value:
        return "".join(f"\n{pad}-{_yaml(v, indent + 2)}" for v in value)
    return " " + (str(value) if isinstance(value, Raw) else "{}" if value == {} else "[]" if value == [] else json.dumps(value))


def write_tree(seed: int, root: Path) -> Path:
    """Seed `seed`'s tree under `root`; its benchmark config's path."""
    rng = random.Random(seed)
    files = ["benchmarks/bench/config.yaml"] + [f"resources_servers/env{i}/configs/c{j}.yaml" for i, j in
                                                 rng.sample([(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)], rng.randint(1, 4))]  # fmt: skip
    names = rng.sample(NAMES, rng.randint(3, 7))
    for index, name in enumerate(files):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        doc: dict[Any, Any] = {}
        if rng.random() < 0.7:  # the files it includes: later ones, sometimes earlier (cycles), missing, repeated, spelled otherwise
            pool = files[index + 1 :] or files[1:]
            listed = rng.sample(pool, rng.randint(0, len(pool))) if pool else []
            if rng.random() < 0.15:
                listed.append(rng.choice(files))
            listed = [rng.choice([e, e, e, f"./{e}", str(root / e)]) for e in listed]
            if rng.random() < 0.02:
                listed.append("resources_servers/nowhere/configs/missing.yaml")
            doc["config_paths"] = listed if rng.random() < 0.96 else rng.choice([listed[0] if listed else Raw("~"), [1], Raw("~")])
        for block in rng.sample(names, rng.randint(1, len(names))):
            doc[block] = _block(rng, names, block)
        roll = rng.random()  # sometimes a list, bad YAML, or empty
        text = "- a\n- b\n" if roll < 0.008 else "a: [1\n" if roll < 0.016 else "" if roll < 0.03 else _yaml(doc).lstrip("\n") + "\n"
        path.write_text(text, encoding="utf-8")
    return (root / files[0]).resolve()


def ours(root: Path, main: Path) -> dict[str, Any]:
    os.chdir(root)
    try:
        document = parse({**GlobalConfigDictParserConfig.NO_MODEL_GLOBAL_CONFIG_DICT, "config_paths": [str(main)]}, search_roots(root), None, root)
    except Exception as exc:  # noqa: BLE001 - compared with NeMo Gym's refusal
        return {"error": getattr(exc, "message", type(exc).__name__), "why": " ".join(str(exc).split())[:300]}
    return json.loads(json.dumps(recorder.resolved_blocks(document), default=str))


def normal(blocks: dict[str, Any], root: Path) -> dict[str, Any]:
    """`blocks` less NeMo Gym's run settings, host and port it fills in (falsy ones: it replaces
    them), the tree's root written `<root>`."""
    found = json.loads(json.dumps(blocks, default=str).replace(json.dumps(str(root.resolve()))[1:-1], "<root>"))
    for key in recorder.RUNTIME_KEYS:
        found.pop(key, None)
    _unfill(found)
    return found


def _unfill(value: Any) -> None:
    """Server-shaped dicts, at any depth (a `${...}` copies NeMo Gym's filled block), less host and port."""
    for inner in value.values() if isinstance(value, dict) else value if isinstance(value, list) else ():
        _unfill(inner)
    for kind in [k for k in SERVER_KINDS if k in value] if isinstance(value, dict) else []:
        fields: Any = next(iter(value[kind].values())) if isinstance(value[kind], dict) and len(value[kind]) == 1 else None
        for name, filled in (("host", "127.0.0.1"), ("port", -1)) if isinstance(fields, dict) else ():
            if name in fields and (fields[name] == filled or not fields[name]):
                del fields[name]


def compare(theirs: dict[str, Any], mine: dict[str, Any], root: Path) -> str | None:
    """Why the answers differ (None when they do not)."""
    if "error" in theirs or "error" in mine:
        if "error" in theirs and "error" in mine:
            kind = KINDS.get(mine["error"], mine["error"])
            if theirs["error"] == mine["error"] or kind in ALIKE.get(theirs["error"], set()) or "Interpolation" in theirs["error"]:
                return None
            return f"both refuse, as {theirs['error']} (NeMo Gym) and {kind} (ours: {mine['why']})"
        return f"NeMo Gym: {theirs.get('error', 'composes')}; ours: {mine.get('why', 'composes')}"
    theirs, mine = normal(theirs, root), normal(mine, root)
    added = [k for k in theirs.keys() - mine.keys() if isinstance(theirs[k], dict) and "environment_servers" in theirs[k]]
    theirs = {k: v for k, v in theirs.items() if k not in added}
    differ = [k for k in theirs.keys() | mine.keys() if json.dumps(theirs.get(k, "<absent>")) != json.dumps(mine.get(k, "<absent>"))]
    if differ:
        return "; ".join(f"{k}: NeMo Gym {json.dumps(theirs.get(k, '<absent>'))[:300]}, ours {json.dumps(mine.get(k, '<absent>'))[:300]}" for k in sorted(differ, key=str))
    return None if list(theirs) == list(mine) else f"block order: NeMo Gym {list(theirs)}, ours {list(mine)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:100", help="FIRST:STOP (default 0:100)")
    parser.add_argument("--nemo-python", required=True, help="a python with nemo-gym 0.7.0 installed")
    parser.add_argument("--keep", type=Path, help="copy each differing tree and both answers here")
    args = parser.parse_args(argv)
    first, stop = (int(x) for x in args.seeds.split(":"))
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        for seed in range(first, stop):
            root = Path(tmp, f"tree_{seed}").resolve()
            (root / "resources_servers").mkdir(parents=True)
            cases.append((root, write_tree(seed, root)))
        (Path(tmp) / "cases.json").write_text(json.dumps([[str(r), str(m)] for r, m in cases]))
        subprocess.run([args.nemo_python, "-c", NEMO_SIDE, str(ROOT / "scripts"), str(Path(tmp) / "cases.json"), str(Path(tmp) / "nemo.json")],
                       cwd=tmp, capture_output=True, check=True)  # fmt: skip
        answers = json.loads((Path(tmp) / "nemo.json").read_text())
        tally: Counter[str] = Counter()
        beyond: Counter[str] = Counter()
        refused: Counter[str] = Counter()  # (NeMo Gym's error / ours)
        for seed, (root, main), theirs in zip(range(first, stop), cases, answers):
            if theirs.get("error") in BEYOND:
                beyond[theirs["error"]] += 1
                continue
            mine = ours(root, main)
            crash = next((k for k in NEMO_CRASHES if k in theirs.get("error", "")), None)
            if crash and "error" not in mine:
                beyond[f"{theirs['error']} ({NEMO_CRASHES[crash]})"] += 1
                continue
            why = compare(theirs, mine, root)
            tally["differ" if why else "both refuse" if "error" in theirs else "same"] += 1
            if "error" in theirs and not why:
                refused[f"{theirs['error']} / {KINDS.get(mine['error'], mine['error'])}"] += 1
            if why:
                print(f"seed {seed}: {why}")
                if args.keep:
                    shutil.copytree(root, args.keep / root.name, dirs_exist_ok=True)
                    (args.keep / root.name / "answers.json").write_text(json.dumps({"nemo_gym": theirs, "ours": mine}, indent=1, default=str))
        os.chdir(ROOT)
    print("refused alike (NeMo Gym's error / ours):", ", ".join(f"{k} {n}" for k, n in refused.most_common()))
    for kind, count in beyond.most_common():
        print(f"NeMo Gym refused {count} trees that compose here: {kind}")
    print(f"{stop - first} trees: {tally['same']} composed alike, {tally['both refuse']} refused alike, {tally['differ']} differing, "
          f"{sum(beyond.values())} refused by NeMo Gym after composing (not compared)")  # fmt: skip
    return 1 if tally["differ"] else 0


if __name__ == "__main__":
    sys.exit(main())
