"""Reading the JSON of scheduler calls: one helper per field kind, errors that name the field's path.

Every helper takes the raw value and its path in the call (``accept.offer_ids[1]``) and returns the value
or raises :class:`BadCallError` naming the path, the bad value and what is allowed. The HTTP status of each
error is its :attr:`CallError.status`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from elastic.errors import ElasticError

__all__ = [
    "DEFAULT_REFUSE_SECONDS",
    "MAX_BODY",
    "BadCallError",
    "CallError",
    "ForbiddenError",
    "NotSubscribedError",
    "UnsupportedCallError",
    "id_value",
    "items",
    "json_object",
    "number",
    "labels",
    "obj",
    "offer_ids",
    "optional_string",
    "refuse_seconds",
    "seconds",
    "shown",
    "string",
]

MAX_BODY = 8 * 2**20
"""Largest call body (bytes) parsed; a larger one is refused (HTTP 413 before reading, else 400)."""

MAX_DEPTH = 32
"""Deepest nesting of JSON arrays and objects accepted in a call (Mesos' calls need fewer than 12 levels)."""

DEFAULT_REFUSE_SECONDS = 5.0
"""``filters.refuse_seconds`` when a call gives none (Mesos' default)."""


class CallError(ElasticError):
    """A scheduler call that cannot be served; :attr:`status` is the HTTP status to answer with."""

    status = 400


class BadCallError(CallError, ValueError):
    """A malformed call (HTTP 400).

    Parameters
    ----------
    field : str
        Path of the bad field (``""`` for the body as a whole).
    message : str
        What is wrong and what is allowed.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class UnsupportedCallError(CallError):
    """A Mesos call or operation this front door does not serve (HTTP 501), named in the message."""

    status = 501

    def __init__(self, call: str, supported: tuple[str, ...]) -> None:
        self.call = call
        super().__init__(f"{call} is not supported by this front door; supported: {', '.join(supported)}")


class ForbiddenError(CallError):
    """A call the framework may not make (HTTP 403): another principal's framework, an id never issued."""

    status = 403


class NotSubscribedError(ForbiddenError):
    """A call from a framework that is not subscribed on this stream (HTTP 403)."""


_RECORDIO = re.compile(rb"\s*\d+\n")


def json_object(body: bytes) -> dict[str, Any]:
    """Return the body as one JSON object (not RecordIO, not another JSON value)."""
    if len(body) > MAX_BODY:
        raise BadCallError("", f"the body has {len(body)} bytes, more than {MAX_BODY}")
    if _RECORDIO.match(body):
        raise BadCallError(
            "", "the body is RecordIO-framed (a length, a newline, then data); send one JSON object per call"
        )
    try:
        raw = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadCallError("", f"the body is not UTF-8 JSON: {exc.reason} at byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise BadCallError(
            "", f"the body is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise BadCallError("", f"the body nests arrays or objects deeper than {MAX_DEPTH} levels") from None
    except ValueError:  # an integer of more digits than Python converts (sys.get_int_max_str_digits)
        raise BadCallError("", "the body has a number with too many digits") from None
    _check_depth(raw)
    return obj(raw, "")


def _check_depth(value: Any) -> None:
    """Refuse JSON nested deeper than :data:`MAX_DEPTH` (checked without recursion)."""
    level = [value] if isinstance(value, (dict, list)) else []
    depth = 1
    while level:  # one level at a time: only arrays and objects are visited
        if depth > MAX_DEPTH:
            raise BadCallError("", f"the body nests arrays or objects deeper than {MAX_DEPTH} levels")
        below = []
        for item in level:
            for child in item.values() if type(item) is dict else item:
                if type(child) is dict or type(child) is list:
                    below.append(child)
        level, depth = below, depth + 1


def shown(value: Any) -> str:
    """Return ``value`` as JSON for a message, cut to 60 characters."""
    try:
        text = json.dumps(value) if not isinstance(value, bytes) else repr(value)
    except (ValueError, RecursionError):
        text = f"a {type(value).__name__}"
    return text if len(text) <= 60 else text[:57] + "..."


def number(value: Any) -> float | None:
    """Return ``value`` as a finite float if it is a JSON number that is one, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        out = float(value)
    except OverflowError:  # an integer beyond a float's range (10**400)
        return None
    return out if math.isfinite(out) else None


def obj(value: Any, path: str) -> dict[str, Any]:
    """Return ``value`` if it is an object (path ``""``: the body)."""
    if isinstance(value, dict):
        return value
    if not path:
        raise BadCallError("", f"the body must be one JSON object, got {shown(value)}")
    if value is None:
        raise BadCallError(path, "required (an object)")
    raise BadCallError(path, f"expected an object, got {shown(value)}")


def items(value: Any, path: str) -> list[Any]:
    """Return ``value`` if it is a list."""
    if not isinstance(value, list):
        raise BadCallError(path, f"expected a list, got {shown(value)}")
    return value


def string(value: Any, path: str) -> str:
    """Return ``value`` if it is a non-empty string (required)."""
    if value is None:
        raise BadCallError(path, "required (a string)")
    if not isinstance(value, str) or not value:
        raise BadCallError(path, f"expected a non-empty string, got {shown(value)}")
    return value


def optional_string(value: Any, path: str) -> str | None:
    """Return ``value`` if it is a non-empty string, None if absent."""
    return None if value is None else string(value, path)


def id_value(value: Any, path: str) -> str:
    """Return the string in an id object, ``{"value": "..."}``."""
    return string(obj(value, path).get("value"), f"{path}.value")


def seconds(value: Any, path: str) -> float:
    """Return ``value`` if it is finite seconds >= 0."""
    out = number(value)
    if out is None or out < 0:
        raise BadCallError(path, f"expected finite seconds >= 0, got {shown(value)}")
    return out


def labels(value: Any, path: str) -> dict[str, str]:
    """Return a Mesos ``Labels`` object (``{"labels": [{"key": ..., "value": ...}]}``) as a dict."""
    if value is None:
        return {}
    listed = items(obj(value, path).get("labels", []), f"{path}.labels")
    out = {}
    for i, item in enumerate(listed):
        item = obj(item, f"{path}.labels[{i}]")
        out[string(item.get("key"), f"{path}.labels[{i}].key")] = string(
            item.get("value"), f"{path}.labels[{i}].value"
        )
    return out


def offer_ids(raw: Mapping[str, Any], path: str) -> tuple[str, ...]:
    """Return ``raw.offer_ids`` (at least one)."""
    listed = items(raw.get("offer_ids", []), f"{path}.offer_ids")
    ids = tuple(id_value(o, f"{path}.offer_ids[{i}]") for i, o in enumerate(listed))
    if not ids:
        raise BadCallError(f"{path}.offer_ids", "required (at least one offer id)")
    return ids


def refuse_seconds(raw: Mapping[str, Any], path: str) -> float:
    """Return ``raw.filters.refuse_seconds``, or the default."""
    filters = raw.get("filters")
    if filters is None:
        return DEFAULT_REFUSE_SECONDS
    value = obj(filters, f"{path}.filters").get("refuse_seconds", DEFAULT_REFUSE_SECONDS)
    return seconds(value, f"{path}.filters.refuse_seconds")
