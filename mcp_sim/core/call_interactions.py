"""A tool's declared interactions, carried out over MCP during its call (see mcp_sim.core.interactions): the
requests it sends the client before it answers, the notifications it sends while it runs, and the content
blocks it returns.

Requests go to the client on the call's own stream. A client that did not declare the capability gets the
isError a real server gives ("... needs elicitation, which this client does not support"); a declined or
cancelled elicitation is an answer like any other: the tool answers knowing it (`{{client.elicitation.action}}`
in a fixture, the `client` field of the action the model sees).

On the stateless 2026-07-28 protocol a server cannot send requests: the call instead returns an
InputRequiredResult naming them (keys `elicitation`, `sampling`, `roots`, or the spec's `key`), and the client
retries the call with its `inputResponses`, which are then the answers (SEP-2322, as far as the SDK carries it).
"""

from __future__ import annotations

import json
import logging
import warnings
from typing import Any
from weakref import WeakKeyDictionary

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from pydantic import TypeAdapter, ValidationError

from mcp_sim.base.content import content_text, fill_blocks
from mcp_sim.core.calls import SimulationResult
from mcp_sim.core.interactions import LOG_LEVELS, Interactions, Notification
from mcp_sim.xsim.templates import TemplateContext, fill

logger = logging.getLogger(__name__)

RequestContext = ServerRequestContext[Any, Any]


class ClientRefused(Exception):
    """The client cannot answer a request the tool must send (no capability, an error): the call's isError."""


class InputRequired(Exception):
    """Stateless protocol: the call's answer is this InputRequiredResult; the client retries with the answers."""

    def __init__(self, result: types.InputRequiredResult):
        super().__init__("input required")
        self.result = result


class LogLevels:
    """The level each client connection asked for with logging/setLevel; below it nothing is sent."""

    def __init__(self) -> None:
        self._levels: WeakKeyDictionary[object, str] = WeakKeyDictionary()

    def set(self, ctx: RequestContext, level: str) -> None:
        self._levels[connection_of(ctx)] = level

    def allows(self, ctx: RequestContext, level: str) -> bool:
        """Until the client sets a level, every message goes out (the spec leaves the default to the server)."""
        return self.allows_connection(connection_of(ctx), level)

    def allows_connection(self, connection: object, level: str) -> bool:
        minimum = self._levels.get(connection)
        return minimum is None or LOG_LEVELS.index(level) >= LOG_LEVELS.index(minimum)


def connection_of(ctx: RequestContext) -> object:
    """The client connection a request came on (one per client; it carries a 2025-11-25 HTTP session id)."""
    # The SDK exposes no public accessor for it.
    return getattr(ctx.session, "_connection", ctx.session)


async def ask_client(ctx: RequestContext, interactions: Interactions, arguments: dict[str, Any],
                     input_responses: dict[str, Any] | None = None,
                     request_state: str | None = None) -> dict[str, Any]:
    """Send the tool's requests to the client, in order roots, elicitation, sampling; what it answered."""
    context = TemplateContext(arguments, "", "")
    if not ctx.session.can_send_request:
        return _answers_from_retry(ctx, interactions, context, input_responses or {}, request_state)
    answers: dict[str, Any] = {}
    if interactions.roots:
        answers["roots"] = await _roots(ctx)
    if interactions.elicit is not None:
        answers["elicitation"] = await _elicit(ctx, fill(interactions.elicit, context))
    if interactions.sample is not None:
        answers["sampling"] = await _sample(ctx, fill(interactions.sample, context))
    return answers


def _answers_from_retry(ctx: RequestContext, interactions: Interactions, context: TemplateContext,
                        responses: dict[str, Any], request_state: str | None) -> dict[str, Any]:
    """Stateless: the answers the retried call carries, or InputRequired naming the requests still open.

    The answers so far travel in `requestState` (sealed against tampering by the SDK's RequestStateBoundary), so
    a retry only has to carry what the last round asked. A request the client declared no capability for is
    left out and answered None (unsupported); when that leaves nothing to ask, the call is the -32021 error."""
    answers: dict[str, Any] = _state(request_state)
    requests: dict[str, types.InputRequest] = {}
    missing: list[str] = []
    keys = interactions.keys
    wanted: list[tuple[str, types.ClientCapabilities, Any]] = []
    if interactions.roots:
        wanted.append(("roots", types.ClientCapabilities(roots=types.RootsCapability()), types.ListRootsRequest))
    if interactions.elicit is not None:
        form = types.ElicitRequestFormParams.model_validate(fill(interactions.elicit, context))
        wanted.append(("elicitation", types.ClientCapabilities(elicitation=types.ElicitationCapability()),
                       lambda: types.ElicitRequest(params=form)))
    if interactions.sample is not None:
        sampling = types.CreateMessageRequestParams.model_validate(fill(interactions.sample, context))
        wanted.append(("sampling", types.ClientCapabilities(sampling=types.SamplingCapability()),
                       lambda: types.CreateMessageRequest(params=sampling)))
    for kind, capability, build in wanted:
        if kind in answers:
            continue
        if keys[kind] in responses:
            answers[kind] = _answer(kind, responses[keys[kind]])
        elif _capable(ctx, capability):
            requests[keys[kind]] = build()
        else:
            missing.append(kind)
    required = [kind for kind in missing if kind != "roots"]  # roots are optional: a server works without them
    if required and not requests:
        raise MCPError(types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                       f"This tool needs the client capability {required[0]!r}, which the request did not declare",
                       {"requiredCapabilities": {kind: {} for kind in required}})
    for name in missing:
        answers.setdefault(name, None)
    if requests:
        raise InputRequired(types.InputRequiredResult(input_requests=requests,
                                                      request_state=json.dumps(answers, sort_keys=True)))
    return answers


def _state(request_state: str | None) -> dict[str, Any]:
    """The answers of earlier rounds (plaintext: the SDK's boundary verified and unsealed the client's echo)."""
    if not request_state:
        return {}
    try:
        state = json.loads(request_state)
    except json.JSONDecodeError:
        raise MCPError(types.INVALID_PARAMS, "Invalid requestState") from None
    return state if isinstance(state, dict) else {}


def _answer(kind: str, response: Any) -> Any:
    if kind == "roots":
        return _dump(response).get("roots")
    return _with_text(_dump(response)) if kind == "sampling" else _dump(response)


def _dump(value: Any) -> dict[str, Any]:
    dumped = value.model_dump(by_alias=True, mode="json", exclude_none=True) if hasattr(value, "model_dump") else value
    return dumped if isinstance(dumped, dict) else {"value": dumped}


def _with_text(answer: dict[str, Any]) -> dict[str, Any]:
    """A sampling answer with its text blocks joined under `text`, for fixtures and the model."""
    blocks = answer.get("content")
    blocks = blocks if isinstance(blocks, list) else [blocks]
    texts = [str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    return {**answer, "text": "\n".join(texts)}


def _capable(ctx: RequestContext, capability: types.ClientCapabilities) -> bool:
    return ctx.session.check_client_capability(capability)


async def _roots(ctx: RequestContext) -> list[dict[str, Any]] | None:
    """The client's roots; None when it has none to give (a real server then works without them)."""
    if not _capable(ctx, types.ClientCapabilities(roots=types.RootsCapability())):
        return None
    try:
        with warnings.catch_warnings():  # deprecated as of 2026-07-28, still what 2025-11-25 clients speak
            warnings.simplefilter("ignore")
            result = await ctx.session.list_roots()
    except MCPError as exc:
        logger.info("roots/list failed: %s", exc)
        return None
    return [root.model_dump(by_alias=True, mode="json", exclude_none=True) for root in result.roots]


async def _elicit(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    if not _capable(ctx, types.ClientCapabilities(elicitation=types.ElicitationCapability())):
        raise ClientRefused("This tool asks the user for input (elicitation), which this client does not support: "
                            "declare the elicitation capability")
    request = types.ElicitRequestFormParams.model_validate(params)
    try:
        result = await ctx.session.elicit_form(request.message, request.requested_schema,
                                               related_request_id=ctx.request_id)
    except MCPError as exc:
        raise ClientRefused(f"The client failed the elicitation request: {exc.error.message}") from None
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


async def _sample(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    if not _capable(ctx, types.ClientCapabilities(sampling=types.SamplingCapability())):
        raise ClientRefused("This tool asks the client's model for a completion (sampling), which this client does "
                            "not support: declare the sampling capability")
    request = types.CreateMessageRequestParams.model_validate(params)
    try:
        with warnings.catch_warnings():  # deprecated as of 2026-07-28, still what 2025-11-25 clients speak
            warnings.simplefilter("ignore")
            result = await ctx.session.create_message(
                request.messages, max_tokens=request.max_tokens, system_prompt=request.system_prompt,
                include_context=request.include_context, temperature=request.temperature,
                stop_sequences=request.stop_sequences, metadata=request.metadata,
                model_preferences=request.model_preferences, related_request_id=ctx.request_id)
    except MCPError as exc:
        raise ClientRefused(f"The client failed the sampling request: {exc.error.message}") from None
    return _with_text(result.model_dump(by_alias=True, mode="json", exclude_none=True))


async def send_notifications(ctx: RequestContext, notifications: list[Notification], levels: LogLevels) -> None:
    """The tool's declared notifications, in order, each after its delay; logs below the client's level are not sent."""
    for notification in notifications:
        if notification.delay_ms:
            await anyio.sleep(notification.delay_ms / 1000)
        try:
            if notification.kind == "progress":
                params = notification.params
                await ctx.session.report_progress(float(params["progress"]), params.get("total"), params.get("message"))
            elif levels.allows(ctx, notification.params["level"]):
                with warnings.catch_warnings():  # deprecated as of 2026-07-28, still what 2025-11-25 clients speak
                    warnings.simplefilter("ignore")
                    await ctx.session.send_log_message(notification.params["level"], notification.params["data"],
                                                       notification.params.get("logger"),
                                                       related_request_id=ctx.request_id)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return  # the client is gone
        except Exception:  # a notification is best effort; never fail a call for it
            logger.debug("notification failed", exc_info=True)


_NOTIFICATION: TypeAdapter[types.ServerNotification] = TypeAdapter(types.ServerNotification)
_REQUEST: TypeAdapter[types.ServerRequest] = TypeAdapter(types.ServerRequest)
_CAPABILITY = {"sampling/createMessage": types.ClientCapabilities(sampling=types.SamplingCapability()),
               "elicitation/create": types.ClientCapabilities(elicitation=types.ElicitationCapability()),
               "roots/list": types.ClientCapabilities(roots=types.RootsCapability())}


async def replay_interactions(ctx: RequestContext, events: list[dict[str, Any]], levels: LogLevels) -> None:
    """What a recorded call's server sent the client (mcp_sim.fidelity.record_interactions), sent again in
    order: log messages at the client's level, progress on the call's token, other notifications as recorded,
    and requests (sampling, elicitation, roots) when the client can answer them. The client's answers do not
    change the recorded result, which is replayed as it was; on the stateless protocol requests are left out."""
    for event in events:
        try:
            if "notification" in event:
                await _replay_notification(ctx, event["notification"], event.get("params") or {}, levels)
            elif "request" in event and ctx.session.can_send_request:
                await _replay_request(ctx, event["request"], event.get("params"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return  # the client is gone
        except (MCPError, ValidationError) as exc:
            logger.info("replaying a recorded %s: %s", event.get("notification") or event.get("request"), exc)
        except Exception:  # best effort: the recorded result is what the call answers
            logger.debug("replaying a recorded interaction failed", exc_info=True)


async def _replay_notification(ctx: RequestContext, method: str, params: dict[str, Any], levels: LogLevels) -> None:
    if method == "notifications/progress":
        await ctx.session.report_progress(float(params.get("progress", 0)), params.get("total"), params.get("message"))
        return
    if method == "notifications/message" and not levels.allows(ctx, str(params.get("level", "info"))):
        return
    notification = _NOTIFICATION.validate_python({"method": method, "params": params} if params else {"method": method})
    await ctx.session.send_notification(notification, related_request_id=ctx.request_id)


async def _replay_request(ctx: RequestContext, method: str, params: dict[str, Any] | None) -> None:
    capability = _CAPABILITY.get(method)
    if capability is None or not _capable(ctx, capability):
        return  # a real server would not ask a client that cannot answer (and a ping needs no replaying)
    request = _REQUEST.validate_python({"method": method, **({"params": params} if params is not None else {})})
    with warnings.catch_warnings():  # sampling and roots are deprecated as of 2026-07-28
        warnings.simplefilter("ignore")
        await ctx.session.send_request(request, types.Result,
                                       metadata=ServerMessageMetadata(related_request_id=ctx.request_id))


async def close_stream(ctx: RequestContext) -> None:
    """End the call's SSE stream (x-sim closeStream); the SDK gives the means only on streamable HTTP with an
    event store and a client of 2025-11-25 or later, which can resume. Elsewhere nothing happens."""
    if ctx.close_sse_stream is not None:
        await ctx.close_sse_stream()


def shaped(result: SimulationResult, interactions: Interactions) -> SimulationResult:
    """The model's (or cache's) text answer in the content blocks the tool declares it returns."""
    if interactions.content is None or result.content is not None or result.is_error or result.no_content:
        return result
    result.content = fill_blocks(interactions.content, result.text)
    result.text = content_text(result.content)
    return result
