"""The torchtune flavour of the torch policy: the ``tune run`` command Kubeflow Trainer v2.3's
torch plugin builds for a TrainJob whose trainer command is exactly ``tune run``, and the rules
it checks such a TrainJob against.

Contract (pure; facts from Trainer v2.3's torch plugin and constants):
- ``is_torchtune(command)``: the TrainJob's ``trainer.command`` is ``["tune", "run"]``, nothing
  more (a runtime's own ``tune run ...`` command, used as is, is not rewritten).
- ``model_of(runtime_name)``: the model a runtime name ``<prefix>-<family>-<size>`` stands for:
  ``<family with "." as "_">/<SIZE>`` (``torchtune-llama3.2-1b`` is ``llama3_2/1B``), ``""``
  when the name has not exactly three ``-`` fields. ``SUPPORTED_MODELS`` lists the known ones.
- ``lora(args)``: an arg mentions ``model.lora_attn_modules``. ``qlora(args)``: an arg
  ``<key>=<true>`` (any case) whose key mentions ``model.quantize_base``, unless one whose key
  mentions ``model.use_dora`` is true as well.
- ``recipe_and_config(nodes=, nproc=, gpus=, model=, args=)``: one device (one node, and
  ``nproc`` the integer 1 or one GPU per node): ``lora_finetune_single_device`` with
  ``<model>_qlora_single_device`` (QLoRA) or ``<model>_lora_single_device`` (LoRA), else
  ``full_finetune_single_device`` with ``<model>_full_single_device``; one node, several
  devices: ``lora_finetune_distributed`` with ``<model>_qlora`` or ``<model>_lora``, else
  ``full_finetune_distributed`` with ``<model>_full``; several nodes:
  ``full_finetune_distributed`` with ``<model>_full_multinode``.
- ``runtime_overrides(command)``: the entries of the runtime's trainer command that set an
  immutable config (``IMMUTABLE_CONFIGS``: output_dir, tokenizer.path,
  checkpointer.checkpoint_dir, tokenizer.merges_file), in order.
- ``tune_command``: ``tune run`` then ``--rdzv_endpoint=<endpoint>`` (several nodes, an integer
  ``nproc`` above 1, or a word ``nproc`` with more than one GPU per node), the recipe,
  ``--config <config>`` and the runtime's overrides. The TrainJob's args follow as the
  container's args.
- ``problems``: the rules, each naming its field: the runtime name must stand for a supported
  model (``spec.runtimeRef.name``); only ``llama3_3/70B`` runs on several nodes, and LoRA or
  QLoRA never does (``spec.trainer.numNodes``); QLoRA is not available for ``qwen2_5/1.5B``
  (``spec.runtimeRef.name``) and runs on one device for the llama3.2 models
  (``spec.trainer.numProcPerNode`` and ``spec.trainer.resourcesPerNode``); an arg must not set
  an immutable config (``spec.trainer.args[i]``). As upstream, the checks count the TrainJob's
  ``numNodes`` (default 1) and its integer ``numProcPerNode`` (else ``auto``).
"""

from __future__ import annotations

from collections.abc import Sequence

from lattice.frameworks.base import Problem

__all__ = [
    "ENTRYPOINT",
    "IMMUTABLE_CONFIGS",
    "SUPPORTED_MODELS",
    "is_torchtune",
    "lora",
    "model_of",
    "problems",
    "qlora",
    "recipe_and_config",
    "runtime_overrides",
    "tune_command",
]

ENTRYPOINT = ("tune", "run")
LLAMA3_2_1B, LLAMA3_2_3B = "llama3_2/1B", "llama3_2/3B"
LLAMA3_3_70B, QWEN2_5_1_5B = "llama3_3/70B", "qwen2_5/1.5B"
SUPPORTED_MODELS = (LLAMA3_2_1B, LLAMA3_2_3B, LLAMA3_3_70B, QWEN2_5_1_5B)
IMMUTABLE_CONFIGS = (
    "output_dir",
    "tokenizer.path",
    "checkpointer.checkpoint_dir",
    "tokenizer.merges_file",
)
_LORA_MODULES = "model.lora_attn_modules"
_QUANTIZE_BASE = "model.quantize_base"
_USE_DORA = "model.use_dora"
_FULL_SINGLE, _FULL_DISTRIBUTED = "full_finetune_single_device", "full_finetune_distributed"
_LORA_SINGLE, _LORA_DISTRIBUTED = "lora_finetune_single_device", "lora_finetune_distributed"
_QLORA = "_qlora"
_QLORA_SINGLE = "_qlora_single_device"


def is_torchtune(command: Sequence[str] | None) -> bool:
    return tuple(command or ()) == ENTRYPOINT


def model_of(runtime_name: str) -> str:
    fields = runtime_name.split("-")
    if len(fields) != 3:
        return ""
    return f"{fields[1].replace('.', '_')}/{fields[2].upper()}"


def lora(args: Sequence[str]) -> bool:
    return any(_LORA_MODULES in arg for arg in args)


def _true(args: Sequence[str], item: str) -> bool:
    for arg in args:
        key, sep, value = arg.partition("=")
        if sep and item in key and value.strip().lower() == "true":
            return True
    return False


def qlora(args: Sequence[str]) -> bool:
    return not _true(args, _USE_DORA) and _true(args, _QUANTIZE_BASE)


def _one_proc(nproc: str) -> bool:
    return nproc.isdigit() and int(nproc) == 1


def recipe_and_config(
    *, nodes: int, nproc: str, gpus: int, model: str, args: Sequence[str]
) -> tuple[str, str]:
    """The recipe and config file for the job (see the module docstring); ``nproc`` is
    ``PET_NPROC_PER_NODE`` as resolved (digits for an integer)."""
    if nodes == 1 and (_one_proc(nproc) or gpus == 1):
        if qlora(args):
            recipe, suffix = _LORA_SINGLE, _QLORA_SINGLE
        elif lora(args):
            recipe, suffix = _LORA_SINGLE, "_lora_single_device"
        else:
            recipe, suffix = _FULL_SINGLE, "_full_single_device"
    elif nodes == 1 and qlora(args):
        recipe, suffix = _LORA_DISTRIBUTED, _QLORA
    elif nodes == 1 and lora(args):
        recipe, suffix = _LORA_DISTRIBUTED, "_lora"
    elif nodes > 1:
        recipe, suffix = _FULL_DISTRIBUTED, "_full_multinode"
    else:
        recipe, suffix = _FULL_DISTRIBUTED, "_full"
    return recipe, f"{model}{suffix}"


def runtime_overrides(command: Sequence[str]) -> list[str]:
    return [str(part) for part in command if str(part).split("=")[0] in IMMUTABLE_CONFIGS]


def tune_command(
    *,
    endpoint: str,
    nodes: int,
    nproc: str,
    gpus: int,
    model: str,
    args: Sequence[str],
    overrides: Sequence[str],
) -> list[str]:
    """The trainer command (see the module docstring)."""
    command = list(ENTRYPOINT)
    several = int(nproc) > 1 if nproc.isdigit() else gpus > 1
    if nodes > 1 or several:
        command.append(f"--rdzv_endpoint={endpoint}")
    recipe, config = recipe_and_config(nodes=nodes, nproc=nproc, gpus=gpus, model=model, args=args)
    return [*command, recipe, "--config", config, *overrides]


def problems(
    *,
    runtime_name: str,
    nodes: int | None,
    nproc: int | str | None,
    gpus: int,
    args: Sequence[str],
) -> list[Problem]:
    """What a torchtune TrainJob asks that torchtune cannot do (see the module docstring)."""
    found: list[Problem] = []
    model = model_of(runtime_name)
    if model not in SUPPORTED_MODELS:
        why = (
            f"must name a runtime of a supported torchtune model ({', '.join(SUPPORTED_MODELS)}), "
            f"got {runtime_name!r} (model {model or 'unknown'!r})"
        )
        found.append(Problem("spec.runtimeRef.name", why))
    count = nodes if nodes is not None else 1
    if count > 1 and model != LLAMA3_3_70B:
        why = f"must be 1 for the {model or 'unknown'} model, got {count}"
        found.append(Problem("spec.trainer.numNodes", why))
    npp = str(nproc) if isinstance(nproc, int) else "auto"
    _, config = recipe_and_config(nodes=count, nproc=npp, gpus=gpus, model=model, args=args)
    if _QLORA in config:
        if model == QWEN2_5_1_5B:
            why = f"names the {model} model, for which torchtune has no QLoRA fine-tuning"
            found.append(Problem("spec.runtimeRef.name", why))
        if _QLORA_SINGLE not in config and model in (LLAMA3_2_1B, LLAMA3_2_3B):
            why = f"must be auto or 1 for QLoRA fine-tuning of the {model} model, got {npp}"
            found.append(Problem("spec.trainer.numProcPerNode", why))
            why = f"must give exactly 1 GPU per node for QLoRA fine-tuning of the {model} model"
            found.append(Problem("spec.trainer.resourcesPerNode", why))
    if count > 1 and (lora(args) or qlora(args)):
        why = f"must be 1 for LoRA or QLoRA fine-tuning (one node in torchtune), got {count}"
        found.append(Problem("spec.trainer.numNodes", why))
    for i, arg in enumerate(args):
        key = arg.split("=", 1)[0]
        if key in IMMUTABLE_CONFIGS:
            why = f"must not set {key}: the runtime sets it for torchtune"
            found.append(Problem(f"spec.trainer.args[{i}]", why))
    return found
