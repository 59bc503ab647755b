"""Record how NeMo Gym 0.7.0 composes configs (`config_paths`, `_inherit_from`, `_copy`,
`_delete_key`), for tests/nemo_gym/test_config_composition.py to hold gym_metrics.nemo_gym's
composition to: every benchmark config and every resources server config of the wheel, and the
cases of tests/data/nemo_gym_configs/tree (written to exercise each rule), parsed from that tree.

Run in the throwaway nemo-gym venv (its own `GlobalConfigDictParser`), from the unzipped wheel:

    cd /tmp/ng && /tmp/ngvenv/bin/python /work/main/scripts/make_nemo_config_reference.py \
        --root /tmp/ng --out /work/main/tests/data/nemo_gym_configs/reference.json

Each config is parsed as `gym env start --config PATH` parses it with no model given
(GlobalConfigDictParserConfig.NO_MODEL_GLOBAL_CONFIG_DICT, no command line, no env.yaml). Kept
(`summary`): the entries it included, and each top-level value resolved (`unresolved` when its
interpolations cannot be) as a sha256 of its sorted JSON, less what NeMo Gym adds to run servers;
the cases' values whole too, to read. A config NeMo Gym refuses is kept as its error's name.
Also kept: NeMo Gym's failure kinds (gym_metrics.nemo_gym.failure_kinds mirrors them).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path
from typing import Any

TREE = Path(__file__).resolve().parents[1] / "tests" / "data" / "nemo_gym_configs" / "tree"


RUNTIME_KEYS = frozenset({
    "allow_openai_version_skew", "cache_dir", "disallowed_ports", "dry_run", "head_server", "head_server_deps",
    "model_endpoint_readiness_timeout_seconds", "port_range_high", "port_range_low", "python_version", "results_dir",
    "server_spinup_timeout_seconds", "skip_venv_if_present", "use_absolute_ip", "uv_cache_dir", "uv_lock_timeout_seconds",
    "uv_venv_dir",
})  # fmt: skip
"""Top-level keys NeMo Gym's parse adds for running servers (none of a config's own)."""


def composed(path: Path) -> dict[str, Any]:
    """NeMo Gym's composition of `path` (its own parser), each top-level value resolved."""
    from omegaconf import OmegaConf

    from nemo_gym.global_config import GlobalConfigDictParser, GlobalConfigDictParserConfig

    initial = OmegaConf.merge(GlobalConfigDictParserConfig.NO_MODEL_GLOBAL_CONFIG_DICT, {"config_paths": [str(path)]})
    try:
        document = GlobalConfigDictParser().parse(
            GlobalConfigDictParserConfig(initial_global_config_dict=initial, skip_load_from_cli=True, skip_load_from_dotenv=True, offline=True)
        )
    except Exception as exc:  # noqa: BLE001 - recorded: NeMo Gym refuses this config
        return {"error": type(exc).__name__}
    return resolved_blocks(document)


def resolved_blocks(document: Any) -> dict[str, Any]:
    from omegaconf import OmegaConf

    blocks: dict[str, Any] = {}
    for key in document.keys():
        try:
            value = document[key]
            blocks[str(key)] = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
        except Exception:  # noqa: BLE001
            blocks[str(key)] = "unresolved"
    return blocks


def summary(blocks: dict[str, Any], root: Path) -> dict[str, Any]:
    """What is compared: the included entries (the top one, as given, is the run's own path) and
    each block but NeMo Gym's run settings, as [sha256 of its sorted JSON, its server type] with
    the host and port NeMo Gym fills in left out (127.0.0.1, and -1 when not started) and the
    tree's root (in `${cache_dir}` and the like) written `<root>`."""
    blocks = json.loads(json.dumps(blocks, default=str).replace(json.dumps(str(root.resolve()))[1:-1], "<root>"))
    found: dict[str, Any] = {}
    for key, value in blocks.items():
        if key in RUNTIME_KEYS or key == "config_paths":
            continue
        kind = None
        if isinstance(value, dict) and len(value) == 1 and isinstance(next(iter(value.values())), dict):
            kind, inner = next(iter(value.items()))
            if len(inner) == 1 and isinstance(next(iter(inner.values())), dict):
                impl, fields = next(iter(inner.items()))
                fields = {k: v for k, v in fields.items() if not (k == "host" and v == "127.0.0.1" or k == "port" and v == -1)}
                value = {kind: {impl: fields}}
            else:
                kind = None
        found[key] = [digest(value), kind]
    return {"includes": list(blocks.get("config_paths") or [])[1:], "blocks": found}


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, required=True, help="the unzipped nemo-gym wheel")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    wheel: dict[str, Any] = {}
    configs = sorted(args.root.glob("benchmarks/*/config.yaml")) + sorted(args.root.glob("resources_servers/*/configs/*.yaml"))
    for path in configs:
        found = composed(path.resolve())
        wheel[str(path.relative_to(args.root))] = found if "error" in found else summary(found, Path.cwd())
    os.chdir(TREE)  # the cases' relative config_paths are under their own tree
    cases = {}
    for path in sorted(TREE.glob("benchmarks/*/config.yaml")):
        found = composed(path)
        cases[str(path.relative_to(TREE))] = found if "error" in found else {**summary(found, TREE), "values": {k: v for k, v in found.items() if k not in RUNTIME_KEYS}}
    from nemo_gym.failure_kinds import FAILURE_KINDS

    kinds = sorted(FAILURE_KINDS)
    args.out.write_text(json.dumps({"nemo_gym": "0.7.0", "wheel": wheel, "cases": cases, "failure_kinds": kinds}, indent=1, sort_keys=True) + "\n")
    errors = sum("error" in v for v in wheel.values())
    print(f"{len(wheel)} wheel configs ({errors} NeMo Gym refuses), {len(cases)} cases -> {args.out}")


if __name__ == "__main__":
    main()
