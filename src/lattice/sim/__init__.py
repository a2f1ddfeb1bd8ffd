"""Lattice operator."""
