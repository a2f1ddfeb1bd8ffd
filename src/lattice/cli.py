"""The ``lattice`` command line.

Subcommands:
- ``lattice crds``: write (or ``--check``) the CRD YAML generated from the API models.
- ``lattice run``: the operator process (flags and env in ``lattice.config``).
- ``lattice simulate``: replay a trace through the scheduler core (flags in ``lattice.sim.cli``).
- ``lattice version`` (or ``lattice --version``): print the version.

Invalid settings exit 2 with one line per problem, naming the flag or environment variable,
the value and the rule (:class:`lattice.config.SettingsError`).

Each subcommand is a small function; the operator process (``lattice run``) and the trace
simulator (``lattice simulate``) register here as they land.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from lattice import __version__
from lattice.config import add_arguments

__all__ = ["main"]


def _cmd_version(_: argparse.Namespace) -> int:
    print(__version__)
    return 0


def _cmd_crds(args: argparse.Namespace) -> int:
    from lattice.api import crd as crd_module

    argv = ["--output", args.output]
    if args.check:
        argv.append("--check")
    status: int = crd_module.main(argv)
    return status


#: The cyclic garbage collector's thresholds for ``lattice run`` (CPython's default is
#: (700, 10, 10)). A scheduler pass allocates a few objects per job, so at 5,000 jobs the
#: default ran a young collection many times a pass and a full one, which walks every cached
#: object, every few passes: 35-45 % of the pass time, with pauses up to 0.24 s that blocked the
#: event loop. Garbage without cycles is freed at once either way; these only make the collector
#: run less often (a young collection per 50,000 net allocations).
GC_THRESHOLDS = (50_000, 20, 10)


def _cmd_run(args: argparse.Namespace) -> int:
    import asyncio
    import gc

    from lattice import app
    from lattice.config import SettingsError, load_settings
    from lattice.runtime.logs import configure_logging

    try:
        settings = load_settings(args)
    except SettingsError as exc:
        print("lattice run: invalid settings:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        return 2
    configure_logging(level=settings.log_level, fmt=settings.log_format)
    gc.set_threshold(*GC_THRESHOLDS)
    return asyncio.run(app.run(settings))


def _cmd_simulate(args: argparse.Namespace) -> int:
    from lattice.clock import RealClock
    from lattice.sim import cli as sim_cli

    progress = sim_cli.Progress(stream=sys.stderr, monotonic=RealClock().monotonic)
    return sim_cli.main(args, progress=progress)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lattice", description="Lattice training-job operator")
    p.add_argument("--version", action="version", version=f"lattice {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run the operator")
    add_arguments(r)
    r.set_defaults(func=_cmd_run)

    v = sub.add_parser("version", help="print the version")
    v.set_defaults(func=_cmd_version)

    c = sub.add_parser("crds", help="generate the CRD YAML from the API models")
    c.add_argument(
        "--output", default="deploy/crds", help="directory to write (default: deploy/crds)"
    )
    c.add_argument("--check", action="store_true", help="exit 1 if the files there are stale")
    c.set_defaults(func=_cmd_crds)

    from lattice.sim.cli import add_arguments as add_sim_arguments

    s = sub.add_parser("simulate", help="replay a trace through the scheduler and compare policies")
    add_sim_arguments(s)
    s.set_defaults(func=_cmd_simulate)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)


if __name__ == "__main__":
    sys.exit(main())
