"""``kubectl lattice explain`` shows a child-creation refusal (issue 26, item 2): the row reads
the reconciler's ``ChildCreateRefused`` condition, the verdict and the details quote the
apiserver, and a job requeued for it says why."""

from __future__ import annotations

from datetime import timedelta

from lattice.kubectl.render import explain_text, verdict
from lattice.kubectl.rows import job_row, resolve_kind
from lattice.primitives.times import format_time
from tests.unit.test_kubectl_plugin import CTX, NOW, mpijob, row, trainingjob

WORDS = 'pods "bad-worker-0" is forbidden: no PriorityClass with name gold was found'


def _refused_condition() -> dict[str, str]:
    return {
        "type": "Created",
        "status": "False",
        "reason": "ChildCreateRefused",
        "message": WORDS,
        "lastTransitionTime": format_time(NOW - timedelta(seconds=20)),
    }


def test_a_row_reads_the_refusal_of_either_status_layout() -> None:
    exec_status = {"conditions": [_refused_condition()]}
    tj = trainingjob(
        "bad", status={"stage": "Running", "currentSize": 1, "execStatus": exec_status}
    )
    r = job_row(resolve_kind("tj"), tj, CTX)
    assert (r.refused, r.refused_since) == (WORDS, NOW - timedelta(seconds=20))
    mpi = mpijob("bad")
    mpi["status"] = {**exec_status, "lattice": {"stage": "Running", "currentSize": 3}}
    assert job_row(resolve_kind("mpijob"), mpi, CTX).refused == WORDS
    assert job_row(resolve_kind("tj"), trainingjob("ok"), CTX).refused == ""


def test_explain_puts_a_refusal_first_and_in_the_details() -> None:
    r = row(
        "bad", stage="Running", size=1, refused=WORDS, refused_since=NOW - timedelta(seconds=20)
    )
    why = verdict(r, NOW)
    assert why.startswith("It holds size 1, but the apiserver has refused its children for 20s")
    assert WORDS in why
    assert "--child-refusal-timeout" in why
    text = explain_text(r, ahead=[], events=[], now=NOW)
    assert f"Refused:       {WORDS}" in text


def test_a_job_requeued_for_a_refusal_says_so() -> None:
    decision = f"Requeued: the apiserver refused its children for 1m0s ({WORDS}); cooldown until x"
    r = row("bad", stage="RequeueCooldown", last_decision=decision, requeue_count=1)
    why = verdict(r, NOW)
    assert why.startswith("The apiserver refused its children past the refusal timeout")
    assert WORDS in why
    pending = verdict(
        row("p", stage="RequeueCooldown", last_decision="Requeued: pods pending"), NOW
    )
    assert pending.startswith("Its pods stayed Pending past the pending timeout")
