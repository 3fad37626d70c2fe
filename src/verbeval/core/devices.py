"""Devices and device maps: which torch device a model runs on, how it is described in logs, and
accelerate's ``device_map`` (a strategy name or a mapping of module names to devices) as checked
from the config and ``--device-map``.
"""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Any

from verbeval.core.errors import VerbevalError
from verbeval.core.io import describe_json_error

if TYPE_CHECKING:  # torch is imported by the functions that need it: start-up of model-free commands stays cheap
    import torch


def resolve_device(preference: str = "auto") -> torch.device:
    """``auto`` picks CUDA when available (honouring CUDA_VISIBLE_DEVICES), else CPU."""
    import torch

    if preference == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(preference)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise VerbevalError(f"device {preference!r} requested but CUDA is not available")
    return dev


#: device files of a GPU that torch can use as ``cuda``: NVIDIA, AMD ROCm, WSL 2
GPU_DEVICE_FILES = ("/dev/nvidia[0-9]*", "/dev/kfd", "/dev/dxg")


def gpu_present() -> bool:
    """Whether ``auto`` may pick a GPU on this machine, without importing torch (the workflow plans
    jobs with it: importing torch costs seconds, this a few stat calls): False when
    CUDA_VISIBLE_DEVICES hides every GPU or no GPU device file exists, or on macOS (``auto`` never
    picks MPS); True otherwise, even where torch then finds no usable GPU."""
    import glob
    import sys

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    if sys.platform == "darwin":
        return False
    return any(glob.glob(pattern) for pattern in GPU_DEVICE_FILES)


def runs_on_cpu(preference: str, device_map: Any = None) -> bool:
    """Whether a job with this device (``inference.device``) and ``device_map`` runs on this
    machine's CPU alone: device ``cpu``, or ``auto`` where :func:`gpu_present` finds no GPU, with no
    device map (a map may place modules on GPUs)."""
    if device_map is not None:
        return False
    return preference == "cpu" or (preference == "auto" and not gpu_present())


def describe_device(device: torch.device) -> str:
    import torch

    if device.type == "cuda":
        idx = device.index if device.index is not None else torch.cuda.current_device()
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "<all>")
        return f"cuda:{idx} ({torch.cuda.get_device_name(idx)}; CUDA_VISIBLE_DEVICES={visible})"
    return f"cpu ({torch.get_num_threads()} threads)"


#: device_map strategies of accelerate (config ``device_map``, ``--device-map``); a mapping of module
#: names to devices (GPU index, ``cpu``, ``cuda:N`` or ``disk``) is accepted too
DEVICE_MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")

DeviceMap = str | dict[str, int | str] | None


def check_device_map(device_map: Any, where: str = "device_map") -> DeviceMap:
    """``device_map`` if it is None, a strategy in :data:`DEVICE_MAP_STRATEGIES` or a non-empty
    mapping {module name: GPU index, ``cpu``, ``cuda[:N]``, ``mps`` or ``disk``}; else VerbevalError."""
    if device_map is None or device_map in DEVICE_MAP_STRATEGIES:
        return device_map
    if isinstance(device_map, dict) and device_map:
        for module, dev in device_map.items():
            ok = (isinstance(dev, int) and not isinstance(dev, bool) and dev >= 0) or (
                isinstance(dev, str) and re.fullmatch(r"cpu|disk|mps|cuda(:\d+)?", dev) is not None
            )
            if not isinstance(module, str) or not ok:
                raise VerbevalError(
                    f"{where}: module {module!r} -> {dev!r}: a device is a GPU index, cpu, cuda:N, mps or disk"
                )
        return device_map
    raise VerbevalError(
        f"{where}: {device_map!r} is neither one of {list(DEVICE_MAP_STRATEGIES)} nor a "
        "non-empty mapping of module names to devices"
    )


def parse_device_map(text: str | None) -> DeviceMap:
    """``--device-map``: empty or ``none`` = no map; a strategy name; or a JSON object."""
    if text is None or text.strip().lower() in ("", "none", "null"):
        return None
    text = text.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise VerbevalError(f"--device-map: invalid JSON ({describe_json_error(exc, 'character')})") from None
        return check_device_map(value, "--device-map")
    return check_device_map(text, "--device-map")


def input_device(model: torch.nn.Module) -> torch.device:
    """Where a model's inputs go: the device its input embeddings run on (with a device map whose
    embeddings are offloaded, accelerate's execution device for them)."""
    import torch

    emb = model.get_input_embeddings()
    dev = getattr(getattr(emb, "_hf_hook", None), "execution_device", None)
    if dev is not None:
        return torch.device(dev) if not isinstance(dev, int) else torch.device("cuda", dev)
    return emb.weight.device
