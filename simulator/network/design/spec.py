"""Spec bases and shared fields of the designs: what every design file may say.

What is modelled: the keys a design accepts besides its own parameters (name, free-text
description, GPU file, attached storage, one-way hop latencies) and the parameters several
designs share (NIC speed, GPU-NIC PCIe bandwidth, scale-out medium, switch radix,
oversubscription), each documented once and given its default by the design.

What is simplified: units are the human ones of the YAML (`*_gbps` Gbit/s, `*_gbyte_per_s`
GB/s, `*_latency_us` microseconds); the builders convert them to SI.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from simulator.config.base import FileRef, Spec
from simulator.network.design.storage import StorageSpec
from simulator.network.hardware import apply_nic_preset


class DesignSpecBase(Spec):
    """Fields every design shares."""

    name: str | None = Field(
        None, description="Topology name, shown in results; required in a topology file."
    )
    description: str | None = Field(None, description="Free text: what the topology models.")
    gpu: FileRef | None = Field(
        None,
        description="GPU spec file (e.g. gpus/h100-sxm.yaml) relative to this file; "
        "required in a topology file.",
    )
    storage: StorageSpec | None = Field(None, description="Storage servers to attach, if any.")
    hop_latency_us: float = Field(
        0.6, ge=0, description="One-way latency of one scale-out link: switch plus cable, µs."
    )
    scale_up_latency_us: float = Field(
        0.5, ge=0, description="One-way latency of one in-server link (NVLink, xGMI, PCIe), µs."
    )


# Fields several designs share with their own defaults: the constraint and description are
# written once here, the default in each design (`nic_gbps: NicGbps = 200.0`).
NicGbps = Annotated[float, Field(gt=0, description="Speed of each NIC, Gbit/s.")]
PcieGbytePerS = Annotated[float, Field(gt=0, description="GPU-NIC PCIe bandwidth, GB/s.")]
Gen5PcieGbytePerS = Annotated[
    float, Field(gt=0, description="GPU-NIC PCIe bandwidth (Gen5 x16), GB/s per direction.")
]
NvlinkGbytePerS = Annotated[
    float,
    Field(gt=0, description="NVLink bandwidth of one GPU to its NVSwitch, GB/s per direction."),
]
SwitchRadix = Annotated[int, Field(ge=4, description="Ports per leaf/spine switch.")]
ScaleOutMedium = Annotated[Literal["ib", "ethernet"], Field(description="Scale-out link medium.")]
LinkGbps = Annotated[float, Field(gt=0, description="Speed of every link and NIC, Gbit/s.")]
NicPreset = Annotated[
    str | None,
    Field(
        description="NIC preset name (topologies/nics/presets.yaml, e.g. connectx7-400g-ib, "
        "pollara-400, efa-p5, gcp-tcpxo); sets the NIC speed per GPU (Gbit/s) and the medium. "
        "Give it or the NIC speed, not both."
    ),
]


class ScaleOutSpecBase(DesignSpecBase):
    """Fields of the designs whose GPU servers reach a switched fabric through NICs."""

    nic: NicPreset = None
    nic_gbps: NicGbps = 400.0
    pcie_gbyte_per_s: PcieGbytePerS = 64.0
    medium: ScaleOutMedium = "ib"

    @model_validator(mode="before")
    @classmethod
    def _nic_preset(cls, data: Any) -> Any:
        return apply_nic_preset(data)


class ClosSpecBase(ScaleOutSpecBase):
    """Fields of the scale-out designs built as a Clos of leaf and spine (and core) switches."""

    switch_radix: SwitchRadix = 64
    oversubscription: float = Field(1.0, ge=1, description="Leaf down:up bandwidth ratio.")


class HostsSpecBase(DesignSpecBase):
    """Fields of the designs of one-GPU hosts, one NIC each, on links of one speed."""

    link_gbps: LinkGbps = 400.0
    pcie_gbyte_per_s: PcieGbytePerS = 64.0
    medium: Literal["ib", "ethernet"] = Field("ethernet", description="Link medium.")
