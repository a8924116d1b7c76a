"""`op: next`: the first record not finished yet among those the call's arguments select (`get_next_task
(requestId)` -> the first task of that request that is not done), as a queue of work hands out its next item.

The arguments select by the records' own fields (a task's requestId); a record is finished when one of its
finishing flags (done, completed, finished, closed) is true. When none is left, the model says so in the
tool's words.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_sim.state.layout import Layout, escape, properties, schema_at
from mcp_sim.state.live import LiveData, same_key
from mcp_sim.state.pins import fitting
from mcp_sim.state.plan import StatePlan

FINISHED = ("done", "completed", "finished", "closed")


def plan_next(layout: Layout, live: LiveData, arguments: dict[str, Any],
              output_schema: dict[str, Any] | None) -> StatePlan:
    collection = layout.effect.collection
    selected = [record for record in live.records(collection, layout.key)
                if all(same_key(record[name], value) for name, value in arguments.items() if name in record)]
    waiting = [record for record in selected if not any(record.get(flag) is True for flag in FINISHED)]
    step = StatePlan(layout)
    if not waiting:
        step.note = (f"No {collection} the arguments select is left unfinished "
                     f"({len(selected)} selected): answer as the tool's examples do.")
        return step
    record = waiting[0]
    step.key, step.before = record.get(layout.key), record
    step.note = f"The world's next of {collection} (JSON): {json.dumps(record, ensure_ascii=False)}"
    if output_schema is None or layout.record_at is None:
        return step
    shown = properties(schema_at(layout.output_shape or {}, layout.record_at)) or properties(layout.record_schema)
    pins = {f"{layout.record_at}/{escape(name)}": value for name, value in record.items() if name in shown}
    step.pins = fitting(pins, output_schema)
    return step
