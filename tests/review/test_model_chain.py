"""The provider chain against the shipped fake chat-completions server (a real HTTP server)."""

from __future__ import annotations

import pytest

from memoryd.config import ProviderSettings
from memoryd.domain.model_calls import Attempt
from memoryd.llm.chain import Completion, ModelUnavailableError, ProviderChain
from memoryd.testing.fake_model import FakeModel, ToolCall


def provider(name: str, model: FakeModel, timeout: float = 5.0) -> ProviderSettings:
    return ProviderSettings(
        name=name, base_url=model.base_url, model=f"{name}-model", timeout_seconds=timeout
    )


async def call(chain: ProviderChain, attempts: list[Attempt] | None = None) -> Completion:
    return await chain.complete(
        [{"role": "user", "content": "hi"}],
        agent="memory_reviewer",
        session_id="s-1",
        on_attempt=attempts.append if attempts is not None else None,
    )


@pytest.mark.slow  # waits out real timeouts
async def test_fallbacks_on_5xx_429_timeouts_and_unreachable_servers() -> None:
    with FakeModel() as primary, FakeModel() as secondary:
        primary.fail(503)
        primary.fail(429)
        primary.reply("late", delay_seconds=2)
        secondary.reply("one")
        secondary.reply("two")
        secondary.reply("three")
        chain = ProviderChain(
            [provider("primary", primary, timeout=0.5), provider("secondary", secondary)], {}
        )
        attempts: list[Attempt] = []
        for expected in ("one", "two", "three"):
            completion = await call(chain, attempts)
            assert completion.text == expected
            assert completion.provider == "secondary"
        assert [(a.provider, a.error) for a in attempts] == [
            ("primary", "HTTP 503"),
            ("secondary", None),
            ("primary", "HTTP 429"),
            ("secondary", None),
            ("primary", "timed out"),
            ("secondary", None),
        ]
        assert attempts[1].prompt_tokens == 100
        assert attempts[1].completion_tokens == 20
        assert secondary.requests[0]["model"] == "secondary-model"
        await chain.close()


async def test_a_client_error_or_garbage_does_not_fall_back() -> None:
    with FakeModel() as primary, FakeModel() as secondary:
        primary.fail(400)
        primary.garbage()
        chain = ProviderChain([provider("primary", primary), provider("secondary", secondary)], {})
        with pytest.raises(ModelUnavailableError, match="primary: HTTP 400"):
            await call(chain)
        with pytest.raises(ModelUnavailableError, match="primary: invalid answer"):
            await call(chain)
        assert secondary.requests == []
        await chain.close()


async def test_tool_calls_and_keys_from_the_environment() -> None:
    with FakeModel() as model:
        model.reply(tool_calls=[ToolCall("memory_add", {"target": "user", "value": "x"})])
        settings = ProviderSettings(
            name="p", base_url=model.base_url, model="m", api_key_env="MY_KEY"
        )
        chain = ProviderChain([settings], {"MY_KEY": "secret"})
        completion = await call(chain)
        assert completion.tool_calls[0].name == "memory_add"
        assert '"target": "user"' in completion.tool_calls[0].arguments
        await chain.close()


async def test_every_provider_down_and_no_provider() -> None:
    with FakeModel() as model:
        dead = ProviderSettings(
            name="dead", base_url="http://127.0.0.1:9/v1", model="m", timeout_seconds=1
        )
        model.fail(500)
        chain = ProviderChain([dead, provider("flaky", model)], {})
        with pytest.raises(ModelUnavailableError, match="dead: cannot connect; flaky: HTTP 500"):
            await call(chain)
        await chain.close()
    with pytest.raises(ModelUnavailableError, match="no model provider is configured"):
        await call(ProviderChain([], {}))


async def test_an_endpoint_that_refuses_tools_or_reasoning_effort_is_asked_again_without() -> None:
    tools = [{"type": "function", "function": {"name": "memory_add", "parameters": {}}}]
    with FakeModel(refuse=frozenset({"tools"})) as model:
        model.reply("Nothing to save.")
        chain = ProviderChain([provider("local", model)], {})
        attempts: list[Attempt] = []
        completion = await chain.complete(
            [{"role": "user", "content": "hi"}],
            agent="memory_reviewer",
            session_id="s-1",
            tools=tools,
            reasoning_effort="medium",
            on_attempt=attempts.append,
        )
        assert completion.text == "Nothing to save."
        refused, plain = model.requests
        assert (refused["tools"], refused["reasoning_effort"]) == (tools, "medium")
        assert "tools" not in plain
        assert "reasoning_effort" not in plain
        assert [a.error for a in attempts] == ["HTTP 400", None]
        # A request without optional parameters that gets a 400 is not asked again.
        model.refuse = frozenset({"messages"})
        with pytest.raises(ModelUnavailableError, match="local: HTTP 400"):
            await call(chain)
        assert len(model.requests) == 3
        await chain.close()
