"""The reads and the command line of ``kubectl lattice`` (``queue`` and ``explain``).

Contract:
- Reads only, through the :class:`~lattice.kubectl.transport.Reader` seam (``kubectl get
  --raw``): the jobs of every kind (paged lists), events.k8s.io/v1 Events selected by
  ``regarding.kind``/``regarding.name`` (and kept only for the job's uid), and, quietly (an
  error means none), PriorityClasses and Trainer runtimes for the plugins' context.
- ``queue`` numbers every waiting job (:func:`numbered_rows`: persisted positions, then the rest
  computed in the core's order over every namespace; only the persisted ones when listing every
  namespace is refused) and prints a table, or with ``-o json|yaml`` a document
  (:func:`~lattice.kubectl.render.queue_document`).
- ``explain`` prints the scheduler's decision first, then the scheduler's own events
  (``Admitted``, ``Preempted``, ``Shrunk``...), then the jobs ahead, then every other event.
- ``collect_rows`` skips a kind whose CRD is not installed (404) without a word; any other error
  listing a kind is appended to ``warn`` and that kind is left out.
- ``explain`` lists the jobs ahead of a ``Waiting`` job across all namespaces (one operator
  orders the whole cluster), or in its own namespace with ``--same-namespace`` or when listing
  all namespaces is refused.
- ``main(argv)`` returns 0, 1 (API error, job not found) or 2 (bad usage).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from lattice.api import constants
from lattice.api.constants import Resource
from lattice.clock import RealClock
from lattice.frameworks.base import OperatorContext
from lattice.kubectl.render import FORMATS, explain_text, queue_document, queue_table, sort_events
from lattice.kubectl.rows import (
    JOB_KINDS,
    JobKind,
    JobRow,
    context_namespace,
    job_row,
    kubeconfig_paths,
    operator_context,
    queue_order,
    resolve_kind,
    with_positions,
)
from lattice.kubectl.transport import (
    EVENTS,
    PRIORITY_CLASSES,
    ApiError,
    KubectlReader,
    NotFound,
    Reader,
)
from lattice.primitives.objects import Obj
from lattice.scheduler.core.types import SchedulerConfig, Strategy

__all__ = ["collect_rows", "explain", "job_events", "main", "numbered_rows", "queue"]


_RUNTIMES = (constants.TRAINING_RUNTIME, constants.CLUSTER_TRAINING_RUNTIME)


async def _list(
    client: Reader, res: Resource, namespace: str | None, field_selector: str | None = None
) -> list[Obj]:
    items: list[Obj] = []
    token: str | None = None
    while True:
        page = await client.list(
            res, namespace=namespace, field_selector=field_selector, limit=500, continue_token=token
        )
        items.extend(i for i in page.get("items") or [] if isinstance(i, dict))
        token = (page.get("metadata") or {}).get("continue") or None
        if token is None:
            return items


async def _list_quietly(
    client: Reader, res: Resource, namespace: str | None, field_selector: str | None = None
) -> list[Obj]:
    try:
        return await _list(client, res, namespace, field_selector)
    except ApiError:
        return []


async def _context(client: Reader, namespace: str | None) -> OperatorContext:
    classes, *runtime_lists = await asyncio.gather(
        _list_quietly(client, PRIORITY_CLASSES, None),
        *(_list_quietly(client, r, namespace if r.namespaced else None) for r in _RUNTIMES),
    )
    runtimes: dict[str, Obj] = {}
    for res, objs in zip(_RUNTIMES, runtime_lists, strict=True):
        for o in objs:
            meta = o.get("metadata") or {}
            runtimes[f"{res.kind}/{meta.get('namespace') or ''}/{meta.get('name') or ''}"] = o
    return operator_context(classes, runtimes)


async def collect_rows(client: Reader, namespace: str | None, *, warn: list[str]) -> list[JobRow]:
    """Every job of every installed kind in ``namespace`` (``None``: all), unordered."""
    ctx = await _context(client, namespace)

    async def one(kind: JobKind) -> list[JobRow]:
        try:
            objs = await _list(client, kind.resource, namespace)
        except NotFound:
            return []
        except ApiError as exc:
            warn.append(f"cannot list {kind.resource.plural}: {exc}")
            return []
        return [job_row(kind, o, ctx) for o in objs]

    per_kind = await asyncio.gather(*(one(k) for k in JOB_KINDS))
    return [row for rows in per_kind for row in rows]


async def job_events(client: Reader, row: JobRow) -> list[Obj]:
    """The events regarding the job, oldest first."""
    selector = f"regarding.kind={row.kind},regarding.name={row.name}"
    events = await _list_quietly(client, EVENTS, row.namespace, selector)
    mine = [e for e in events if (e.get("regarding") or {}).get("uid") in ("", None, row.uid)]
    return [dict(e) for e in sort_events(mine if row.uid else events)]


async def numbered_rows(
    client: Reader,
    namespace: str | None,
    *,
    now: datetime,
    config: SchedulerConfig | None,
    warn: list[str],
) -> list[JobRow]:
    """The jobs of ``namespace`` (``None``: all), every waiting one numbered in the cluster-wide
    order (:func:`with_positions` over every namespace, since one operator orders them all).
    When listing every namespace is refused, only the persisted positions are shown: numbers
    computed from one namespace would skip the other namespaces' jobs."""
    if namespace is None:
        return with_positions(await collect_rows(client, None, warn=warn), now=now, config=config)
    refused: list[str] = []
    everything = await collect_rows(client, None, warn=refused)
    if not refused:
        numbered = with_positions(everything, now=now, config=config)
        return [r for r in numbered if r.namespace == namespace]
    warn.append("cannot list every namespace, so waiting jobs past the first 10 are not numbered")
    return await collect_rows(client, namespace, warn=warn)


async def queue(
    client: Reader,
    *,
    namespace: str | None,
    now: datetime,
    output: str = "",
    config: SchedulerConfig | None = None,
) -> int:
    """Print the queue of ``namespace`` (``None``: all namespaces) as a table, or as a
    ``json``/``yaml`` document (``output``)."""
    warn: list[str] = []
    rows = await numbered_rows(client, namespace, now=now, config=config, warn=warn)
    for line in warn:
        print(f"warning: {line}", file=sys.stderr)
    ordered = queue_order(rows)
    if output:
        sys.stdout.write(queue_document(ordered, now=now, fmt=output))
        return 1 if warn and not rows else 0
    if not rows:
        where = "any namespace" if namespace is None else f"namespace {namespace}"
        print(f"No jobs found in {where}.", file=sys.stderr)
        return 1 if warn else 0
    sys.stdout.write(queue_table(ordered, now))
    return 0


async def explain(
    client: Reader,
    *,
    job: str,
    namespace: str,
    now: datetime,
    events: int = 15,
    same_namespace: bool = False,
    config: SchedulerConfig | None = None,
) -> int:
    """Print why ``job`` (``KIND/NAME``) in ``namespace`` is where it is."""
    kind_name, _, name = job.partition("/")
    if not name:
        print("explain: expected KIND/NAME, e.g. trainingjob/my-job", file=sys.stderr)
        return 2
    try:
        kind = resolve_kind(kind_name)
    except ValueError as exc:
        print(f"explain: {exc}", file=sys.stderr)
        return 2
    try:
        obj = await client.get(kind.resource, name, namespace=namespace)
    except NotFound:
        where = f"namespace {namespace}"
        print(f'{kind.resource.plural} "{name}" not found in {where}', file=sys.stderr)
        return 1
    row = job_row(kind, obj, await _context(client, namespace))
    ahead: list[JobRow] = []
    scope = "all namespaces"
    if row.waiting:
        warn: list[str] = []
        others = [] if same_namespace else await collect_rows(client, None, warn=warn)
        if same_namespace or warn:
            scope = f"namespace {namespace} only"
            others = await collect_rows(client, namespace, warn=[])
        # Numbers computed from one namespace are right only when the operator orders just that
        # one (--same-namespace says so); after a refusal, show the persisted positions only.
        numbered = others if warn else with_positions(others, now=now, config=config)
        me = next((o for o in numbered if o.kind == row.kind and o.ref == row.ref), None)
        if me is not None and me.position is not None:
            row = replace(row, position=me.position, computed=me.computed)
            ahead = [o for o in queue_order(numbered) if o.position and o.position < me.position]
    found = await job_events(client, row) if events > 0 else []
    sys.stdout.write(
        explain_text(row, ahead=ahead, events=found, now=now, ahead_scope=scope, limit=events)
    )
    return 0


def _parser() -> argparse.ArgumentParser:
    # SUPPRESS: an option left out after the subcommand must not reset one given before it.
    common = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    common.add_argument("--kubeconfig", help="kubeconfig file(s) (default: $KUBECONFIG)")
    common.add_argument("--context", help="kubeconfig context (default: the current one)")
    common.add_argument("-n", "--namespace", help="namespace (default: the context's)")
    p = argparse.ArgumentParser(
        prog="kubectl lattice",
        description="The Lattice scheduler's queue and decisions, read from job status and events.",
        parents=[common],
    )
    sub = p.add_subparsers(dest="command", required=True)
    common.add_argument(
        "--queueing-strategy",
        choices=[str(s) for s in Strategy],
        help="the operator's --queueing-strategy, to number the waiting jobs past the ones the "
        f"scheduler numbered (default: {SchedulerConfig().strategy})",
    )
    q = sub.add_parser("queue", parents=[common], help="every job of every kind, in order")
    q.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    q.add_argument("-o", "--output", choices=FORMATS, help="print a document, not a table")
    e = sub.add_parser("explain", parents=[common], help="why a job is where it is")
    e.add_argument("job", metavar="KIND/NAME", help="e.g. trainingjob/my-job, mpijob/pi")
    e.add_argument(
        "--events",
        type=int,
        default=15,
        help="most recent events to show, of the scheduler's and of the others (15 each)",
    )
    e.add_argument(
        "--same-namespace",
        action="store_true",
        help="jobs ahead from its own namespace only (for an operator run with --namespaces)",
    )
    return p


def _read_configs(paths: Sequence[str]) -> list[Mapping[str, Any]]:
    configs = []
    for path in paths:
        try:
            loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(loaded, Mapping):
            configs.append(loaded)
    return configs


async def _run(args: argparse.Namespace, client: Reader) -> int:
    now = RealClock().now()
    strategy = args.queueing_strategy or SchedulerConfig().strategy
    config = SchedulerConfig(strategy=Strategy(strategy))
    try:
        if args.command == "queue":
            namespace = None if args.all_namespaces else args.namespace
            return await queue(
                client, namespace=namespace, now=now, output=args.output or "", config=config
            )
        return await explain(
            client,
            job=args.job,
            namespace=args.namespace,
            now=now,
            events=args.events,
            same_namespace=args.same_namespace,
            config=config,
        )
    except ApiError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``kubectl-lattice``; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    for option in ("kubeconfig", "context", "namespace", "queueing_strategy"):
        setattr(args, option, getattr(args, option, None))
    if args.command == "queue" and args.all_namespaces and args.namespace:
        parser.error("-n/--namespace and -A/--all-namespaces exclude each other")
    paths = kubeconfig_paths(args.kubeconfig, os.environ, str(Path.home()))
    if not args.namespace:
        args.namespace = context_namespace(_read_configs(paths), args.context)
    reader = KubectlReader(kubeconfig=args.kubeconfig, context=args.context)
    return asyncio.run(_run(args, reader))
