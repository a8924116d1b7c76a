"""Per-session history of simulated calls, kept apart so sessions never see each other."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from mcp_sim.prompt import Turn


@dataclass
class Session:
    id: str
    # History per spec set (keyed by its source file): calls to one world don't crowd another's prompt.
    turns: dict[str, list[Turn]] = field(default_factory=dict)
    calls: int = 0
    # Calls of one session run one at a time, so call N always sees calls 1..N-1.
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def history(self, world_key: str) -> list[Turn]:
        return list(self.turns.get(world_key, []))

    def record(self, world_key: str, turn: Turn) -> None:
        self.turns.setdefault(world_key, []).append(turn)

    def drop_oldest(self, world_key: str, count: int) -> None:
        del self.turns.get(world_key, [])[:count]


class SessionStore:
    """Sessions by id, least recently used evicted past `max_sessions`."""

    def __init__(self, max_sessions: int = 256):
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session_id: str) -> Session:
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                session = self._sessions[session_id] = Session(session_id)
                while len(self._sessions) > self.max_sessions:
                    self._sessions.popitem(last=False)
            self._sessions.move_to_end(session_id)
            return session

    def __len__(self) -> int:
        return len(self._sessions)
