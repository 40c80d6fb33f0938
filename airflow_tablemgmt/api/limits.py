"""Request bodies the API takes: JSON only (else 415) and at most ``MAX_BODY_BYTES`` (else 413).

A pure ASGI middleware on the ``/tablemgmt/v1`` app, so the refusal happens before FastAPI reads or
parses the body, and its answer is a short ``{"detail", "field"}`` (never an echo of the body). The
size is checked against ``Content-Length`` and, for a chunked body, while it arrives.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from airflow_tablemgmt.api.errors import BodyTooLarge

#: Table declarations, catalog settings and dynamic-table queries are small; 1 MiB is far above any.
MAX_BODY_BYTES = 1024 * 1024
_WITH_BODY = {"POST", "PUT", "PATCH"}

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


async def _answer(send: Send, status: int, field: str, detail: str) -> None:
    body = json.dumps({"detail": detail, "field": field}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodyLimits:
    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in _WITH_BODY:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        content_type = headers.get("content-type")
        length = headers.get("content-length")
        if content_type and not _is_json(content_type):
            await _answer(
                send,
                415,
                "content-type",
                f"content-type: {content_type[:100]!r} is not accepted; send application/json",
            )
            return
        if length and length.isdigit() and int(length) > self.max_bytes:
            await _answer(send, 413, "body", self._too_large())
            return
        received = 0
        too_large = started = False

        async def limited_receive() -> Message:
            nonlocal received, too_large
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    too_large = True  # FastAPI turns any error while reading into a 400: answer below
                    raise BodyTooLarge
            return message

        async def limited_send(message: Message) -> None:
            nonlocal started
            if too_large:  # whatever the app answers to the cut-off body, the answer is 413
                if message["type"] == "http.response.start" and not started:
                    started = True
                    await _answer(send, 413, "body", self._too_large())
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, limited_send)
        except BodyTooLarge:
            if not started:
                await _answer(send, 413, "body", self._too_large())

    def _too_large(self) -> str:
        return f"body: larger than {self.max_bytes} bytes, the most this API accepts"
