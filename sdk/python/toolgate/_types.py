"""Tools, results and events as the toolgate server sends them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple, Union

__all__ = [
    "Event",
    "EventHandler",
    "SERVER_EVENT_TYPES",
    "EVENT_NAMES",
    "Tool",
    "ToolResult",
]

#: The 8 event types the server emits.
SERVER_EVENT_TYPES: Tuple[str, ...] = (
    "tool.called",
    "tool.failed",
    "plugin.ready",
    "plugin.error",
    "circuit.opened",
    "circuit.closed",
    "audit.written",
    "server.started",
)

#: What :meth:`toolgate.Client.on` accepts: the 8 types, ``tool.complete`` and ``*``.
EVENT_NAMES: Tuple[str, ...] = SERVER_EVENT_TYPES + ("tool.complete", "*")


@dataclass(frozen=True)
class Tool:
    """A tool on offer."""

    #: Unique tool name, e.g. ``http_request``.
    name: str
    #: What the tool does.
    description: str = ""
    #: JSON Schema of the arguments object.
    input_schema: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolResult:
    """A successful tool call's result (MCP ``CallToolResult``)."""

    #: Items ``{"type": "text", "text": <the output as JSON text>}``.
    content: List[Dict[str, Any]]
    #: The output object.
    structured_content: Optional[Dict[str, Any]] = None
    #: Never true here: failed calls raise :class:`toolgate.ToolgateError`.
    is_error: bool = False

    @property
    def text(self) -> str:
        """The text of the content items, joined with newlines."""
        return "\n".join(item["text"] for item in self.content if isinstance(item.get("text"), str))


@dataclass(frozen=True)
class Event:
    """An event envelope: ``id``, ``type``, ``timestamp`` and ``data``.

    ``tool.complete`` (SDK only) fires after every tool call made by any
    client: ``data["tool"]`` names the tool and ``data["ok"]`` tells success.
    It carries every field of the ``tool.called`` (``ok`` true: ``latency_ms``,
    ``output``, ``session_id``, ...) or ``tool.failed`` (``ok`` false:
    ``error_code``, ``error``, ``attempt``, ``circuit_state``, ...) event it
    was built from, and that event's id and timestamp.
    """

    #: ``evt_...``; the same as the webhook delivery id.
    id: str
    #: One of the 8 event types, or ``tool.complete``.
    type: str
    #: ISO 8601 UTC with milliseconds.
    timestamp: str
    #: Fields depending on the type.
    data: Dict[str, Any]


#: A handler passed to :meth:`toolgate.Client.on`: a function or a coroutine function.
EventHandler = Callable[[Event], Union[None, Awaitable[None]]]
