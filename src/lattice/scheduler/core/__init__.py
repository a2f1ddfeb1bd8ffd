"""The pure scheduler core: schedule(snapshot, now) -> plan (lands with issue 4)."""
