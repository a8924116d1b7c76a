"""Fair admission to the model: round-robin across sessions, a bounded queue, cancellation-safe."""

from __future__ import annotations

import anyio
import pytest

from mcp_sim.base.errors import BusyError
from mcp_sim.serving.scheduler import FairScheduler

pytestmark = pytest.mark.anyio



async def test_sessions_take_turns_so_a_chatty_session_cannot_starve_others() -> None:
    scheduler = FairScheduler(slots=1)
    order: list[str] = []
    gate = anyio.Event()

    async def call(session: str, tag: str) -> None:
        async with scheduler.slot(session):
            order.append(tag)
            if tag == "first":
                await gate.wait()

    async with anyio.create_task_group() as group:
        group.start_soon(call, "chatty", "first")
        await anyio.wait_all_tasks_blocked()
        for index in range(4):  # the chatty session queues four more calls before anyone else arrives
            group.start_soon(call, "chatty", f"chatty-{index}")
            await anyio.wait_all_tasks_blocked()
        group.start_soon(call, "quiet", "quiet-0")
        group.start_soon(call, "other", "other-0")
        await anyio.wait_all_tasks_blocked()
        gate.set()
    assert order[:4] == ["first", "chatty-0", "quiet-0", "other-0"]
    assert sorted(order[4:]) == ["chatty-1", "chatty-2", "chatty-3"]


async def test_past_the_queue_limit_calls_are_refused_as_busy() -> None:
    scheduler = FairScheduler(slots=1, max_waiting=2)
    gate = anyio.Event()
    refused: list[str] = []

    async def call(session: str) -> None:
        try:
            async with scheduler.slot(session):
                await gate.wait()
        except BusyError as exc:
            refused.append(str(exc))

    async with anyio.create_task_group() as group:
        for index in range(4):
            group.start_soon(call, f"s{index}")
            await anyio.wait_all_tasks_blocked()
        assert scheduler.busy == 1 and scheduler.waiting == 2
        gate.set()
    assert len(refused) == 1 and "busy" in refused[0] and "--max-queue" in refused[0]


async def test_a_cancelled_waiter_leaves_the_line_and_slots_are_not_lost() -> None:
    scheduler = FairScheduler(slots=1)
    gate = anyio.Event()

    async def hold() -> None:
        async with scheduler.slot("holder"):
            await gate.wait()

    async with anyio.create_task_group() as group:
        group.start_soon(hold)
        await anyio.wait_all_tasks_blocked()
        with anyio.move_on_after(0.05):
            async with scheduler.slot("impatient"):
                pytest.fail("should not get the slot while it is held")
        assert scheduler.waiting == 0
        gate.set()
    async with scheduler.slot("later"):
        assert scheduler.busy == 1
    assert scheduler.busy == 0


async def test_a_world_never_has_two_calls_admitted_at_once_and_keeps_their_order() -> None:
    scheduler = FairScheduler(slots=3)
    inside: set[str] = set()
    overlaps: list[str] = []
    order: list[str] = []

    async def call(world: str, tag: str) -> None:
        async with scheduler.slot(world):
            if world in inside:
                overlaps.append(tag)
            inside.add(world)
            order.append(tag)
            await anyio.sleep(0.01)
            inside.discard(world)

    async with anyio.create_task_group() as group:
        for index in range(5):
            group.start_soon(call, "busy-world", f"busy-{index}")
            await anyio.wait_all_tasks_blocked()
        group.start_soon(call, "other", "other-0")
    assert overlaps == []
    assert [tag for tag in order if tag.startswith("busy")] == [f"busy-{i}" for i in range(5)]
    # The other world did not wait behind the busy one: it had a free slot.
    assert order.index("other-0") <= 1
