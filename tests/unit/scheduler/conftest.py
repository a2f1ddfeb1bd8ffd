"""Let pytest explain failed assertions inside the shared builders/checkers."""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("tests.unit.scheduler.builders")
