"""Live world state: the records of `world.data` that calls change and reads answer from (x-sim.state)."""
