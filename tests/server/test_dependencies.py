"""Dependencies whose internals memoryd uses are pinned to the versions its tests passed on."""

from __future__ import annotations

import importlib.metadata
import inspect
import tomllib
from typing import Any, cast

from packaging.requirements import Requirement

from tests.conftest import ROOT


def _requirement(name: str) -> Requirement:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (found,) = [
        requirement
        for requirement in map(Requirement, project["dependencies"])
        if requirement.name == name
    ]
    return found


def test_uvicorn_is_held_to_the_versions_the_listener_was_tested_on() -> None:
    """memoryd.web.listener drives uvicorn's h11 protocol itself: the requirement has an upper
    bound, and the installed uvicorn is within it."""
    requirement = _requirement("uvicorn")
    assert any(spec.operator == "<" for spec in requirement.specifier), requirement
    assert requirement.specifier.contains(importlib.metadata.version("uvicorn")), requirement


def test_the_uvicorn_internals_the_listener_uses_are_there() -> None:
    """What the listener builds and reads of uvicorn's (besides what its tests exercise)."""
    import uvicorn.server  # noqa: PLC0415
    from uvicorn.protocols.http.h11_impl import H11Protocol  # noqa: PLC0415

    assert hasattr(uvicorn.server, "ServerState")
    assert hasattr(uvicorn.server.ServerState(), "default_headers")
    parameters = inspect.signature(H11Protocol.__init__).parameters
    for name in ("config", "server_state", "app_state", "_loop"):
        assert name in parameters, name
    config = uvicorn.Config(app=cast("Any", None), http="h11", lifespan="off")  # never served
    config.load()
    assert config.http_protocol_class is H11Protocol
    assert hasattr(config, "encoded_headers")
    assert hasattr(config, "lifespan_class")
