"""What the tests of embeddings share: the fake embeddings endpoint (a real local HTTP server)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memoryd.testing.fake_embeddings import FakeEmbeddings


@pytest.fixture
def endpoint() -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings() as fake:
        yield fake
