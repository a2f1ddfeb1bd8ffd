"""torchtune under the torch ML policy: the command a ``tune run`` TrainJob's trainer pods run
(single device full / LoRA / QLoRA, one node distributed, several nodes) and the rules such a
TrainJob is checked against, over runtimes shaped like Trainer v2.3's official
``torchtune-<model>`` ClusterTrainingRuntimes (the ``lt-torchtune-small`` shape of
``tests/integration/manifests/runtimes.yaml``, renamed, with the official trainer command).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lattice.frameworks.base import InvalidJob
from lattice.frameworks.policies import torchtune
from lattice.primitives.objects import Obj
from tests.unit.frameworks.test_ml_policy_plugins import GPU, RUNTIMES, ports
from tests.unit.frameworks.test_trainjob_plugin import ctx, env_of, main, parse, pods_of, tj

TUNE = ["tune", "run"]
OVERRIDES = [
    "output_dir=/workspace/output",
    "tokenizer.path=/workspace/model/original/tokenizer.model",
    "checkpointer.checkpoint_dir=/workspace/model",
]
QWEN_OVERRIDES = [
    "output_dir=/workspace/output",
    "tokenizer.path=/workspace/model/vocab.json",
    "tokenizer.merges_file=/workspace/model/merges.txt",
    "checkpointer.checkpoint_dir=/workspace/model",
]
LORA = "model.lora_attn_modules=[q_proj,v_proj,output_proj]"
QUANTIZE = "model.quantize_base=True"
ENDPOINT = "--rdzv_endpoint=tj-node-0-0.tj:29500"


def tune_runtime(name: str, *, gpus: int = 2) -> Obj:
    """An official-shaped torchtune runtime ``name``: its trainer runs the v2.3 command."""
    rt = copy.deepcopy(RUNTIMES["lt-torchtune-small"])
    rt["metadata"]["name"] = name
    model = torchtune.model_of(name)
    overrides = QWEN_OVERRIDES if model.startswith("qwen") else OVERRIDES
    node = rt["spec"]["template"]["spec"]["replicatedJobs"][2]
    container = node["template"]["spec"]["template"]["spec"]["containers"][0]
    container["command"] = [
        *TUNE,
        "--rdzv_endpoint=localhost:29500",
        "full_finetune_distributed",
        "--config",
        f"{model}_full",
        "dataset=torchtune.datasets.instruct_dataset",
        "dataset.source=parquet",
        *overrides,
    ]
    container["resources"] = {"limits": {GPU: gpus}}
    return rt


def trainer_pods(runtime: str, **trainer: Any) -> list[Obj]:
    pods = pods_of(tj(runtime, trainer={"command": TUNE, **trainer}), ctx(tune_runtime(runtime)))
    return [p for p in pods if p["metadata"]["name"].startswith("tj-node-")]


L1B, Q15B, L70B = "torchtune-llama3.2-1b", "torchtune-qwen2.5-1.5b", "torchtune-llama3.3-70b"


@pytest.mark.parametrize(
    ("runtime", "trainer", "rdzv", "recipe", "config"),
    [
        pytest.param(
            L1B, {}, True, "full_finetune_distributed", "llama3_2/1B_full", id="2 GPUs: distributed"
        ),
        pytest.param(
            L1B,
            {"numProcPerNode": 1},
            False,
            "full_finetune_single_device",
            "llama3_2/1B_full_single_device",
            id="one process: single device",
        ),
        pytest.param(
            L1B,
            {"resourcesPerNode": {"limits": {GPU: 1}}},
            False,
            "full_finetune_single_device",
            "llama3_2/1B_full_single_device",
            id="one GPU: single device",
        ),
        pytest.param(
            L1B,
            {"resourcesPerNode": {"limits": {"cpu": 4}}},
            True,
            "full_finetune_distributed",
            "llama3_2/1B_full",
            id="no GPU: one process per CPU, distributed",
        ),
        pytest.param(
            L1B,
            {"numProcPerNode": 1, "args": [LORA]},
            False,
            "lora_finetune_single_device",
            "llama3_2/1B_lora_single_device",
            id="LoRA on one device",
        ),
        pytest.param(
            L1B,
            {"resourcesPerNode": {"limits": {GPU: 1}}, "args": [LORA, QUANTIZE]},
            False,
            "lora_finetune_single_device",
            "llama3_2/1B_qlora_single_device",
            id="QLoRA on one device",
        ),
        pytest.param(
            L1B,
            {"args": [LORA]},
            True,
            "lora_finetune_distributed",
            "llama3_2/1B_lora",
            id="LoRA distributed",
        ),
        pytest.param(
            L1B,
            {"args": [LORA, QUANTIZE, "model.use_dora=true"]},
            True,
            "lora_finetune_distributed",
            "llama3_2/1B_lora",
            id="DoRA is not QLoRA",
        ),
        pytest.param(
            L1B,
            {"args": [LORA, "model.quantize_base=False"]},
            True,
            "lora_finetune_distributed",
            "llama3_2/1B_lora",
            id="quantize_base=False is not QLoRA",
        ),
        pytest.param(
            L70B,
            {"args": [LORA, QUANTIZE]},
            True,
            "lora_finetune_distributed",
            "llama3_3/70B_qlora",
            id="QLoRA distributed (70B)",
        ),
        pytest.param(
            L70B,
            {"numNodes": 2, "numProcPerNode": 8},
            True,
            "full_finetune_distributed",
            "llama3_3/70B_full_multinode",
            id="several nodes (70B)",
        ),
        pytest.param(
            Q15B,
            {"numProcPerNode": 4},
            True,
            "full_finetune_distributed",
            "qwen2_5/1.5B_full",
            id="qwen keeps its merges file",
        ),
    ],
)
def test_tune_run_trainjob_gets_the_torchtune_command(
    runtime: str, trainer: Obj, rdzv: bool, recipe: str, config: str
) -> None:
    pods = trainer_pods(runtime, **trainer)
    assert len(pods) == trainer.get("numNodes", 1)
    overrides = QWEN_OVERRIDES if runtime == Q15B else OVERRIDES
    expected = [*TUNE, *([ENDPOINT] if rdzv else []), recipe, "--config", config, *overrides]
    for pod in pods:
        container = main(pod)
        assert container["command"] == expected
        assert container.get("args") == trainer.get("args")
        env = env_of(container)
        assert [n for n in env if n.startswith("PET_")] == [
            "PET_NNODES",
            "PET_NPROC_PER_NODE",
            "PET_NODE_RANK",
        ]
        assert env["PET_NNODES"] == str(trainer.get("numNodes", 1))
        assert 29500 in ports(container)


def test_the_rendezvous_follows_the_runtime_subdomain() -> None:
    rt = tune_runtime(L1B)
    rt["spec"]["template"]["spec"]["network"] = {"subdomain": "tunes"}
    (pod,) = [
        p
        for p in pods_of(tj(L1B, trainer={"command": TUNE}), ctx(rt))
        if p["metadata"]["name"] == "tj-node-0-0"
    ]
    assert "--rdzv_endpoint=tj-node-0-0.tunes:29500" in main(pod)["command"]


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(None, id="the runtime's own tune run command"),
        pytest.param(["tune", "run", "full_finetune_distributed"], id="more than tune run"),
        pytest.param(["torchrun", "train.py"], id="torchrun"),
    ],
)
def test_only_exactly_tune_run_is_rewritten(command: list[str] | None) -> None:
    rt = tune_runtime(L1B)
    trainer: Obj = {"command": command} if command else {}
    (pod,) = [
        p
        for p in pods_of(tj(L1B, trainer=trainer), ctx(rt))
        if p["metadata"]["name"] == "tj-node-0-0"
    ]
    node = rt["spec"]["template"]["spec"]["replicatedJobs"][2]
    runtime_command = node["template"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert main(pod)["command"] == (command or runtime_command)
    assert env_of(main(pod))["PET_MASTER_ADDR"] == "tj-node-0-0.tj"


@pytest.mark.parametrize(
    ("runtime", "trainer", "expected"),
    [
        pytest.param(
            "lt-torchtune-small",
            {},
            [("spec.runtimeRef.name", "supported torchtune model")],
            id="a runtime name without a model",
        ),
        pytest.param(
            "torchtune-llama3.1-8b",
            {},
            [("spec.runtimeRef.name", "(model 'llama3_1/8B')")],
            id="an unknown model",
        ),
        pytest.param(
            L1B,
            {"numNodes": 2},
            [("spec.trainer.numNodes", "must be 1 for the llama3_2/1B model, got 2")],
            id="several nodes for a small model",
        ),
        pytest.param(
            Q15B,
            {"numProcPerNode": 1, "args": [LORA, QUANTIZE]},
            [("spec.runtimeRef.name", "no QLoRA fine-tuning")],
            id="QLoRA on qwen",
        ),
        pytest.param(
            L1B,
            {"args": [LORA, QUANTIZE]},
            [
                ("spec.trainer.numProcPerNode", "must be auto or 1 for QLoRA"),
                ("spec.trainer.resourcesPerNode", "exactly 1 GPU per node for QLoRA"),
            ],
            id="QLoRA on several devices of llama3.2",
        ),
        pytest.param(
            L70B,
            {"numNodes": 2, "args": [LORA]},
            [("spec.trainer.numNodes", "must be 1 for LoRA or QLoRA fine-tuning")],
            id="LoRA on several nodes",
        ),
        pytest.param(
            L70B,
            {"numNodes": 2, "args": [QUANTIZE]},
            [("spec.trainer.numNodes", "must be 1 for LoRA or QLoRA fine-tuning")],
            id="QLoRA on several nodes",
        ),
        pytest.param(
            L1B,
            {"args": ["epochs=1", "output_dir=/tmp/out", "tokenizer.merges_file=/m"]},
            [
                ("spec.trainer.args[1]", "must not set output_dir"),
                ("spec.trainer.args[2]", "must not set tokenizer.merges_file"),
            ],
            id="immutable configs in args",
        ),
    ],
)
def test_torchtune_trainjob_problems_name_the_field(
    runtime: str, trainer: Obj, expected: list[tuple[str, str]]
) -> None:
    with pytest.raises(InvalidJob) as err:
        parse(tj(runtime, trainer={"command": TUNE, **trainer}), ctx(tune_runtime(runtime)))
    found = [(p.field, p.message) for p in err.value.problems]
    assert [f for f, _ in found] == [f for f, _ in expected]
    for (_, message), (_, words) in zip(found, expected, strict=True):
        assert words in message


def test_the_rules_apply_only_to_tune_run() -> None:
    trainer = {"command": ["python", "train.py"], "numNodes": 2, "args": ["output_dir=/x"]}
    assert parse(tj(L1B, trainer=trainer), ctx(tune_runtime(L1B))).max_nodes == 2


def test_pure_parts() -> None:
    assert torchtune.model_of("torchtune-llama3.2-1b") == "llama3_2/1B"
    assert torchtune.model_of("torchtune-qwen2.5-1.5b") == "qwen2_5/1.5B"
    assert torchtune.model_of("my-torchtune-llama3.2-1b") == ""
    assert torchtune.is_torchtune(["tune", "run"])
    assert not torchtune.is_torchtune(None)
    assert torchtune.qlora(["model.quantize_base=TRUE "])
    assert not torchtune.qlora(["model.quantize_base"])
    assert not torchtune.lora(["model.lora_rank=8"])
    assert torchtune.runtime_overrides(["tune", "run", "output_dir=/o", "tokenizer.path"]) == [
        "output_dir=/o",
        "tokenizer.path",
    ]
