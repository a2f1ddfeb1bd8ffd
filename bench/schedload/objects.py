"""Timestamps and managedFields entries as the apiserver writes them, for generated objects.

Part of ``bench/bench_scheduler_load.py`` (see its docstring for what it measures); not a bench
itself.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from lattice.primitives.objects import Obj

__all__ = ["fields_v1", "managed", "ts"]


def ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def fields_v1(value: Any, *, top: bool = False) -> Obj:
    """An approximate managedFields ``fieldsV1`` tree for ``value`` (set-style, like the server)."""
    if isinstance(value, dict):
        out: Obj = {} if top else {".": {}}
        for k, v in value.items():
            out[f"f:{k}"] = fields_v1(v)
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        keyed: Obj = {}
        for item in value:
            if "name" in item:
                key = json.dumps({"name": item["name"]}, separators=(",", ":"))
            elif "containerPort" in item:
                key = json.dumps(
                    {"containerPort": item["containerPort"], "protocol": "TCP"},
                    separators=(",", ":"),
                )
            elif "type" in item:
                key = json.dumps({"type": item["type"]}, separators=(",", ":"))
            else:
                return {}
            keyed[f"k:{key}"] = fields_v1(item)
        return keyed
    return {}


def managed(manager: str, t: str, fields: Obj, *, subresource: str | None = None) -> Obj:
    entry: Obj = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "v1",
        "time": t,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if subresource:
        entry["subresource"] = subresource
    return entry
