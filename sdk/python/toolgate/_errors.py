"""The SDK's one exception type, carrying the server's stable error code."""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Optional

__all__ = ["ToolgateError", "error_from_result", "error_from_http", "error_from_rpc"]

_CODE_TEXT = re.compile(r"^([A-Z][A-Z0-9_]*): (.*)$", re.DOTALL)
_RPC_PREFIX = re.compile(r"^(MCP error -?\d+: )+")

#: JSON-RPC error code for invalid params (the server's "Unknown tool").
_INVALID_PARAMS = -32602


class ToolgateError(Exception):
    """A failure with a stable UPPER_SNAKE ``code``.

    Server codes come through unchanged (``TOOL_NOT_FOUND``,
    ``TOOL_INPUT_INVALID``, ``PLUGIN_REQUEST_FAILED``, ``CIRCUIT_OPEN``,
    ``UNAUTHORIZED``, ...). The SDK adds ``USAGE`` (the SDK was used wrongly),
    ``CONNECTION_FAILED``, ``REQUEST_TIMEOUT``, ``HTTP_ERROR`` (an HTTP error
    without a toolgate error body; ``details["status"]``) and ``MCP_ERROR``
    (another JSON-RPC error; ``details["rpc_code"]``).
    """

    code: str
    message: str
    details: Any

    def __init__(self, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        return f"ToolgateError({self.code!r}, {self.message!r}, details={self.details!r})"


def error_from_result(result: Mapping[str, Any]) -> ToolgateError:
    """The error of a tool result with ``isError``.

    Reads ``structuredContent.error`` when present, else the
    ``<CODE>: <message>`` text of the first content item.
    """
    structured = result.get("structuredContent")
    error = structured.get("error") if isinstance(structured, Mapping) else None
    if isinstance(error, Mapping) and isinstance(error.get("code"), str):
        message = error.get("message")
        return ToolgateError(
            error["code"],
            message if isinstance(message, str) else error["code"],
            error.get("details"),
        )
    content = result.get("content")
    first = content[0] if isinstance(content, list) and content else None
    text = first.get("text") if isinstance(first, Mapping) else None
    if isinstance(text, str):
        match = _CODE_TEXT.match(text)
        if match:
            return ToolgateError(match.group(1), match.group(2))
    return ToolgateError("TOOL_EXECUTION_FAILED", text or "The tool call failed")


def error_from_rpc(error: Mapping[str, Any]) -> ToolgateError:
    """The error of a JSON-RPC error object (``{code, message, data?}``)."""
    rpc_code = error.get("code")
    message = _RPC_PREFIX.sub("", str(error.get("message", "JSON-RPC error")))
    if rpc_code == _INVALID_PARAMS and message.startswith("Unknown tool: "):
        tool = message[len("Unknown tool: ") :]
        return ToolgateError("TOOL_NOT_FOUND", f"Unknown tool {json.dumps(tool)}", {"tool": tool})
    return ToolgateError("MCP_ERROR", message, {"rpc_code": rpc_code, "data": error.get("data")})


def error_from_http(status: int, body: str) -> ToolgateError:
    """The error of a toolgate HTTP error body, or ``HTTP_ERROR`` naming the status."""
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        parsed = None
    error: Optional[Any] = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict):
        code, message = error.get("code"), error.get("message")
        if isinstance(code, str) and isinstance(message, str):
            return ToolgateError(code, message, error.get("details"))
        if isinstance(message, str):
            return ToolgateError("HTTP_ERROR", f"HTTP {status}: {message}", {"status": status})
    suffix = f": {body[:200]}" if body else ""
    return ToolgateError("HTTP_ERROR", f"HTTP {status}{suffix}", {"status": status})
