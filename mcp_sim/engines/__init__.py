"""Engines turn a chat prompt into text; one module per engine."""
