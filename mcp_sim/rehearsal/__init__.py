"""Rehearsing the bad day: a ledger of what an agent would have changed, and fault injection."""
