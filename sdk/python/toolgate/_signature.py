"""Verifies toolgate's webhook signatures on the receiving side."""

from __future__ import annotations

import hashlib
import hmac
from typing import Optional, Union

__all__ = ["verify_signature"]

_PREFIX = "sha256="
_HEX = frozenset("0123456789abcdef")


def verify_signature(
    secret: Union[str, bytes],
    raw_body: Union[bytes, bytearray, memoryview, str],
    header: Optional[str],
) -> bool:
    """Whether ``X-Service-Signature`` matches the raw request body.

    The header is ``sha256=`` followed by the lowercase hex HMAC-SHA256 of the
    body bytes exactly as sent, keyed with the webhook's secret. Verify
    before parsing, against the bytes as received (never re-serialized JSON);
    the comparison is constant-time (:func:`hmac.compare_digest`).

    :param secret: The webhook's signing secret (``--secret``).
    :param raw_body: The body as received: bytes, or its exact text (UTF-8).
    :param header: The ``X-Service-Signature`` value; ``None`` never verifies.
    :returns: ``True`` only for a well-formed header that matches.

    Example::

        raw = await request.body()
        if not verify_signature(secret, raw, request.headers.get("X-Service-Signature")):
            return Response(status_code=401)
        event = json.loads(raw)
    """
    if not isinstance(header, str):
        return False
    value = header.strip()
    if not value.startswith(_PREFIX):
        return False
    digest = value[len(_PREFIX) :].lower()
    if len(digest) != 64 or not set(digest) <= _HEX:
        return False
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    body = raw_body.encode("utf-8") if isinstance(raw_body, str) else bytes(raw_body)
    expected = hmac.new(key, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, digest)
