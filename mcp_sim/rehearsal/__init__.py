"""Rehearsing the bad day: fault injection and a ledger of what the agent would have changed."""
