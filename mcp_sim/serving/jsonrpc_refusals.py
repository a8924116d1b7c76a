"""The JSON-RPC errors the transports answer in the SDK's stead, and the shallow scan that finds the ids they carry.

Shared by stdio (transports.py) and HTTP (http_guard.py), so a message refused over one is refused the same way
over the other: the same code, the same text, the request's id when a scan finds it, else id null.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import mcp_types as types

# How much of an over-long message is scanned for its id: requests put it near the start.
SCAN_HEAD_BYTES = 64 * 1024
BAD_ID = "Invalid Request: the id must be a string or an integer"


def too_large(what: str, limit: int, unit: str) -> str:
    """The message refusing a message over the transport's size limit."""
    return (f"Invalid Request: {what} is over the server's limit of {limit:,} {unit}; send less per message "
            "(tool arguments are refused past --max-argument-bytes anyway)")


def misread_request(method: str, has_id: bool) -> bool:
    """Whether a message the SDK read as a notification was a request whose id it could not take (null, a
    boolean, a fraction, an object): owed an answer it would never get. `notifications/...` methods are left
    alone: JSON-RPC 1.0 clients send their notifications with "id": null."""
    return has_id and not method.startswith("notifications/")


def errors(code: int, message: str, ids: list[types.RequestId]) -> list[types.JSONRPCError]:
    """One error per request id, else one with id null (JSON-RPC's answer when the id cannot be read)."""
    import mcp_types as types

    error = types.ErrorData(code=code, message=message)
    answered: list[types.RequestId | None] = [*ids] or [None]
    return [types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error) for request_id in answered]


def wire(error: types.JSONRPCError) -> dict[str, Any]:
    """`error` as sent: id null stays on the wire (JSON-RPC requires the member)."""
    return error.model_dump(mode="json", by_alias=True, exclude_none=True) | {"id": error.id}


def scan_ids(text: str | bytes) -> tuple[list[types.RequestId], bool]:
    """The valid ids of the message (or of each message of a batch) in `text`, and whether any "id" member was
    seen; parsed or not, as deep, as broken or as cut short as it may be, without building the document.

    ijson's event stream, not ijson.parse: the prefixes parse builds grow with depth, quadratic in it.
    """
    import ijson

    data = text.encode("utf-8", errors="replace") if isinstance(text, str) else text
    ids: list[types.RequestId] = []
    has_id, depth, key_depth, value_next = False, 0, 1, False
    try:
        for index, (event, value) in enumerate(ijson.basic_parse(data)):
            if index == 0 and event == "start_array":
                key_depth = 2  # a batch: the ids of its members
            if value_next and is_request_id(value):
                ids.append(value)
            if value_next and key_depth == 1:
                break
            value_next = event == "map_key" and value == "id" and depth == key_depth
            has_id = has_id or value_next
            depth += (event in ("start_map", "start_array")) - (event in ("end_map", "end_array"))
    except (ijson.JSONError, ValueError):
        pass  # broken further on: what came before still counts
    return ids, has_id


def is_request_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
