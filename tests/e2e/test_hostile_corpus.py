"""The hostile corpus (``hostile_corpus.py``) against one operator process (issue 26).

Every case is applied with ``kubectl apply`` in one namespace watched by one operator. Then:

- a case expected ``rejected`` was refused, and the apiserver's message names the field;
- every accepted job settles by the strict check (:mod:`tests.support.settled`): failed with a
  reason, waiting with a reason and no pod, or running with all its pods; none is left running
  with no pods, ``Wrong`` without a reason, or without any stage;
- a case expected ``failed`` or ``waiting`` ends so, and its reason names the field;
- the operator never exits, ``/healthz`` stays 200, and a valid job applied afterwards runs.

The observed outcome of every case is printed as a table, so a failure shows the whole picture.
"""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

from tests.e2e.conftest import OperatorProcess, Pool, explained
from tests.e2e.hostile_corpus import CASES, REJECTED, RUNTIME, Hostile, base, set_path
from tests.e2e.test_faults import FLAGS, healthz
from tests.support.cluster import Cluster, KubectlError
from tests.support.settled import Verdict, namespace_state, verdict
from tests.support.wait import WaitTimeout, wait_for

SETTLE_TIMEOUT = 120.0


def _apply(cluster: Cluster, namespace: str, case: Hostile) -> str | None:
    """``None`` when accepted, else kubectl's error output."""
    try:
        cluster.kubectl(
            "apply", "-n", namespace, "-f", "-", stdin=json.dumps(case.manifest), timeout=30
        )
    except KubectlError as exc:
        return exc.stderr.strip() or exc.stdout.strip()
    return None


def _verdicts(cluster: Cluster, namespace: str, accepted: list[Hostile]) -> dict[str, Verdict]:
    state = namespace_state(cluster, namespace)
    by_kind: dict[str, dict[str, Any]] = {}
    out = {}
    for case in accepted:
        kind = case.manifest["kind"]
        if kind not in by_kind:
            items = cluster.get_json(f"{kind.lower()}s", "-n", namespace)["items"]
            by_kind[kind] = {j["metadata"]["name"]: j for j in items}
        job = by_kind[kind].get(case.manifest["metadata"]["name"])
        if job is None:
            out[case.id] = Verdict(kind, case.manifest["metadata"]["name"], None, "gone")
        else:
            out[case.id] = verdict(job, state)
    return out


def _wrong(case: Hostile, rejected: str | None, seen: Verdict | None) -> str | None:
    """Why the observed outcome of ``case`` is not the expected one (None: it is)."""
    if case.outcome == REJECTED:
        if rejected is None:
            return "accepted"
        missing = [s for s in case.says if s not in rejected]
        return f"message lacks {missing}: {rejected}" if missing else None
    if rejected is not None:
        return f"rejected: {rejected}"
    assert seen is not None
    if not seen.settled:
        return f"unsettled: {seen.detail}"
    if seen.outcome != case.outcome:
        return f"{seen.outcome}: {seen.detail}"
    missing = [s for s in case.says if s not in seen.detail]
    return f"reason lacks {missing}: {seen.detail}" if missing else None


def test_hostile_corpus_outcomes(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    cluster = crds_installed
    pool.add(count=4, gpus=8)
    op: OperatorProcess = operator(*FLAGS)
    cluster.apply(base("TrainingRuntime", RUNTIME), namespace=namespace)
    rejected: dict[str, str | None] = {}
    cluster_scoped: list[str] = []
    try:
        with explained(op):
            for case in CASES:
                rejected[case.id] = _apply(cluster, namespace, case)
                if rejected[case.id] is None and case.manifest["kind"] == "ClusterTrainingRuntime":
                    cluster_scoped.append(case.manifest["metadata"]["name"])
            accepted = [
                c
                for c in CASES
                if rejected[c.id] is None and not c.manifest["kind"].endswith("Runtime")
            ]
            with contextlib.suppress(WaitTimeout):  # the table below says what did not settle
                wait_for(
                    lambda: _verdicts(cluster, namespace, accepted),
                    lambda v: all(x.settled for x in v.values()),
                    timeout=SETTLE_TIMEOUT,
                    interval=2.0,
                    what="every accepted hostile job settled",
                )
            seen = _verdicts(cluster, namespace, accepted)
            wrong = {}
            for case in CASES:
                why = _wrong(case, rejected[case.id], seen.get(case.id))
                shown = rejected[case.id] or str(seen.get(case.id, ""))
                print(
                    f"{'ok ' if why is None else 'BAD'} {case.id:<28} {case.outcome:<8} "
                    f"{shown[:160]!r}"
                )
                if why is not None:
                    wrong[case.id] = why
            assert op.popen is not None
            assert op.popen.poll() is None, "the operator exited on the hostile corpus"
            assert healthz(op) == 200
            assert not wrong, "cases with the wrong outcome:\n" + "\n".join(
                f"{k}: expected {next(c.outcome for c in CASES if c.id == k)}, {v}"
                for k, v in wrong.items()
            )
            after = base("TrainingJob", "valid-after")
            cluster.apply(after, namespace=namespace)
            job = wait_for(
                lambda: _verdicts(
                    cluster, namespace, [Hostile("valid-after", after, "running", ())]
                )["valid-after"],
                lambda v: v.outcome == "running",
                timeout=60,
                what="a valid job after the corpus runs",
            )
            print(job)
            assert op.popen.poll() is None
    finally:
        for name in cluster_scoped:
            cluster.kubectl("delete", "clustertrainingruntime", name, "--wait=false", check=False)


# --- edits of a running job (transition rules) ---------------------------------------------------


def _verdict_of(cluster: Cluster, namespace: str, manifest: dict[str, Any]) -> Verdict:
    case = Hostile(manifest["metadata"]["name"], manifest, "running", ())
    return _verdicts(cluster, namespace, [case])[case.id]


def _edited(manifest: dict[str, Any], path: str, value: Any) -> Hostile:
    case = copy.deepcopy(manifest)
    set_path(case, path, value)
    return Hostile(f"edit {path}", case, REJECTED, ())


def test_edits_that_would_invalidate_a_running_job_are_refused(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    """Issue 26 item 1: a running job renamed out of its container rules was Wrong with its pods
    still running. Now the apiserver refuses such an edit while the job holds pods, naming the
    field and the rule; an edit of a job that holds nothing is still accepted (and judged)."""
    cluster = crds_installed
    pool.add(count=2, gpus=8)
    op: OperatorProcess = operator(*FLAGS)
    tj, mpi, mx = base("TrainingJob", "run-tj"), base("MPIJob", "run-mpi"), base("MXJob", "run-mx")
    waits = base("TrainingJob", "waits")
    set_path(waits, "spec.replicaSpecs.template.spec.nodeSelector", {"no.such/label": "x"})
    containers = "template.spec.containers"
    refused = [
        (tj, f"spec.replicaSpecs.{containers}[0].name", "main", f"{containers}[0].name"),
        (tj, "spec.injectLattice", True, "spec.injectLattice"),
        (tj, "spec.framework", "generic", "spec.framework"),
        (mpi, f"spec.mpiReplicaSpecs.Worker.{containers}[0].name", "w2", "spec.mpiReplicaSpecs"),
        (mx, f"spec.mxReplicaSpecs.Server.{containers}[0].name", "ps", "spec.mxReplicaSpecs"),
    ]
    with explained(op):
        for manifest in (tj, mpi, mx, waits):
            cluster.apply(manifest, namespace=namespace)
        for manifest in (tj, mpi, mx):

            def probe(m: dict[str, Any] = manifest) -> Verdict:
                return _verdict_of(cluster, namespace, m)

            wait_for(
                probe,
                lambda v: v.outcome == "running",
                timeout=90,
                what=f"{manifest['kind']} {manifest['metadata']['name']} running with its pods",
            )
        for manifest, path, value, field in refused:
            edit = _edited(manifest, path, value)
            said = _apply(cluster, namespace, edit)
            print(f"{manifest['kind']} {path}={value!r}: {said}")
            assert said is not None, f"{edit.id} of a running {manifest['kind']} was accepted"
            assert field in said, said
            assert "must not change while the job holds pods" in said, said
        # An edit the rules allow goes through on a running job: only the named fields freeze.
        image = f"spec.replicaSpecs.{containers}[0].image"
        assert _apply(cluster, namespace, _edited(tj, image, "busybox:1.37")) is None
        for manifest in (tj, mpi, mx):
            seen = _verdict_of(cluster, namespace, manifest)
            assert seen.outcome == "running", f"after the refused edits: {seen}"
        # A job that holds nothing may still be renamed; the operator then judges it Wrong.
        wait_for(
            lambda: _verdict_of(cluster, namespace, waits),
            lambda v: v.outcome == "waiting",
            timeout=60,
            what="waits is waiting",
        )
        renamed = _edited(waits, f"spec.replicaSpecs.{containers}[0].name", "main")
        assert _apply(cluster, namespace, renamed) is None
        wrong = wait_for(
            lambda: _verdict_of(cluster, namespace, waits),
            lambda v: v.outcome == "failed",
            timeout=60,
            what="the renamed waiting job fails, naming the field",
        )
        assert f"{containers}[0].name" in wrong.detail, wrong
        assert op.popen is not None
        assert op.popen.poll() is None
