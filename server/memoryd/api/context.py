"""The servicer context every RPC handler receives (one alias for all of api/)."""

from __future__ import annotations

from typing import Any

import grpc

Context = grpc.aio.ServicerContext[Any, Any]
