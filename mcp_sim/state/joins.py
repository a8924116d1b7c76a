"""The answer's root fields that a nested record, or the record it belongs to, already holds.

`open_task_details(taskId)` answers `{requestId, originalRequest, task: {...}}`: the task sits at /task, but
the root repeats its `requestId`, and the request that id names (a record of `requests`, made when the tasks
were planned) holds `originalRequest`. Both are known to the state; the model would only guess them.
"""

from __future__ import annotations

from typing import Any

from mcp_sim.state.layout import Layout, escape, properties
from mcp_sim.state.live import LiveData
from mcp_sim.state.naming import plural, words
from mcp_sim.state.pins import Pins


def joined(layout: Layout, record: dict[str, Any] | None, live: LiveData) -> Pins:
    """Pins for the output's root fields named like a field of RECORD (nested at layout.record_at) or of its
    parent, the record its `<noun>Id` field names in the collection `<nouns>`."""
    if record is None or not layout.record_at:
        return {}
    roots = set(properties(layout.output_shape)) - {layout.record_at[1:]}
    pins: Pins = {f"/{escape(name)}": value for name, value in record.items() if name in roots}
    for name, value in record.items():
        parts = words(name)
        if len(parts) < 2 or parts[-1] != "id" or not isinstance(value, str | int) or name == layout.key:
            continue
        parent = live.find(plural(" ".join(parts[:-1])), "id", value)
        for field, held in (parent or {}).items():
            if field in roots and field != "id":
                pins.setdefault(f"/{escape(field)}", held)
    return pins
