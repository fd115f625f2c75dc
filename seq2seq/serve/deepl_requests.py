"""Reading a DeepL API request: its parameters (query string, JSON or form body) and its key
(``Authorization: DeepL-Auth-Key KEY``, or an ``auth_key`` parameter as older clients send
it), checked against ``--api-keys`` when the server has them."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

from fastapi import Request

from seq2seq.serve.handling import ServerSettings
from seq2seq.serve.protocol import ApiError

# A request's parameters, once its key has been checked (``KeyedArguments``).
Arguments = Callable[[Request], Awaitable[dict[str, Any]]]


class KeyedArguments:
    """Every DeepL route's first step: the key checked, then the parameters read."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings

    async def __call__(self, request: Request) -> dict[str, Any]:
        """The request's parameters, once its key has been checked."""
        args = await read_arguments(request)
        authorize_deepl(self.settings, deepl_key(request, args))
        return args


async def read_arguments(request: Request) -> dict[str, Any]:
    """Parameters from the query string and a JSON or form body (DeepL's clients send a body
    with GET too); a form parameter given more than once (``text``) becomes a list."""
    pairs = list(request.query_params.multi_items())
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = await request.body()
    if kind == "application/json":
        return {**_grouped(pairs), **_json_object(body)}
    if kind == "multipart/form-data":
        try:
            form = await request.form()
        except Exception as error:  # a broken multipart body is the client's mistake
            raise ApiError(400, f"Invalid request: malformed form body ({error})") from None
        pairs += [(name, value) for name, value in form.multi_items() if isinstance(value, str)]
    elif body:
        pairs += parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    return _grouped(pairs)


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError as error:
        raise ApiError(400, f"Invalid request: malformed JSON body ({error})") from None
    if not isinstance(data, dict):
        raise ApiError(400, "Invalid request: the JSON body must be an object")
    return data


def _grouped(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for name, value in pairs:
        if name not in args:
            args[name] = value
        elif isinstance(args[name], list):
            args[name].append(value)
        else:
            args[name] = [args[name], value]
    return args


def deepl_key(request: Request, args: dict[str, Any]) -> str | None:
    """The key of ``Authorization: DeepL-Auth-Key KEY``, else of an ``auth_key`` parameter."""
    scheme, _, key = request.headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() == "deepl-auth-key" and key.strip():
        return key.strip()
    given = args.get("auth_key")
    return given if isinstance(given, str) and given else None


def authorize_deepl(settings: ServerSettings, key: str | None) -> None:
    """With ``--api-keys``, a listed key; without, any key or none."""
    if settings.api_keys is None:
        return
    if key is None:
        raise ApiError(403, "Missing auth key: send the header 'Authorization: DeepL-Auth-Key KEY'")
    if key not in settings.api_keys:
        raise ApiError(403, "Invalid auth key")
