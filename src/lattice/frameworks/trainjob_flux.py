"""TrainJob's Flux ML policy plugin (``mlPolicy.flux``): ``lattice.frameworks.policies.flux``.

Contract (pure; the facts are Kubeflow Trainer v2.3's Flux plugin):
On the trainer job: the init container ``flux-installer`` (image ``FLUX_VIEW_IMAGE``
of the trainer's env, else the default), the view, software, scripts, CURVE and ``/dev/shm``
volumes and their mounts on the main container, whose command and args become
``flux.command`` of them; ConfigMap ``<tj>-flux-entrypoint`` (``init.sh``, ``entrypoint.sh``:
hosts ``<tj>-<trainer job>-0-[0-<n-1>]``, ``flux run -N <n> -n <tasks*n> [-g <gpus>]``, tasks
the TrainJob's numProcPerNode else the runtime's) and Secret ``<tj>-flux-curve`` whose
certificate the reconciler generates (``GENERATE_CURVE_CERT``). numProcPerNode must be an
integer >= 1; the runtime's trainer job must not have an init container ``flux-installer``.
"""

from __future__ import annotations

from collections.abc import Mapping

from lattice.api.runtime import MLPolicy, TrainingRuntimeSpec
from lattice.api.trainjob import TrainJob
from lattice.frameworks.base import Problem
from lattice.frameworks.naming import object_meta
from lattice.frameworks.policies import flux, mpi
from lattice.frameworks.policies.resources import gpus_per_node
from lattice.frameworks.trainjob_plans import NODE, ReplicatedJobPlan, ResolvedJob, upsert
from lattice.frameworks.trainjob_policy import Resources, TrainJobPolicy
from lattice.primitives.objects import Obj

__all__ = ["GENERATE_CURVE_CERT", "FluxPolicy"]

#: ``mpi.ANNOTATION_GENERATE`` value: fill ``flux.CURVE_KEY`` with a fresh CURVE certificate.
GENERATE_CURVE_CERT = "flux-curve-cert"


class FluxPolicy(TrainJobPolicy):
    """``mlPolicy.flux``: the installer, volumes, entrypoint ConfigMap and CURVE Secret."""

    name = "flux"

    def problems(self, tj: TrainJob, *, ml: MLPolicy, resources: Resources) -> list[Problem]:
        del ml, resources
        npp = tj.spec.trainer.num_proc_per_node if tj.spec.trainer else None
        if npp is None:
            return []
        if not isinstance(npp, int):
            why = f"must have an int value for Flux TrainJob, got {npp!r}"
            return [Problem("spec.trainer.numProcPerNode", why)]
        if npp < 1:
            why = f"must be greater than or equal to 1 for Flux TrainJob, got {npp}"
            return [Problem("spec.trainer.numProcPerNode", why)]
        return []

    def runtime_problems(self, spec: TrainingRuntimeSpec) -> list[Problem]:
        problems: list[Problem] = []
        for i, rjob in enumerate(spec.template.spec.replicated_jobs):
            pod = ((rjob.template.get("spec") or {}).get("template") or {}).get("spec") or {}
            for j, container in enumerate(pod.get("initContainers") or ()):
                if container.get("name") == flux.INSTALLER:
                    where = (
                        f"spec.template.spec.replicatedJobs[{i}].template.spec.template.spec"
                        f".initContainers[{j}].name"
                    )
                    why = f"{flux.INSTALLER} is reserved for the Flux policy"
                    problems.append(Problem(where, why))
        return problems

    def patch(self, job: ResolvedJob, r: ReplicatedJobPlan, spec: Obj, main: Obj) -> None:
        if r.name != job.trainer:
            return
        config = f"{job.name}-flux-entrypoint"
        image = flux.settings(main.get("env") or ())["FLUX_VIEW_IMAGE"]
        volumes = flux.volumes(config_map=config, curve_secret=f"{job.name}-flux-curve")
        spec["volumes"] = upsert(spec.get("volumes"), volumes, key="name")
        installer = flux.installer(image=image, config_volume=config)
        spec["initContainers"] = upsert(spec.get("initContainers"), [installer], key="name")
        mounts = flux.node_mounts(config_volume=config)
        main["volumeMounts"] = upsert(main.get("volumeMounts"), mounts, key="name")
        original = [*(main.get("command") or ()), *(main.get("args") or ())]
        main["command"] = flux.command([str(part) for part in original])
        main.pop("args", None)

    def objects(
        self, job: ResolvedJob, *, labels: Mapping[str, str], owner: Obj
    ) -> tuple[list[Obj], list[Obj]]:
        plan = job.rjob(job.trainer)
        containers = (plan.template.get("spec") or {}).get("containers") or ()
        at = next((i for i, c in enumerate(containers) if c.get("name") == NODE), 0)
        env = containers[at].get("env") or () if containers else ()
        settings = flux.settings(env)
        hosts = flux.hostlist(f"{job.name}-{job.trainer}-0-", job.max_nodes)
        namespace = job.namespace or "default"
        broker = flux.broker_config(
            hosts=hosts,
            domain=f"{job.subdomain}.{namespace}.svc.cluster.local",
            device=settings["FLUX_NETWORK_DEVICE"],
            queue_policy=settings["FLUX_QUEUE_POLICY"],
        )
        policy = job.ml_policy.flux if job.ml_policy else None
        npp = job.trainjob.spec.trainer.num_proc_per_node if job.trainjob.spec.trainer else None
        tasks = npp if isinstance(npp, int) else (policy.num_proc_per_node if policy else 1)
        gpus = gpus_per_node(job.node_resources)
        entrypoint = flux.entrypoint_script(
            main_host=f"{job.name}-{job.trainer}-0-0",
            resources=flux.resource_spec(tasks=tasks, gpus=gpus),
            flags=flux.run_flags(nodes=job.max_nodes, tasks=tasks, gpus=gpus),
        )

        def meta(name: str, **annotations: str) -> Obj:
            return object_meta(
                name=name,
                namespace=job.namespace,
                labels=labels,
                owner=owner,
                annotations=annotations or None,
            )

        config: Obj = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta(f"{job.name}-flux-entrypoint"),
            "data": {
                "entrypoint.sh": entrypoint,
                "init.sh": flux.init_script(hosts=hosts, broker=broker),
            },
        }
        secret: Obj = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": meta(
                f"{job.name}-flux-curve", **{mpi.ANNOTATION_GENERATE: GENERATE_CURVE_CERT}
            ),
            "type": "Opaque",
            "data": {flux.CURVE_KEY: ""},
        }
        return [config], [secret]
