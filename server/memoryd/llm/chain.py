"""The provider chain: one chat-completions call, tried on the primary and then the fallbacks.

Every provider is an OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, llama.cpp) reached with
`openai.AsyncOpenAI` with its own timeout and no hidden retries. A provider that times out, cannot
be reached, answers 429 or answers 5xx hands the call to the next one; any other failure (a 400,
a 401, an answer that is not a chat completion) ends the call, because the next provider would
most likely fail the same way. Every attempt is reported to `on_attempt` (a log line, and a row
the caller commits with its result).

The openai package is imported only when a chain with providers is built: it costs about 0.9 s,
which a server without a provider, and every CLI command, would otherwise pay at start.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from memoryd import log_names
from memoryd.config import ProviderSettings
from memoryd.domain.model_calls import Attempt
from memoryd.log_events import Event
from memoryd.observability import metrics, tracing

if TYPE_CHECKING:
    import openai

log = logging.getLogger("memoryd.llm")


def _sdk() -> ModuleType:
    """The openai package, imported on first use."""
    import openai  # noqa: PLC0415 - see the module's docstring

    return openai


@dataclasses.dataclass(frozen=True, slots=True)
class ToolCall:
    """A function call the model made."""

    name: str
    arguments: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """A model's answer."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    provider: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    # The answer stopped at max_tokens (finish_reason "length"): it may be cut anywhere.
    cut: bool = False


class ModelUnavailableError(Exception):
    """Every provider failed (or none is configured); the message says why."""


class ProviderChain:
    """The configured providers, primary first."""

    def __init__(self, providers: Sequence[ProviderSettings], env: Mapping[str, str]) -> None:
        self.providers = tuple(providers)
        sdk = _sdk() if self.providers else None
        self._clients = [
            sdk.AsyncOpenAI(
                base_url=provider.base_url,
                # Local servers need no key, but the client insists on one; a missing key is
                # reported by the endpoint (401) rather than by a crash here.
                api_key=(env.get(provider.api_key_env) if provider.api_key_env else None) or "none",
                timeout=provider.timeout_seconds,
                max_retries=0,
            )
            for provider in self.providers
            if sdk is not None
        ]

    def missing_keys(self, env: Mapping[str, str]) -> list[str]:
        """`name: $VAR` of providers whose key variable is not set."""
        return [
            f"{p.name}: ${p.api_key_env}"
            for p in self.providers
            if p.api_key_env and not env.get(p.api_key_env)
        ]

    @property
    def configured(self) -> bool:
        """Whether any provider is configured."""
        return bool(self.providers)

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        agent: str,
        session_id: str,
        tools: list[dict[str, Any]] | None = None,
        reasoning_effort: str | None = None,
        max_tokens: int | None = None,
        on_attempt: Callable[[Attempt], None] | None = None,
    ) -> Completion:
        """Call the chain; raises ModelUnavailableError when no provider answered.

        `tools`, `reasoning_effort` and `max_tokens` are optional parameters: an endpoint that
        refuses a request carrying them (HTTP 400: Ollama and llama.cpp refuse some; OpenAI's
        reasoning models refuse max_tokens) is asked once more without them, and the refusal is
        logged.
        """
        if not self.providers:
            raise ModelUnavailableError("no model provider is configured")
        optional: dict[str, Any] = {}
        if tools:
            optional["tools"] = tools
        if reasoning_effort:
            optional["reasoning_effort"] = reasoning_effort
        if max_tokens:
            optional["max_tokens"] = max_tokens
        call = _Call(agent, session_id, on_attempt)
        failures: list[str] = []
        for provider, client in zip(self.providers, self._clients, strict=True):
            request: dict[str, Any] = {"model": provider.model, "messages": messages, **optional}
            try:
                try:
                    return await call.attempt(client, provider, request)
                except _sdk().BadRequestError:
                    if not optional:
                        raise
                    log.warning(
                        "%s refused the request with %s (HTTP 400); asking again without",
                        provider.name,
                        ", ".join(sorted(optional)),
                        extra={
                            "event": Event.MODEL_PARAMETER_REFUSED,
                            "provider": provider.name,
                            "parameters": sorted(optional),
                        },
                    )
                    plain = {key: value for key, value in request.items() if key not in optional}
                    return await call.attempt(client, provider, plain)
            except Exception as error:
                failures.append(f"{provider.name}: {_failure(error)[1]}")
                if _falls_back(error):
                    continue
                raise ModelUnavailableError("; ".join(failures)) from error
        raise ModelUnavailableError("; ".join(failures))

    async def close(self) -> None:
        """Close the HTTP clients."""
        for client in self._clients:
            await client.close()


class _Call:
    """One call of the chain: each request to a provider is an attempt, recorded."""

    def __init__(
        self, agent: str, session_id: str, on_attempt: Callable[[Attempt], None] | None
    ) -> None:
        self._agent = agent
        self._session_id = session_id
        self._on_attempt = on_attempt

    async def attempt(
        self, client: openai.AsyncOpenAI, provider: ProviderSettings, request: dict[str, Any]
    ) -> Completion:
        """One request; its attempt is recorded whether it answers or raises (a log line, the
        metrics, and with tracing on a `chat` span)."""
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider.name,
            "gen_ai.request.model": provider.model,
            "gen_ai.agent.name": self._agent,
        }
        with tracing.span(f"chat {provider.model}", attributes, client=True) as span:
            started = time.perf_counter()
            try:
                response = await client.chat.completions.create(**request)
                completion = _completion(response, provider, started)
            except Exception as error:
                latency_ms = round((time.perf_counter() - started) * 1000, 3)
                self._record(provider, latency_ms, error=error)
                tracing.annotate(span, {"error.type": _failure(error)[0]})
                raise
            self._record(provider, completion.latency_ms, completion=completion)
            tracing.annotate(
                span,
                {
                    "gen_ai.response.model": completion.model,
                    "gen_ai.usage.input_tokens": completion.prompt_tokens,
                    "gen_ai.usage.output_tokens": completion.completion_tokens,
                },
            )
        return completion

    def _record(
        self,
        provider: ProviderSettings,
        latency_ms: float,
        *,
        completion: Completion | None = None,
        error: Exception | None = None,
    ) -> None:
        outcome, described = ("ok", None) if error is None else _failure(error)
        _record(
            self._on_attempt,
            Attempt(
                agent=self._agent,
                session_id=self._session_id,
                provider=provider.name,
                model=provider.model,
                latency_ms=latency_ms,
                prompt_tokens=completion.prompt_tokens if completion is not None else 0,
                completion_tokens=completion.completion_tokens if completion is not None else 0,
                error=described,
            ),
            outcome,
        )


def _record(
    on_attempt: Callable[[Attempt], None] | None, attempt: Attempt, outcome: str = "ok"
) -> None:
    session = log_names.name(attempt.session_id)
    labels = (attempt.provider, attempt.model, attempt.agent)
    metrics.MODEL_CALLS.labels(*labels, outcome).inc()
    metrics.MODEL_SECONDS.labels(*labels).observe(attempt.latency_ms / 1000)
    if attempt.prompt_tokens:
        metrics.MODEL_TOKENS.labels(*labels, "input").inc(attempt.prompt_tokens)
    if attempt.completion_tokens:
        metrics.MODEL_TOKENS.labels(*labels, "output").inc(attempt.completion_tokens)
    log.info(
        "model call %s via %s: %s",
        session,
        attempt.provider,
        attempt.error or "ok",
        extra={"event": Event.MODEL_CALL, **dataclasses.asdict(attempt), "session_id": session},
    )
    if on_attempt is not None:
        on_attempt(attempt)


def _falls_back(error: Exception) -> bool:
    sdk = _sdk()
    if isinstance(error, sdk.APITimeoutError | sdk.APIConnectionError | sdk.RateLimitError):
        return True
    return isinstance(error, sdk.APIStatusError) and error.status_code >= 500


def _failure(error: Exception) -> tuple[str, str]:
    """A failed request's kind (one of a bounded set of names, for metrics and spans) and its
    description (for logs, review runs and error messages)."""
    sdk = _sdk()
    if isinstance(error, sdk.APITimeoutError):
        return "timeout", "timed out"
    if isinstance(error, sdk.APIConnectionError):
        return "connection", "cannot connect"
    if isinstance(error, sdk.APIStatusError):
        return "http_error", f"HTTP {error.status_code}"
    return "invalid_answer", f"invalid answer ({type(error).__name__})"


def _completion(response: Any, provider: ProviderSettings, started: float) -> Completion:
    choices = getattr(response, "choices", None)
    if not choices:
        message = "the answer has no choices"
        raise ValueError(message)
    message = choices[0].message
    cut = getattr(choices[0], "finish_reason", None) == "length"
    calls = tuple(
        ToolCall(call.function.name, call.function.arguments or "{}")
        for call in (message.tool_calls or [])
        if getattr(call, "function", None) is not None
    )
    usage = getattr(response, "usage", None)
    return Completion(
        text=message.content or "",
        tool_calls=calls,
        provider=provider.name,
        model=provider.model,
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        latency_ms=round((time.perf_counter() - started) * 1000, 3),
        cut=cut,
    )
