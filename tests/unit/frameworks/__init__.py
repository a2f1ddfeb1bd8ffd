"""Unit tests of the per-kind framework plugins and their shared pod helpers."""
