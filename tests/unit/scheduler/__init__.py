"""Unit tests of the pure scheduler core (lattice.scheduler.core)."""
