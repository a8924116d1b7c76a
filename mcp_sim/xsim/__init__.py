"""A spec's `x-sim` sections as data, and what they do to an answer: fixtures and their templates,
fault kinds and rules."""
