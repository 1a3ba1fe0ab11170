"""Tools whose arguments are checked as an API's would be: an argument a tool does not take is
refused (never dropped), a scope the server has no default for is required, and a bad value is
refused in one line a model can act on.

The SDK's tools accept and ignore unknown arguments (`owner` passed to a tool without one acted
on another user's memory, silently), and report a bad value with pydantic's full text and an
address of its documentation. `StrictTool` is the SDK's `Tool` with those three changed; its
JSON schema says the same (`additionalProperties: false`, the required scopes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import mcp_types
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from pydantic import ValidationError


class StrictTool(Tool):
    """A tool that refuses unknown arguments and requires its scopes (see the module)."""

    # Arguments that must be given and not empty (a scope without a default).
    demanded: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls,
        function: Callable[..., Any],
        *,
        annotations: mcp_types.ToolAnnotations,
        demanded: Iterable[str] = (),
    ) -> StrictTool:
        """The tool of `function` (its name, docstring and typed arguments), with `demanded`
        arguments required."""
        tool = cls.from_function(function, annotations=annotations, structured_output=True)
        schema = dict(tool.parameters)
        wanted = frozenset(demanded) & frozenset(schema.get("properties", {}))
        schema["required"] = sorted(set(schema.get("required", [])) | wanted)
        schema["additionalProperties"] = False
        strict = tool.model_copy(update={"parameters": schema, "demanded": wanted})
        assert isinstance(strict, StrictTool)  # noqa: S101 - from_function made one of this class
        return strict

    async def run(
        self,
        arguments: dict[str, Any],
        context: Any,
        convert_result: bool = False,  # noqa: FBT001, FBT002 - the SDK's signature
    ) -> Any:
        known = set(self.parameters.get("properties", {}))
        unknown = sorted(set(arguments) - known)
        if unknown:
            raise ToolError(
                f"{self.name} takes no argument {unknown[0]!r}; its arguments are "
                f"{', '.join(sorted(known))}"
            )
        missing = [name for name in sorted(self.demanded) if not arguments.get(name)]
        if missing:
            properties = self.parameters["properties"]
            raise ToolError(
                "; ".join(
                    f"{name} is required: {properties[name].get('description', '')}".rstrip(": ")
                    for name in missing
                )
            )
        try:
            self.fn_metadata.validate_arguments(arguments)
        except ValidationError as error:
            raise ToolError(concise(error)) from None
        return await super().run(arguments, context, convert_result)


def concise(error: ValidationError) -> str:
    """A validation error in one line: each argument and what is wrong with it."""
    said = []
    for problem in error.errors(include_url=False):
        where = ".".join(str(part) for part in problem["loc"]) or "arguments"
        said.append(f"{where}: {problem['msg']}")
    return "; ".join(said)
