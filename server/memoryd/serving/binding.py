"""Why a port could not be had: gRPC says only "Failed to bind"."""

from __future__ import annotations

import errno
import socket


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
