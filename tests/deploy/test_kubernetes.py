"""deploy/kubernetes/*.yaml, the recipe docs/kubernetes.md shows: the manifests parse, the
server Service is headless, every probe targets the gRPC port the command serves on, and every
container's arguments are a valid gym-metrics command line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.cli import _parser as cli_parser

from _ci import need_module


ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "kubernetes"
NAMESPACE = "gym-metrics"


def manifests() -> dict[tuple[str, str], dict[str, Any]]:
    """(kind, name) -> object, over every file; names are unique per kind."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in need_module("yaml", "PyYAML, in the dev extra").safe_load_all(path.read_text()):
            key = (doc["kind"], doc["metadata"]["name"])
            assert key not in found, f"{path.name}: {key} defined twice"
            found[key] = doc
    return found


def container(obj: dict[str, Any]) -> dict[str, Any]:
    (only,) = obj["spec"]["template"]["spec"]["containers"]
    return only


def flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_every_manifest_parses_and_lives_in_the_namespace() -> None:
    objs = manifests()
    assert ("Namespace", NAMESPACE) in objs
    assert {("Deployment", "math-exact"), ("Service", "math-exact"), ("Job", "collect-math-exact"),
            ("Deployment", "jobs"), ("Service", "jobs")} <= set(objs)  # fmt: skip
    for (kind, name), obj in objs.items():
        if kind != "Namespace":
            assert obj["metadata"].get("namespace") == NAMESPACE, f"{kind}/{name}"


def test_the_server_service_is_headless_and_selects_the_server_pods() -> None:
    objs = manifests()
    service, deployment = objs[("Service", "math-exact")], objs[("Deployment", "math-exact")]
    assert service["spec"]["clusterIP"] == "None" or service["spec"]["clusterIP"] is None
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (port,) = service["spec"]["ports"]
    named = {p["name"]: p["containerPort"] for p in container(deployment)["ports"]}
    assert named[port["targetPort"]] == port["port"] == 50051


@pytest.mark.parametrize("name", ["math-exact", "jobs", "code-tests"])
def test_probes_are_grpc_on_the_port_the_command_serves(name: str) -> None:
    deployment = manifests()[("Deployment", name)]
    box = container(deployment)
    port = int(flag(box["args"], "--port"))
    assert [p["containerPort"] for p in box["ports"]] == [port]
    assert "0.0.0.0" == flag(box["args"], "--host")  # reachable by the kubelet and other pods
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert box[probe]["grpc"]["port"] == port, f"{name}: {probe}"
    grace = float(flag(box["args"], "--grace"))
    pre_stop = box.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", ["sleep", "0"])
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > grace + float(pre_stop[-1])


SANDBOXED = {"code_tests"}
"""Environments that run model code in the sandbox: root in their container (docs/sandbox.md#deploy)."""


def test_every_container_runs_a_valid_command_line_as_the_image_user() -> None:
    """The image's unprivileged user, but for a sandboxed environment's server (root, whose
    runs each get a user of their own; tests/deploy/test_sandbox_deploy.py runs it)."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    uid = re.search(r"--uid (\d+)", dockerfile)
    assert uid is not None
    for (kind, name), obj in manifests().items():
        if kind not in ("Deployment", "Job"):
            continue
        box = container(obj)
        assert box["image"].startswith("gym-metrics:"), f"{kind}/{name}"
        cli_parser().parse_args(box["args"])  # argparse exits (SystemExit) on a bad command line
        if box["args"][:2] == ["serve", *SANDBOXED & {box["args"][1]}]:
            assert box["securityContext"]["runAsUser"] == 0, f"{kind}/{name}"
        else:
            assert obj["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == int(uid.group(1)), f"{kind}/{name}"


def test_collect_dials_every_server_pod_through_dns() -> None:
    objs = manifests()
    args = container(objs[("Job", "collect-math-exact")])["args"]
    service = objs[("Service", "math-exact")]
    port = service["spec"]["ports"][0]["port"]
    assert flag(args, "--server") == f"dns:///math-exact.{NAMESPACE}.svc.cluster.local:{port}"


def test_the_job_server_is_one_replica_on_a_volume() -> None:
    objs = manifests()
    deployment = objs[("Deployment", "jobs")]
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    box, pod = container(deployment), deployment["spec"]["template"]["spec"]
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
    mounts = {m["mountPath"]: m["name"] for m in box["volumeMounts"]}
    db = Path(flag(box["args"], "--db"))
    assert str(db.parent) in mounts and mounts[str(db.parent)] in claims
    assert ("PersistentVolumeClaim", claims[mounts[str(db.parent)]]) in objs
    root = flag(box["args"], "--data-root")
    assert root in mounts and mounts[root] != mounts[str(db.parent)]  # a job may read any file under the data root
    assert not db.is_relative_to(root) and {m["mountPath"]: m.get("readOnly") for m in box["volumeMounts"]}[root] is True


def test_the_doc_shows_every_manifest() -> None:
    doc = (ROOT / "docs" / "kubernetes.md").read_text()
    for path in DEPLOY.glob("*.yaml"):
        if path.name != "namespace.yaml":
            assert f'--8<-- "deploy/kubernetes/{path.name}"' in doc, path.name
        assert f"deploy/kubernetes/{path.name}" in doc
