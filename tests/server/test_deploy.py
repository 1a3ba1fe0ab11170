"""What deploy/ ships, checked without a cluster or containers (make image-test runs the images):
the Kubernetes manifests against Kubernetes' own schemas, and every memoryd.toml there loaded
by memoryd's own settings, so a setting that does not exist or a port that does not match
fails here."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from memoryd.config import Settings, load_settings
from tests.certificates import Authority

ROOT = Path(__file__).resolve().parent.parent.parent
DEPLOY = ROOT / "deploy"
MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
# The oldest Kubernetes the manifests claim (gRPC probes are GA from 1.27), and the newest whose
# schemas kubernetes-validate ships.
VERSIONS = ("1.27", kubernetes_validate.latest_version())
SECRETS = {
    "MEMORYD_ADMIN_TOKEN": "a" * 32,
    "MEMORYD_ADAPTER_TOKEN": "b" * 32,
    "MEMORYD_DSN": "host=db dbname=memoryd user=memoryd",
}


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def containerfile_env(name: str) -> str:
    found = re.search(rf"\b{name}=(\S+)", (ROOT / "Containerfile").read_text())
    assert found, name
    return found.group(1)


IMAGE_UID = int(re.findall(r"--uid (\d+)", (ROOT / "Containerfile").read_text())[0])
HEALTH_PORT = int(containerfile_env("MEMORYD_SERVER_HEALTH_LISTEN").rpartition(":")[2])


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_every_manifest_is_valid_kubernetes(path: Path, version: str) -> None:
    for document in documents(path):
        kubernetes_validate.validate(document, version, strict=True)


def test_the_schema_check_catches_a_misspelt_field() -> None:
    deployment = next(
        d
        for d in documents(DEPLOY / "kubernetes" / "memoryd-postgres.yaml")
        if d["kind"] == "Deployment"
    )
    broken = copy.deepcopy(deployment)
    container = broken["spec"]["template"]["spec"]["containers"][0]
    container["readinessProbe"]["grcp"] = container["readinessProbe"].pop("grpc")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[-1], strict=True)


def workloads() -> list[tuple[str, dict[str, Any], str]]:
    """(file name, pod template, the ConfigMap's memoryd.toml) of each workload."""
    found: list[tuple[str, dict[str, Any], str]] = []
    for path in MANIFESTS:
        docs = documents(path)
        config = next(d for d in docs if d["kind"] == "ConfigMap")["data"]["memoryd.toml"]
        found.extend(
            (path.name, doc["spec"]["template"], config)
            for doc in docs
            if doc["kind"] in ("Deployment", "StatefulSet")
        )
    return found


@pytest.mark.parametrize(("name", "template", "config"), workloads(), ids=lambda v: str(v)[:24])
def test_the_pods_probe_the_health_port_as_the_image_s_user(
    name: str, template: dict[str, Any], config: str
) -> None:
    assert f'health_listen = "0.0.0.0:{HEALTH_PORT}"' in config, name
    spec = template["spec"]
    assert spec["securityContext"]["runAsUser"] == IMAGE_UID
    assert spec["securityContext"]["runAsNonRoot"] is True
    (container,) = spec["containers"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["grpc"] == {"port": HEALTH_PORT}, (name, probe)
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # Every secret the config names comes from a Secret, never a literal.
    named = set(re.findall(r'token_env = "(\w+)"|dsn_env = "(\w+)"', config))
    variables = {v for pair in named for v in pair if v}
    from_secrets = {e["name"] for e in container["env"] if "secretKeyRef" in e.get("valueFrom", {})}
    assert variables <= from_secrets, name
    mounted = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/etc/memoryd", "/var/lib/memoryd", "/tmp"} <= mounted  # noqa: S108 - an emptyDir


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_no_pod_holds_a_service_account_token_or_reaches_the_health_port(path: Path) -> None:
    docs = documents(path)
    (workload,) = (doc for doc in docs if doc["kind"] in ("Deployment", "StatefulSet"))
    template = workload["spec"]["template"]
    assert template["spec"]["automountServiceAccountToken"] is False
    (container,) = template["spec"]["containers"]
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    (policy,) = (doc for doc in docs if doc["kind"] == "NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"] == template["metadata"]["labels"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    opened = {
        ports.get(port["port"], port["port"])
        for rule in policy["spec"]["ingress"]
        for port in rule["ports"]
    }
    assert opened == {ports["grpc"]}
    assert HEALTH_PORT not in opened


def _loads(config: str, tmp_path: Path, tls_folder: str) -> Settings:
    """memoryd's own loader reads `config` (its TLS files replaced by real ones)."""
    pair = Authority(tmp_path).issue("server", server=True)
    text = config.replace(f"{tls_folder}tls.crt", str(pair.cert)).replace(
        f"{tls_folder}tls.key", str(pair.key)
    )
    text = text.replace(f"{tls_folder}memoryd_tls_cert", str(pair.cert)).replace(
        f"{tls_folder}memoryd_tls_key", str(pair.key)
    )
    # Secrets in files of their own (the compose set's), each readable by its owner only.
    for name, value in (
        ("memoryd_admin_token", "a" * 32),
        ("memoryd_adapter_token", "b" * 32),
        ("memoryd_db_password", "c" * 32),
    ):
        secret = tmp_path / name
        secret.write_text(value + "\n")
        secret.chmod(0o400)
        text = text.replace(f"{tls_folder}{name}", str(secret))
    path = tmp_path / "memoryd.toml"
    path.write_text(text)
    settings = load_settings(SECRETS, config_path=str(path), home=str(tmp_path / "home"))
    assert len(settings.auth.tokens) == 2
    assert settings.server.tls_key == str(pair.key)
    return settings


@pytest.mark.parametrize(("name", "template", "config"), workloads(), ids=lambda v: str(v)[:24])
def test_each_manifest_s_config_loads(
    name: str, template: dict[str, Any], config: str, tmp_path: Path
) -> None:
    settings = _loads(config, tmp_path, "/run/memoryd/tls/")
    assert settings.server.health_listen == f"0.0.0.0:{HEALTH_PORT}"


def test_the_compose_set_s_config_loads_and_its_balancer_names_its_replicas(
    tmp_path: Path,
) -> None:
    compose = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())
    settings = _loads((DEPLOY / "compose" / "memoryd.toml").read_text(), tmp_path, "/run/secrets/")
    assert settings.storage.backend == "postgres"
    replicas = sorted(name for name in compose["services"] if name.startswith("memoryd-"))
    assert replicas == ["memoryd-1", "memoryd-2"]
    servers = re.findall(
        r"^\s+server (\S+) (\S+):50051$", (DEPLOY / "compose" / "haproxy.cfg").read_text(), re.M
    )
    assert servers == [(name, name) for name in replicas]
    # A connection to a replica that died hard goes to the other (redispatch).
    balancer = (DEPLOY / "compose" / "haproxy.cfg").read_text()
    assert re.search(r"^\s+option redispatch\b", balancer, re.M)
    assert re.search(r"^\s+retries [1-9]\b", balancer, re.M)
    # No secret in any environment: each is a file mounted under /run/secrets.
    declared = set(compose["secrets"])
    for name, service in compose["services"].items():
        for key, value in service.get("environment", {}).items():
            assert "TOKEN" not in key, (name, key)
            assert "PASSWORD" not in key or key.endswith("_FILE"), (name, key)
            assert "password=" not in str(value), (name, key)
        assert set(service.get("secrets", [])) <= declared, name
    assert settings.storage.password_file.endswith("memoryd_db_password")
    # Hardened: no capability, no privilege gained, a read-only root.
    for name, service in compose["services"].items():
        assert service["cap_drop"] == ["ALL"], name
        assert service["security_opt"] == ["no-new-privileges:true"], name
        assert service["read_only"] is True, name
    # memoryd reaches PostgreSQL over TLS, checking its certificate; PostgreSQL serves TLS and
    # refuses the network without it.
    dsn = compose["services"]["memoryd-1"]["environment"]["MEMORYD_DSN"]
    assert "sslmode=verify-full" in dsn
    assert "sslrootcert=/run/secrets/memoryd_ca" in dsn
    assert "ssl=on" in compose["services"]["postgres"]["command"]
    entrypoint = (DEPLOY / "compose" / "postgres-entrypoint.sh").read_text()
    assert "hostssl all all all scram-sha-256" in entrypoint
    assert "host all" not in entrypoint.replace("hostssl all", "")
