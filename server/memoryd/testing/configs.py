"""Configs of test servers: the fake models as providers, with review and compaction settings."""

from __future__ import annotations

from memoryd.testing.fake_embeddings import FakeEmbeddings
from memoryd.testing.fake_model import FakeModel


def review_config(
    *models: FakeModel,
    timeout: float = 5.0,
    compaction: dict[str, object] | None = None,
    **memory: object,
) -> str:
    """A config with the fake models as providers (in order), [memoryd.memory] settings and
    [memoryd.compaction] settings."""
    memory.setdefault("scheduler_tick_seconds", 0.1)
    lines = ["[memoryd.memory]"]
    lines += [_setting(key, value) for key, value in memory.items()]
    if compaction:
        lines += ["", "[memoryd.compaction]"]
        lines += [_setting(key, value) for key, value in compaction.items()]
    for index, model in enumerate(models):
        lines += [
            "",
            "[[memoryd.providers]]",
            f'name = "fake-{index}"',
            f'base_url = "{model.base_url}"',
            f'model = "fake-model-{index}"',
            f"timeout_seconds = {timeout}",
        ]
    return "\n".join(lines) + "\n"


def _setting(key: str, value: object) -> str:
    if isinstance(value, bool):
        return f"{key} = {str(value).lower()}"
    return f"{key} = {value!r}".replace("'", '"')


def embedding_config(
    endpoint: FakeEmbeddings, model: str = "fake-embed", **search: str | float
) -> str:
    """A config whose embeddings come from the fake endpoint ("provider"), with more
    [memoryd.search] settings."""
    lines = [
        "[memoryd.search]",
        'embeddings = "provider"',
        f'embedding_model = "{model}"',
        *(_setting(key, value) for key, value in search.items()),
        "",
        "[[memoryd.providers]]",
        'name = "vectors"',
        f'base_url = "{endpoint.base_url}"',
        'model = "chat-model-unused"',
        "timeout_seconds = 5",
    ]
    return "\n".join(lines) + "\n"
