"""Reading a server's /metrics in tests: where its listeners are, a scrape, and its samples
parsed by prometheus-client's own parser."""

from __future__ import annotations

import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from memoryd.testing.server_process import ServerProcess


def listening(server: ServerProcess, name: str) -> str:
    """Where the server's `name` listener ("http", "metrics") is, from its serving event."""
    return str(server.events("serving")[-1][name])


def scrape(address: str, token: str | None = None) -> tuple[int, str]:
    """GET /metrics: (HTTP status, body)."""
    request = urllib.request.Request(f"http://{address}/metrics")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - loopback
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


class Samples:
    """A scrape parsed by prometheus-client: sample values by name and labels."""

    def __init__(self, text: str) -> None:
        self.families = list(text_string_to_metric_families(text))
        self.samples = [sample for family in self.families for sample in family.samples]

    def value(self, name: str, **labels: str) -> float:
        """The sum of the samples of `name` whose labels include `labels` (0 when none)."""
        return sum(
            sample.value
            for sample in self.samples
            if sample.name == name and labels.items() <= sample.labels.items()
        )

    def label_values(self) -> set[str]:
        return {value for sample in self.samples for value in sample.labels.values()}
