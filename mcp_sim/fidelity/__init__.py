"""Fidelity: mirror and record real servers, learn from their traces, score the simulator against them."""
