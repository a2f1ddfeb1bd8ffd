"""The ML policies every kind composes (``lattice.frameworks.policies``), and the capabilities
that keep kind names out of the reconciler and the composition root."""

from __future__ import annotations

import pytest

from lattice.frameworks.base import CountsJobs, OperatorContext, ReadsRuntimes
from lattice.frameworks.naming import service_name_problems
from lattice.frameworks.policies import mpi, torch
from lattice.frameworks.registry import PLUGINS, plugin_for
from lattice.primitives.objects import Obj


@pytest.mark.parametrize(
    ("ctx", "want"),
    [
        pytest.param(OperatorContext(), ("c10d", "a-worker-0:23456"), id="c10d on the first node"),
        pytest.param(
            OperatorContext(
                rdzv_backend="etcd", rdzv_service_endpoint="etcd", rdzv_service_port="1"
            ),
            ("etcd-v2", "etcd:1"),
            id="an etcd service when configured",
        ),
        pytest.param(
            OperatorContext(rdzv_backend="etcd"),
            ("c10d", "a-worker-0:23456"),
            id="etcd without endpoint",
        ),
        pytest.param(None, ("c10d", "a-worker-0:23456"), id="no operator settings (TrainJob)"),
    ],
)
def test_rendezvous(ctx: OperatorContext | None, want: tuple[str, str]) -> None:
    assert torch.rendezvous("a-worker-0", 23456, ctx) == want


def test_torch_env_is_picked_by_name_in_the_kinds_order() -> None:
    env = torch.torch_env(
        nodes=torch.nnodes(1, 3, elastic=True),
        node_rank="0",
        master_addr="m",
        master_port=29500,
        rdzv=torch.Rendezvous("c10d", "m:29500", "uid"),
        nproc_per_node="auto",
    )
    assert torch.pick(env, ("PET_RDZV_ID", "MASTER_ADDR", "PET_MAX_RESTARTS", "PET_NNODES")) == [
        ("PET_RDZV_ID", "uid"),
        ("MASTER_ADDR", "m"),
        ("PET_NNODES", "1:3"),
    ]
    assert torch.nnodes(1, 3, elastic=False) == "3"
    assert torch.DEFAULT_RESTARTS == ("PET_MAX_RESTARTS", "100")


@pytest.mark.parametrize(
    ("implementation", "lines", "names"),
    [
        pytest.param(
            mpi.OPENMPI,
            "h0 slots=2\nh1 slots=2\n",
            [
                "OMPI_MCA_orte_keep_fqdn_hostnames",
                "OMPI_MCA_orte_default_hostfile",
                "OMPI_MCA_plm_rsh_args",
                "OMPI_MCA_orte_set_default_slots",
            ],
            id="OpenMPI",
        ),
        pytest.param(
            mpi.INTEL,
            "h0:2\nh1:2\n",
            ["I_MPI_HYDRA_HOST_FILE", "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", "I_MPI_PERHOST"],
            id="Intel",
        ),
        pytest.param(
            mpi.MPICH, "h0:2\nh1:2\n", ["HYDRA_HOST_FILE", "HYDRA_LAUNCH_EXTRA_ARGS"], id="MPICH"
        ),
    ],
)
def test_mpi_hostfile_and_launcher_env_per_implementation(
    implementation: str, lines: str, names: list[str]
) -> None:
    assert mpi.hostfile(["h0", "h1"], slots=2, implementation=implementation) == lines
    env = mpi.launcher_env(implementation, hostfile="/etc/mpi/hostfile", slots=2)
    assert list(env) == names
    assert "/etc/mpi/hostfile" in env.values()


def test_the_ssh_secret_is_marked_for_generation_and_mounted_with_its_mode() -> None:
    secret = mpi.ssh_auth_secret(name="pi-ssh", namespace="ns", labels={"app": "pi"}, owner={})
    assert secret["metadata"]["annotations"] == {mpi.ANNOTATION_GENERATE: "ssh-keypair"}
    assert secret["data"] == {mpi.SSH_PRIVATE_KEY: "", mpi.SSH_PUBLIC_KEY: ""}
    volume = mpi.ssh_volume(volume="ssh-auth", secret="pi-ssh", default_mode=0o600)
    assert volume["secret"]["defaultMode"] == 0o600
    paths = [item["path"] for item in volume["secret"]["items"]]
    assert paths == ["id_rsa", "id_rsa.pub", "authorized_keys"]
    assert "defaultMode" not in mpi.ssh_volume(volume="v", secret="s")["secret"]


def test_kind_specific_wiring_is_declared_by_capabilities() -> None:
    assert [p.resource.kind for p in PLUGINS if isinstance(p, CountsJobs)] == ["MPIJob"]
    assert [p.resource.kind for p in PLUGINS if isinstance(p, ReadsRuntimes)] == ["TrainJob"]
    trainjob = plugin_for("TrainJob")
    assert isinstance(trainjob, ReadsRuntimes)
    job: Obj = {"spec": {"runtimeRef": {"name": "torch-distributed"}}}
    assert trainjob.names_runtime(job, {"metadata": {"name": "torch-distributed"}})
    assert not trainjob.names_runtime(job, {"metadata": {"name": "mpi-distributed"}})


@pytest.mark.parametrize(
    ("name", "longest", "want"),
    [
        pytest.param("pi", "pi-worker-9", [], id="valid"),
        pytest.param("Pi", "Pi-worker-0", ["must be a DNS-1035 label"], id="upper case"),
        pytest.param("p" * 60, "p" * 60 + "-worker-0", ["too long: Service"], id="too long"),
    ],
)
def test_service_name_problems(name: str, longest: str, want: list[str]) -> None:
    problems = service_name_problems(name, longest=longest, owners="pods'", label="Service")
    assert [p.field for p in problems] == ["metadata.name"] * len(want)
    for problem, fragment in zip(problems, want, strict=True):
        assert fragment in problem.message
