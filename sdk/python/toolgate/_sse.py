"""An incremental Server-Sent Events parser (WHATWG HTML, event stream format)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

__all__ = ["SseMessage", "SseParser"]


@dataclass(frozen=True)
class SseMessage:
    """One dispatched SSE event."""

    #: ``event:`` field; ``message`` when absent.
    event: str
    #: ``data:`` lines joined with ``\\n``.
    data: str
    #: The last event id seen so far (of this or an earlier event).
    last_event_id: str


class SseParser:
    """Feed decoded text with :meth:`push`; get the events it completed.

    Handles CRLF, CR and LF line ends split across chunks, comments,
    multi-line data and ``retry:``.
    """

    def __init__(self, last_event_id: str = "") -> None:
        self._buffer = ""
        self._event = ""
        self._data: List[str] = []
        self._saw_data = False
        self._pending_cr = False
        self.last_event_id = last_event_id
        #: The last ``retry:`` value in milliseconds, if the server sent one.
        self.retry_ms: Optional[int] = None

    def push(self, text: str) -> List[SseMessage]:
        """Feeds decoded text; returns the events it completed."""
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]
        self._pending_cr = False
        self._buffer += text
        out: List[SseMessage] = []
        buffer = self._buffer
        start = 0
        i = 0
        while i < len(buffer):
            char = buffer[i]
            if char == "\n" or char == "\r":
                self._line(buffer[start:i], out)
                if char == "\r":
                    if i + 1 == len(buffer):
                        self._pending_cr = True
                    elif buffer[i + 1] == "\n":
                        i += 1
                start = i + 1
            i += 1
        self._buffer = buffer[start:]
        return out

    def _line(self, line: str, out: List[SseMessage]) -> None:
        if line == "":
            if self._saw_data:
                out.append(
                    SseMessage(self._event or "message", "\n".join(self._data), self.last_event_id)
                )
            self._event = ""
            self._data = []
            self._saw_data = False
            return
        if line.startswith(":"):
            return
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
            self._saw_data = True
        elif field == "id":
            if "\0" not in value:
                self.last_event_id = value
        elif field == "retry":
            if value.isascii() and value.isdigit():
                self.retry_ms = int(value)
