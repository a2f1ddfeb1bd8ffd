"""MPIJob (``kubeflow.org/v2beta1``) end to end: the operator process, kwok nodes, ``kubectl``.

1. The mpi-operator ``pi`` example, applied unchanged: the exact children (ConfigMap with the
   hostfile and ``discover_hosts.sh``, ssh Secret with a fresh key pair, headless Service, worker
   pods, the launcher batch Job and its pod), their names, labels and env; kube-controller-
   manager's job controller runs the launcher, kwok completes it, the MPIJob Succeeds with
   mpi-operator's reasons, cleanPodPolicy Running takes the workers (only), both metric families
   count it.
2. ``launcherCreationPolicy: WaitForWorkersReady``: no launcher while the workers cannot be
   scheduled; ``discover_hosts.sh`` lists only Running workers, updated in place.
3. ``runPolicy.suspend``: nothing is created until the job is resumed.
4. Failures follow the launcher Job: its backoffLimit and its activeDeadlineSeconds.

Pods finish through kwok: the launcher of ``pi`` through kwok's own stage for Job pods, the
others through the project's stage (``kwok.lattice.breezeml.ai/exit-code`` / ``run-for``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.e2e.conftest import OperatorProcess, Pool, explained
from tests.e2e.test_trainingjob_lifecycle import metrics_of, sample, samples
from tests.e2e.test_trainingjob_scheduling import GPU
from tests.support.apply import apply_and_wait
from tests.support.cluster import REPO, Cluster
from tests.support.wait import wait_for

EXAMPLES = REPO / "examples"
FLAGS = (f"--scheduling-unit={GPU}", "--resize-interval=0")
TIMEOUT = 60.0
EXIT_CODE = "kwok.lattice.breezeml.ai/exit-code"
RUN_FOR = "kwok.lattice.breezeml.ai/run-for"
MANAGED = "lattice.breezeml.ai/managed"
OPERATOR_NAME = "training.kubeflow.org/operator-name"
JOB_NAME = "training.kubeflow.org/job-name"
JOB_ROLE = "training.kubeflow.org/job-role"
REPLICA_INDEX = "training.kubeflow.org/replica-index"


# --- shared helpers (also used by the MXJob and gang e2e files) --------------------------------


class Watch:
    """Every version of the objects of one resource in a namespace, as ``kubectl get -w``
    streams them: catches children that live too briefly to poll (cleaned worker pods)."""

    def __init__(self, cluster: Cluster, namespace: str, plural: str) -> None:
        self.plural = plural
        self._seen: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        self._lock = threading.Lock()
        self._proc = subprocess.Popen(
            [
                "kubectl",
                "get",
                plural,
                "-n",
                namespace,
                "-w",
                "--output-watch-events",
                "-o",
                "json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=cluster.env,
            text=True,
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                obj = event.get("object") or {}
                name = str((obj.get("metadata") or {}).get("name", ""))
                with self._lock:
                    self._seen.setdefault(name, []).append((str(event.get("type")), obj))

    def first(self, name: str) -> dict[str, Any] | None:
        """The object as first seen (its creation), or None."""
        with self._lock:
            versions = self._seen.get(name) or []
            return versions[0][1] if versions else None

    def versions(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [obj for _, obj in self._seen.get(name) or []]

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._seen)

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(timeout=10)


@pytest.fixture
def watch(crds_installed: Cluster, namespace: str) -> Iterator[Callable[[str], Watch]]:
    started: list[Watch] = []

    def start(plural: str) -> Watch:
        w = Watch(crds_installed, namespace, plural)
        started.append(w)
        return w

    yield start
    for w in started:
        w.stop()


class Kubeflow:
    """A user's ``kubectl`` view of one Kubeflow kind (status at ``.status``, the scheduler's
    block at ``.status.lattice``) in one namespace."""

    def __init__(self, cluster: Cluster, namespace: str, plural: str, kind: str) -> None:
        self.cluster = cluster
        self.ns = namespace
        self.plural = plural
        self.kind = kind

    def apply(self, manifest: dict[str, Any]) -> None:
        self.cluster.apply(manifest, namespace=self.ns)

    def apply_example(self, *path: str) -> None:
        """``kubectl apply -n <ns> -f examples/...``: the file as it is."""
        self.cluster.kubectl("apply", "-n", self.ns, "-f", str(EXAMPLES.joinpath(*path)))

    def get(self, name: str) -> dict[str, Any]:
        out = self.cluster.kubectl(
            "get", self.plural, name, "-n", self.ns, "-o", "json", "--ignore-not-found"
        )
        return dict(json.loads(out)) if out.strip() else {}

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.get(name).get("status") or {})

    def conditions(self, name: str) -> dict[str, dict[str, Any]]:
        return {c["type"]: c for c in self.status(name).get("conditions") or []}

    def wait(
        self,
        name: str,
        until: Callable[[dict[str, Any]], bool],
        *,
        what: str,
        timeout: float = TIMEOUT,
    ) -> dict[str, Any]:
        """Wait until ``until(status)`` holds; returns the status."""
        return wait_for(lambda: self.status(name), until, timeout=timeout, what=what)

    def wait_stage(self, name: str, stage: str) -> dict[str, Any]:
        """Wait until the scheduler's block shows ``stage`` (it writes a finished job's stage
        from the reconciler's conditions, a watch hop after them); returns the status."""
        return self.wait(
            name,
            lambda s: (s.get("lattice") or {}).get("stage") == stage,
            what=f"{self.kind} {name} stage {stage}",
        )

    def wait_condition(self, name: str, type_: str, status: str = "True") -> dict[str, Any]:
        def has(s: dict[str, Any]) -> bool:
            return any(
                c.get("type") == type_ and c.get("status") == status
                for c in s.get("conditions") or []
            )

        return self.wait(name, has, what=f"{self.kind} {name} {type_}={status}")

    def events(self, name: str, reason: str | None = None) -> list[dict[str, Any]]:
        items = self.cluster.get_json("events.v1.events.k8s.io", "-n", self.ns)["items"]
        return [
            e
            for e in items
            if (e.get("regarding") or {}).get("kind") == self.kind
            and (e.get("regarding") or {}).get("name") == name
            and (reason is None or e.get("reason") == reason)
        ]

    def wait_event(self, name: str, reason: str) -> dict[str, Any]:
        found = wait_for(
            lambda: self.events(name, reason),
            timeout=TIMEOUT,
            what=f"a {reason} event about {self.kind} {name}",
        )
        return found[0]

    def owned(self, plural: str, name: str) -> dict[str, dict[str, Any]]:
        """Live objects of ``plural`` whose controller is this kind's job ``name``."""
        items = self.cluster.get_json(plural, "-n", self.ns)["items"]
        out = {}
        for obj in items:
            meta = obj["metadata"]
            refs = [r for r in meta.get("ownerReferences") or [] if r.get("controller")]
            if meta.get("deletionTimestamp") or not refs:
                continue
            if (refs[0].get("kind"), refs[0].get("name")) == (self.kind, name):
                out[meta["name"]] = obj
        return out

    def pods(self, job: str) -> dict[str, dict[str, Any]]:
        """Live pods labelled with ``job``'s name (workers and, for MPI, the launcher)."""
        items = self.cluster.get_json("pods", "-n", self.ns, "-l", f"{JOB_NAME}={job}")["items"]
        return {
            p["metadata"]["name"]: p for p in items if not p["metadata"].get("deletionTimestamp")
        }

    def phases(self, job: str) -> dict[str, str]:
        return {n: (p.get("status") or {}).get("phase", "") for n, p in self.pods(job).items()}

    def finish(self, pod: str, code: int) -> None:
        """Let one running pod exit with ``code`` now (the workload, not the operator)."""
        self.cluster.kubectl(
            "annotate", "pod", pod, "-n", self.ns, f"{EXIT_CODE}={code}", f"{RUN_FOR}=0s"
        )


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env") or []}


def controller_of(obj: dict[str, Any]) -> tuple[str, str, str]:
    refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")]
    assert len(refs) == 1, obj["metadata"]
    return refs[0]["kind"], refs[0]["name"], refs[0]["uid"]


def scrape(op: OperatorProcess) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    try:
        return samples(metrics_of(op))
    except OSError:
        return {}


def mpijob(
    name: str,
    *,
    workers: int = 2,
    gpus: int = 0,
    launcher_annotations: dict[str, str] | None = None,
    worker_annotations: dict[str, str] | None = None,
    run_policy: dict[str, Any] | None = None,
    worker_node_selector: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """An OpenMPI job shaped like ``pi`` (workers asking ``gpus`` each)."""
    worker_resources = {"limits": {GPU: str(gpus)}} if gpus else {}
    worker_spec: dict[str, Any] = {
        "containers": [
            {
                "name": "mpi-worker",
                "image": "mpioperator/mpi-pi:openmpi",
                "command": ["/usr/sbin/sshd"],
                "args": ["-De"],
                "resources": worker_resources,
            }
        ]
    }
    if worker_node_selector:
        worker_spec["nodeSelector"] = worker_node_selector
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "slotsPerWorker": 1,
            "runPolicy": run_policy or {},
            "sshAuthMountPath": "/home/mpiuser/.ssh",
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "template": {
                        "metadata": {"annotations": launcher_annotations or {}},
                        "spec": {
                            "containers": [
                                {
                                    "name": "mpi-launcher",
                                    "image": "mpioperator/mpi-pi:openmpi",
                                    "command": ["mpirun"],
                                    "args": ["-n", str(workers), "/home/mpiuser/pi"],
                                }
                            ]
                        },
                    },
                },
                "Worker": {
                    "replicas": workers,
                    "template": {
                        "metadata": {"annotations": worker_annotations or {}},
                        "spec": worker_spec,
                    },
                },
            },
            **spec,
        },
    }


def finishing(code: int, after: str = "0s") -> dict[str, str]:
    return {EXIT_CODE: str(code), RUN_FOR: after}


# --- 1. the pi example -------------------------------------------------------------------------


def test_pi_example_children_env_and_success(
    crds_installed: Cluster,
    namespace: str,
    pool: Pool,
    operator: Any,
    watch: Callable[[str], Watch],
) -> None:
    pool.add(count=1, gpus=4)
    pods, config_maps = watch("pods"), watch("configmaps")
    op: OperatorProcess = operator(*FLAGS)
    mpi = Kubeflow(crds_installed, namespace, "mpijobs", "MPIJob")
    ns = namespace
    with explained(op):
        mpi.apply_example("mpijob", "pi.yaml")
        status = mpi.wait_condition("pi", "Succeeded")
        uid = mpi.get("pi")["metadata"]["uid"]
        conds = {c["type"]: c for c in status["conditions"]}
        assert (conds["Created"]["reason"], conds["Created"]["message"]) == (
            "MPIJobCreated",
            f"MPIJob {ns}/pi is created.",
        )
        assert (conds["Succeeded"]["reason"], conds["Succeeded"]["message"]) == (
            "MPIJobSucceeded",
            f"MPIJob {ns}/pi successfully completed.",
        )
        assert conds["Running"]["status"] == "False"
        assert conds["Running"]["reason"] == "MPIJobRunning"
        assert "Failed" not in conds
        assert status["replicaStatuses"]["Launcher"]["succeeded"] == 1
        mpi.wait_stage("pi", "Completed")
        assert status["startTime"]
        assert status["completionTime"]

        # The launcher: a batch/v1 Job the job controller runs; kwok completes its pod.
        launcher = mpi.owned("jobs.batch", "pi")["pi-launcher"]
        assert controller_of(launcher) == ("MPIJob", "pi", uid)
        assert launcher["metadata"]["labels"] == {"app": "pi", MANAGED: "true"}
        spec = launcher["spec"]
        assert (spec["podReplacementPolicy"], spec["ttlSecondsAfterFinished"]) == ("Failed", 60)
        ours = {
            k: v
            for k, v in spec["template"]["metadata"]["labels"].items()
            if k not in ("controller-uid", "job-name") and not k.startswith("batch.kubernetes.io/")
        }  # the job controller adds its own selector labels
        assert ours == {
            OPERATOR_NAME: "mpi-operator",
            JOB_NAME: "pi",
            JOB_ROLE: "launcher",
            MANAGED: "true",
        }
        pod_spec = spec["template"]["spec"]
        assert (pod_spec["hostname"], pod_spec["subdomain"]) == ("pi-launcher", "pi")
        assert pod_spec["restartPolicy"] == "OnFailure"
        container = pod_spec["containers"][0]
        assert (container["command"], container["args"]) == (
            ["mpirun"],
            ["-n", "2", "/home/mpiuser/pi"],
        )
        assert env_of(container) == {
            "K_MPI_JOB_ROLE": "launcher",
            "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
            "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
            "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
            "OMPI_MCA_orte_set_default_slots": "1",
            "NVIDIA_VISIBLE_DEVICES": "",
            "NVIDIA_DRIVER_CAPABILITIES": "",
        }
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert mounts == {"ssh-auth": "/home/mpiuser/.ssh", "mpi-job-config": "/etc/mpi"}
        volumes = {v["name"]: v for v in pod_spec["volumes"]}
        assert volumes["mpi-job-config"]["configMap"] == {
            "name": "pi-config",
            "items": [
                {"key": "hostfile", "path": "hostfile", "mode": 0o444},
                {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555},
            ],
            "defaultMode": 0o644,
        }
        assert volumes["ssh-auth"]["secret"]["secretName"] == "pi-ssh"
        assert [c["type"] for c in launcher["status"]["conditions"] if c["status"] == "True"][
            -1
        ] == "Complete"
        launcher_pods = [
            p
            for n in pods.names()
            for p in pods.versions(n)[-1:]
            if p["metadata"]["labels"].get(JOB_ROLE) == "launcher"
        ]
        assert len(launcher_pods) == 1
        assert launcher_pods[0]["metadata"]["name"].startswith("pi-launcher-")
        assert launcher_pods[0]["status"]["phase"] == "Succeeded"

        # Workers: pi-worker-<i>, hostname and subdomain, sshd as the user wrote it.
        for i in range(2):
            worker = pods.first(f"pi-worker-{i}")
            assert worker is not None, pods.names()
            assert controller_of(worker) == ("MPIJob", "pi", uid)
            assert worker["metadata"]["labels"] == {
                OPERATOR_NAME: "mpi-operator",
                JOB_NAME: "pi",
                JOB_ROLE: "worker",
                REPLICA_INDEX: str(i),
                MANAGED: "true",
            }
            spec = worker["spec"]
            assert (spec["hostname"], spec["subdomain"]) == (f"pi-worker-{i}", "pi")
            assert spec["dnsConfig"]["searches"] == [f"pi.{ns}.svc.cluster.local"]
            assert spec["restartPolicy"] == "Never"
            container = spec["containers"][0]
            assert (container["command"], container["args"]) == (
                ["/usr/sbin/sshd"],
                ["-De", "-f", "/home/mpiuser/.sshd_config"],
            )
            assert env_of(container) == {"K_MPI_JOB_ROLE": "worker"}
            mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
            assert mounts["ssh-auth"] == "/home/mpiuser/.ssh"
            assert "mpi-job-config" not in mounts

        # cleanPodPolicy Running: the workers go; the Service, ConfigMap, Secret and Job stay.
        wait_for(
            lambda: mpi.owned("pods", "pi"), lambda p: p == {}, timeout=TIMEOUT, what="workers go"
        )
        service = mpi.owned("services", "pi")["pi"]
        assert service["metadata"]["labels"] == {"app": "pi", MANAGED: "true"}
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["selector"] == {OPERATOR_NAME: "mpi-operator", JOB_NAME: "pi"}

        config = mpi.owned("configmaps", "pi")["pi-config"]
        assert config["metadata"]["labels"] == {"app": "pi", MANAGED: "true"}
        assert config["data"]["hostfile"] == (
            f"pi-worker-0.pi.{ns}.svc slots=1\npi-worker-1.pi.{ns}.svc slots=1\n"
        )
        first = config_maps.first("pi-config")
        assert first is not None
        assert first["data"]["discover_hosts.sh"] == "#!/bin/sh\n", "no worker runs yet"
        scripts = {v["data"]["discover_hosts.sh"] for v in config_maps.versions("pi-config")}
        both = f"#!/bin/sh\necho pi-worker-0.pi.{ns}.svc\necho pi-worker-1.pi.{ns}.svc\n"
        one = {f"#!/bin/sh\necho pi-worker-{i}.pi.{ns}.svc\n" for i in range(2)}
        assert scripts <= {"#!/bin/sh\n", both, *one}, scripts

        secret = mpi.owned("secrets", "pi")["pi-ssh"]
        assert secret["type"] == "kubernetes.io/ssh-auth"
        assert secret["metadata"]["labels"] == {"app": "pi", MANAGED: "true"}
        private = base64.b64decode(secret["data"]["ssh-privatekey"]).decode()
        public = base64.b64decode(secret["data"]["ssh-publickey"]).decode()
        assert private.startswith("-----BEGIN EC PRIVATE KEY-----")
        assert public.startswith("ecdsa-sha2-nistp521 ")

        assert mpi.wait_event("pi", "MPIJobCreated")["type"] == "Normal"
        succeeded = mpi.wait_event("pi", "MPIJobSucceeded")
        assert (succeeded["type"], succeeded["note"]) == (
            "Normal",
            f"MPIJob {ns}/pi successfully completed.",
        )
        created = {e["note"] for e in mpi.events("pi", "SuccessfulCreatePod")}
        assert created == {"Created pod: pi-worker-0", "Created pod: pi-worker-1"}

        def counted(s: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> bool:
            return sample(s, "mpi_operator_jobs_successful_total") == 1

        s = wait_for(lambda: scrape(op), counted, timeout=TIMEOUT, what="MPI metrics")
        assert sample(s, "mpi_operator_jobs_created_total") == 1
        labels = {"job_namespace": ns, "framework": "mpi"}
        assert sample(s, "training_operator_jobs_created_total", **labels) == 1
        assert sample(s, "training_operator_jobs_successful_total", **labels) == 1


# --- 2. WaitForWorkersReady and discover_hosts.sh ----------------------------------------------


def test_launcher_waits_for_ready_workers_and_discover_hosts_follows_running_ones(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    (node,) = pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    mpi = Kubeflow(crds_installed, namespace, "mpijobs", "MPIJob")
    ns = namespace
    gate = {"lattice.test/gate": pool.pool_id}
    with explained(op):
        mpi.apply(
            mpijob(
                "gate",
                launcherCreationPolicy="WaitForWorkersReady",
                worker_node_selector=gate,
                launcher_annotations=finishing(0, "1s"),
                # kwok holds each worker Pending on its node this long (a slow start).
                worker_annotations={"kwok.lattice.breezeml.ai/start-after": "20s"},
            )
        )
        # No node has the gate label yet: the job waits with nothing created, and says why.
        waiting = mpi.wait(
            "gate",
            lambda s: "lattice.test/gate" in str((s.get("lattice") or {}).get("lastDecision")),
            what="gate waits, naming the selector no node matches",
        )
        assert waiting["lattice"]["stage"] == "Waiting"
        assert mpi.owned("pods", "gate") == {}
        assert mpi.owned("secrets", "gate") == {}

        crds_installed.kubectl("label", "node", node, f"lattice.test/gate={pool.pool_id}")
        # Admitted: the workers are on their node, held Pending by their slow start.
        wait_for(
            lambda: mpi.owned("secrets", "gate"),
            lambda s: "gate-ssh" in s,
            timeout=TIMEOUT,
            what="the children of gate are created",
        )
        assert mpi.phases("gate") == {"gate-worker-0": "Pending", "gate-worker-1": "Pending"}
        assert mpi.owned("jobs.batch", "gate") == {}, "no launcher before the workers are ready"
        config = mpi.owned("configmaps", "gate")["gate-config"]
        assert config["data"]["discover_hosts.sh"] == "#!/bin/sh\n"
        wait_for(
            lambda: mpi.owned("jobs.batch", "gate"),
            lambda j: "gate-launcher" in j,
            timeout=TIMEOUT,
            what="the launcher once the workers are ready",
        )
        workers = mpi.owned("pods", "gate")
        for worker in workers.values():
            ready = [c for c in worker["status"]["conditions"] if c["type"] == "Ready"]
            assert ready[0]["status"] == "True", worker["status"]
        script = f"#!/bin/sh\necho gate-worker-0.gate.{ns}.svc\necho gate-worker-1.gate.{ns}.svc\n"
        wait_for(
            lambda: mpi.owned("configmaps", "gate")["gate-config"]["data"]["discover_hosts.sh"],
            lambda s: s == script,
            timeout=TIMEOUT,
            what="discover_hosts.sh lists both running workers",
        )
        mpi.wait_condition("gate", "Succeeded")
        conds = mpi.conditions("gate")
        assert conds["Running"]["message"] == f"MPIJob {ns}/gate is running."
        running = mpi.wait_event("gate", "MPIJobRunning")
        assert running["note"] == f"MPIJob {ns}/gate is running"


# --- 3. suspend --------------------------------------------------------------------------------


def test_suspended_mpijob_creates_nothing_until_resumed(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    mpi = Kubeflow(crds_installed, namespace, "mpijobs", "MPIJob")
    with explained(op):
        status = apply_and_wait(
            crds_installed,
            mpijob("nap", run_policy={"suspend": True}),
            namespace=namespace,
            until=lambda s: (
                (s.get("lattice") or {}).get("stage") == "Waiting"
                and any(c["type"] == "Suspended" for c in s.get("conditions") or [])
            ),
            what="nap is Waiting and Suspended",
        )
        conds = {c["type"]: c for c in status["conditions"]}
        assert (conds["Suspended"]["reason"], conds["Suspended"]["message"]) == (
            "MPIJobSuspended",
            "MPIJob suspended",
        )
        assert status["lattice"]["stage"] == "Waiting"
        assert status["lattice"].get("lastDecision") == "Suspended"
        for plural in ("pods", "services", "configmaps", "secrets", "jobs.batch"):
            assert mpi.owned(plural, "nap") == {}, plural
        assert mpi.wait_event("nap", "MPIJobSuspended")["note"] == "MPIJob suspended"

        crds_installed.kubectl(
            "patch",
            "mpijob",
            "nap",
            "-n",
            namespace,
            "--type=merge",
            "-p",
            '{"spec":{"runPolicy":{"suspend":false}}}',
        )
        status = mpi.wait_condition("nap", "Succeeded")
        conds = {c["type"]: c for c in status["conditions"]}
        assert (conds["Suspended"]["status"], conds["Suspended"]["reason"]) == (
            "False",
            "MPIJobResumed",
        )
        assert conds["Suspended"]["message"] == "MPIJob resumed"
        assert sorted(mpi.owned("configmaps", "nap")) == ["nap-config"]
        assert sorted(mpi.owned("jobs.batch", "nap")) == ["nap-launcher"]


# --- 4. failures follow the launcher -----------------------------------------------------------


def test_launcher_backoff_limit_and_deadline_fail_the_job(
    crds_installed: Cluster, namespace: str, pool: Pool, operator: Any
) -> None:
    pool.add(count=1, gpus=4)
    op: OperatorProcess = operator(*FLAGS)
    mpi = Kubeflow(crds_installed, namespace, "mpijobs", "MPIJob")
    with explained(op):
        mpi.apply(
            mpijob("crash", launcher_annotations=finishing(1, "1s"), run_policy={"backoffLimit": 0})
        )
        mpi.apply(
            mpijob(
                "slow",
                launcher_annotations=finishing(0, "300s"),
                run_policy={"activeDeadlineSeconds": 2},
            )
        )
        crash = {c["type"]: c for c in mpi.wait_condition("crash", "Failed")["conditions"]}
        assert crash["Failed"]["reason"] == "BackoffLimitExceeded"
        assert crash["Failed"]["message"] == "Job has reached the specified backoff limit"
        assert mpi.wait_event("crash", "BackoffLimitExceeded")["type"] == "Warning"
        slow = {c["type"]: c for c in mpi.wait_condition("slow", "Failed")["conditions"]}
        assert slow["Failed"]["reason"] == "DeadlineExceeded"
        assert slow["Failed"]["message"] == "Job was active longer than specified deadline"
        for name in ("crash", "slow"):
            mpi.wait_stage(name, "Completed")

        def counted(s: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> bool:
            return sample(s, "mpi_operator_jobs_failed_total") == 2

        s = wait_for(lambda: scrape(op), counted, timeout=TIMEOUT, what="failures counted")
        labels = {"job_namespace": namespace, "framework": "mpi"}
        assert sample(s, "training_operator_jobs_failed_total", **labels) == 2
