"""The scheduler-load bench's modules (``bench/bench_scheduler_load.py`` is the entry point).

- ``common``: constants, setup printing; ``objects``, ``nodes``, ``world``: the memory
  section's generated world; ``fake``: its in-memory apiserver; ``memory``: the memory section;
- ``load``: the load section; ``report``: its measurements and printed report.
"""

from __future__ import annotations

__all__: list[str] = []
