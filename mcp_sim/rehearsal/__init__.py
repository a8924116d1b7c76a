"""Rehearsals: answers pinned by fixtures, cassettes of real traces and a response cache (repeatable runs);
faults and a ledger of what the agent would have changed (the bad day)."""
