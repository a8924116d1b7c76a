"""A world's live data for one spec file: its collections of records, and the keys it has said do not exist.

Plain JSON all the way down, so it is stored, forked, exported and hashed as it is.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import uuid
from collections.abc import Callable
from typing import Any

_NUMBERED = re.compile(r"^(.*?)(\d+)$")


class LiveData:
    """`data` starts as a deep copy of the spec's `world.data` in the world's scenario."""

    def __init__(self, data: Any = None, absent: dict[str, dict[str, str | None]] | None = None):
        self.data: Any = copy.deepcopy(data) if data is not None else {}
        # Per collection, the keys said not to exist, each with the failure text the world gave (None: it
        # said so in the output, found: false).
        self.absent: dict[str, dict[str, str | None]] = {name: dict(keys) for name, keys in (absent or {}).items()}

    def to_json(self) -> dict[str, Any]:
        return {"data": self.data, "absent": self.absent}

    @classmethod
    def from_json(cls, raw: Any) -> LiveData:
        if not isinstance(raw, dict) or "data" not in raw or not isinstance(raw.get("absent", {}), dict):
            raise ValueError("live state is not an object with 'data' and 'absent'")
        absent = raw.get("absent", {})
        if not all(isinstance(keys, dict) for keys in absent.values()):
            raise ValueError("live state's 'absent' is not a mapping of collections to keys")
        return cls(raw["data"], absent)

    def digest(self) -> str:
        """sha256 of the canonical JSON: the same data gives the same digest in any process."""
        text = json.dumps(self.to_json(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def copy(self) -> LiveData:
        return LiveData(self.data, self.absent)

    def records(self, collection: str, key_field: str = "id") -> list[dict[str, Any]]:
        """The collection's records (objects); a collection the data lacks is empty. A collection written as
        a mapping of key -> record (services: {api: {...}}) gives each record its key under KEY_FIELD."""
        found = self.data.get(collection) if isinstance(self.data, dict) else None
        if isinstance(found, dict):
            return [{key_field: key, **record} for key, record in found.items() if isinstance(record, dict)]
        return [record for record in found if isinstance(record, dict)] if isinstance(found, list) else []

    def find(self, collection: str, key_field: str, key: Any) -> dict[str, Any] | None:
        records = self.records(collection, key_field)
        return next((record for record in records if same_key(record.get(key_field), key)), None)

    def is_absent(self, collection: str, key: Any) -> bool:
        return str(key) in self.absent.get(collection, {})

    def absence(self, collection: str, key: Any) -> str | None:
        """The failure text the world gave for a key said not to exist (None: none, or not absent)."""
        return self.absent.get(collection, {}).get(str(key))

    def put(self, collection: str, key_field: str, record: dict[str, Any]) -> None:
        """Store RECORD in place of the one with its key, or at the end."""
        key = record.get(key_field)
        self._unmark(collection, key)
        keyed = self.data.get(collection) if isinstance(self.data, dict) else None
        if isinstance(keyed, dict):
            keyed[str(key)] = {name: value for name, value in record.items() if name != key_field}
            return
        items = self._writable(collection)
        for index, existing in enumerate(items):
            if isinstance(existing, dict) and same_key(existing.get(key_field), key):
                items[index] = record
                break
        else:
            items.append(record)

    def append(self, collection: str, record: dict[str, Any]) -> None:
        """Store RECORD at the end, for a collection whose records have no key (a relation)."""
        self._writable(collection).append(record)

    def drop(self, collection: str, unwanted: Callable[[dict[str, Any]], bool]) -> int:
        """Remove the records UNWANTED says yes to; how many went."""
        items = self.data.get(collection) if isinstance(self.data, dict) else None
        if not isinstance(items, list):
            return 0
        kept = [r for r in items if not (isinstance(r, dict) and unwanted(r))]
        gone = len(items) - len(kept)
        items[:] = kept
        return gone

    def _unmark(self, collection: str, key: Any) -> None:
        self.absent.get(collection, {}).pop(str(key), None)

    def remove(self, collection: str, key_field: str, key: Any) -> None:
        keyed = self.data.get(collection) if isinstance(self.data, dict) else None
        if isinstance(keyed, dict):
            keyed.pop(str(key), None)
        else:
            items = self._writable(collection)
            items[:] = [r for r in items if not (isinstance(r, dict) and same_key(r.get(key_field), key))]
        self.mark_absent(collection, key)

    def mark_absent(self, collection: str, key: Any, failure: str | None = None) -> None:
        self.absent.setdefault(collection, {})[str(key)] = failure

    def next_key(self, collection: str, key_field: str, mode: str, seen: list[Any], name: str,
                 taken: list[Any] | None = None) -> Any:
        """A key no record has had: the next in the pattern of the keys seen (T-5004 -> T-5005), a uuid, or
        the next integer. SEEN adds keys from the spec's examples, for a collection that starts empty; TAKEN,
        keys given out by the call being planned (not stored yet)."""
        keys = [record.get(key_field) for record in self.records(collection, key_field)]
        keys += [*self.absent.get(collection, {}), *(taken or [])]
        keys = keys or list(seen)
        if mode == "uuid":
            return str(uuid.uuid5(uuid.NAMESPACE_URL, f"mcp-sim:{name}:{collection}:{len(keys)}"))
        numbers = [(key, _NUMBERED.match(str(key))) for key in keys if key is not None]
        numbered = [(key, match) for key, match in numbers if match]
        if mode == "int" or not numbered or all(isinstance(key, int) for key, _ in numbered):
            return max((int(match.group(2)) for _, match in numbered), default=0) + 1
        _, last = max(numbered, key=lambda pair: int(pair[1].group(2)))
        prefix, digits = last.group(1), last.group(2)
        following = int(digits) + 1
        return f"{prefix}{following:0{len(digits)}d}"

    def replace(self, collection: str, value: Any) -> None:
        """Store VALUE whole under COLLECTION (a database's statements)."""
        if not isinstance(self.data, dict):
            self.data = {}
        self.data[collection] = value

    def _writable(self, collection: str) -> list[Any]:
        if not isinstance(self.data, dict):
            self.data = {}
        items = self.data.get(collection)
        if not isinstance(items, list):
            items = self.data[collection] = []
        return items


def same_key(a: Any, b: Any) -> bool:
    """Keys compare as text: an id 7 in the data and "7" in the arguments name one record."""
    return a is not None and b is not None and str(a) == str(b)
