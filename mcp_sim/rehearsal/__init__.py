"""Repeatable rehearsals: fixtures, cassettes of real traces and a response cache answer before the model."""
