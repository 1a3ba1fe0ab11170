"""Server reflection that also resolves method names.

grpcio-reflection asks the protobuf descriptor pool for the file containing a symbol, and the
pool does not index methods: `grpcurl describe memoryd.v1.MemoryService.AppendMessages` and
load tools that look a method up (ghz) fail with "Symbol not found". This pool answers a method
name with its service's file and passes everything else to the default pool.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor, descriptor_pool


class MethodAwarePool:
    """The default descriptor pool, plus lookup of `package.Service.Method` symbols."""

    def __init__(self, pool: descriptor_pool.DescriptorPool | None = None) -> None:
        self._pool = pool or descriptor_pool.Default()

    def FindFileContainingSymbol(self, symbol: str) -> descriptor.FileDescriptor:  # noqa: N802
        """The file declaring `symbol`, which may be a method of a service."""
        try:
            return self._pool.FindFileContainingSymbol(symbol)
        except KeyError:
            service_name, _, method = symbol.rpartition(".")
            try:
                service = self._pool.FindServiceByName(service_name)
            except KeyError:
                service = None
            if service is None or method not in service.methods_by_name:
                raise KeyError(f"Couldn't find symbol {symbol}") from None
            return service.file

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)
