"""What the real server sends the client while a recorded call runs: notifications (log messages, progress,
list_changed, resources/updated) and requests (sampling, elicitation, roots).

The recording proxy is the real server's client. Each of these is relayed to the agent on the call's own
stream (a request's answer goes back to the real server) and kept, in order, in the call's trace record under
`interactions`:

    {"notification": "notifications/message", "params": {"level": "info", "data": "..."}}
    {"request": "sampling/createMessage", "params": {...}, "result": {...}}      (or "error": {code, message})

The real server says nothing of which call a notification or request belongs to: it is given to the call in
flight, the latest when several are.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from pydantic import BaseModel, TypeAdapter

from mcp_sim.serving.server import RequestContext

logger = logging.getLogger(__name__)

NOTIFICATION: TypeAdapter[types.ServerNotification] = TypeAdapter(types.ServerNotification)
REQUEST: TypeAdapter[types.ServerRequest] = TypeAdapter(types.ServerRequest)
RESULTS: dict[str, type[BaseModel]] = {"sampling/createMessage": types.CreateMessageResult,
                                       "elicitation/create": types.ElicitResult, "roots/list": types.ListRootsResult}
NO_CALL = "no call of the recording proxy is in flight to relay this request to"


def _dumped(model: BaseModel | None) -> dict[str, Any]:
    if model is None:
        return {}
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


class Tap:
    """One call in flight: the agent's request context, and what the real server sent during it."""

    def __init__(self, ctx: RequestContext):
        self.ctx = ctx
        self.events: list[dict[str, Any]] = []

    async def notification(self, notification: BaseModel) -> None:
        data = _dumped(notification)
        self.events.append({"notification": data["method"], **({"params": data["params"]} if "params" in data
                                                                 else {})})
        try:
            await self.ctx.session.send_notification(notification, related_request_id=self.ctx.request_id)  # type: ignore[arg-type]
        except Exception:  # relaying is best effort, as notifications are
            logger.debug("relaying %s to the agent failed", data["method"], exc_info=True)

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        params = {"progress": progress, **({"total": total} if total is not None else {}),
                  **({"message": message} if message is not None else {})}
        self.events.append({"notification": "notifications/progress", "params": params})
        await self.ctx.session.report_progress(progress, total, message)

    async def request(self, method: str, params: BaseModel | None) -> Any:
        """Relay the real server's request to the agent; its answer (or an ErrorData) for the real server."""
        raw = {"method": method, **({"params": _dumped(params)} if params is not None else {})}
        event: dict[str, Any] = {"request": method, **({"params": raw["params"]} if "params" in raw else {})}
        self.events.append(event)
        try:
            result = await self.ctx.session.send_request(
                REQUEST.validate_python(raw), RESULTS[method],
                metadata=ServerMessageMetadata(related_request_id=self.ctx.request_id))
        except MCPError as exc:
            event["error"] = {"code": exc.error.code, "message": exc.error.message}
            return exc.error
        except Exception as exc:  # the agent is gone, or answered nonsense: the real server hears an error
            event["error"] = {"code": types.INTERNAL_ERROR, "message": f"the agent did not answer: {exc}"}
            return types.ErrorData(code=types.INTERNAL_ERROR, message=event["error"]["message"])
        event["result"] = _dumped(result)
        return result


class CallTaps:
    """The recording proxy's calls in flight; the client callbacks that hand each its events."""

    def __init__(self) -> None:
        self._open: list[Tap] = []

    @contextmanager
    def open(self, ctx: RequestContext) -> Iterator[Tap]:
        tap = Tap(ctx)
        self._open.append(tap)
        try:
            yield tap
        finally:
            self._open.remove(tap)

    def current(self) -> Tap | None:
        return self._open[-1] if self._open else None

    def callbacks(self) -> dict[str, Any]:
        """The upstream Client's keyword arguments: with them it declares sampling, elicitation and roots."""
        return {"message_handler": self._notified, "sampling_callback": self._sampling,
                "elicitation_callback": self._elicitation, "list_roots_callback": self._roots}

    async def _notified(self, message: Any) -> None:
        # Progress comes through the forwarded call's own progress callback (Tap.progress).
        if isinstance(message, Exception | types.ProgressNotification):
            return
        tap = self.current()
        if tap is not None:
            await tap.notification(message)

    async def _sampling(self, context: Any, params: types.CreateMessageRequestParams) -> Any:
        return await self._relay("sampling/createMessage", params)

    async def _elicitation(self, context: Any, params: types.ElicitRequestParams) -> Any:
        return await self._relay("elicitation/create", params)

    async def _roots(self, context: Any) -> Any:
        return await self._relay("roots/list", None)

    async def _relay(self, method: str, params: BaseModel | None) -> Any:
        tap = self.current()
        if tap is None:
            return types.ErrorData(code=types.INTERNAL_ERROR, message=NO_CALL)
        return await tap.request(method, params)
