"""Ports: why one could not be had (gRPC says only "Failed to bind"), and one held for the
workers of `memoryd serve --workers N` to share (SO_REUSEPORT)."""

from __future__ import annotations

import dataclasses
import errno
import socket

from memoryd.errors import StartupError


def bind_failure(listen: str) -> str:
    """Why gRPC could not bind `listen` (it says only "Failed to bind"), found by binding the
    same address with a plain socket."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"  # noqa: S104 - only a probe, closed at once
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((host, int(port)))
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            return (
                "address already in use (another memoryd or another program listens there; "
                "choose another address with --listen HOST:PORT, or make serve PORT=...)"
            )
        return error.strerror or str(error)
    except ValueError as error:
        return str(error)
    return "gRPC could not bind it (set GRPC_VERBOSITY=debug to see why)"


@dataclasses.dataclass(frozen=True, slots=True)
class HeldPort:
    """A port bound (never listening) for the workers to share, on each of its addresses."""

    sockets: list[socket.socket]
    host: str
    port: int

    @property
    def address(self) -> str:
        """HOST:PORT."""
        return f"{self.host}:{self.port}"


def hold_port(listen: str) -> HeldPort:
    """Refuse an address something listens on; then bind it with SO_REUSEPORT (never listening)
    for the workers to share. Port 0 is chosen here, once, for every worker."""
    host, _, port_text = listen.rpartition(":")
    bare = host.strip("[]") or "0.0.0.0"  # noqa: S104 - the operator's own address
    port = int(port_text)
    try:
        found = socket.getaddrinfo(bare, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise StartupError(f"cannot listen on {listen}: {error.strerror}") from None
    addresses = list(dict.fromkeys((family, str(address[0])) for family, *_, address in found))
    held: list[socket.socket] = []
    try:
        for family, address in addresses:
            # Anything bound there without SO_REUSEPORT, or listening (another memoryd, another
            # supervisor's workers), makes this bind fail: the address is taken.
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                _bind(probe, family, address, port, listen)
                port = probe.getsockname()[1]
            sock = socket.socket(family, socket.SOCK_STREAM)
            held.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            _bind(sock, family, address, port, listen)
    except BaseException:
        for sock in held:
            sock.close()
        raise
    return HeldPort(held, host, port)


def _bind(sock: socket.socket, family: int, address: str, port: int, listen: str) -> None:
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    try:
        sock.bind((address, port))
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise StartupError(
                f"cannot listen on {listen}: address already in use (another memoryd or another "
                "program listens there; choose another address with --listen HOST:PORT)"
            ) from None
        raise StartupError(f"cannot listen on {listen}: {error.strerror}") from None
