"""Reads a raw ITM byte stream (what SWO carries in NRZ mode, without the TPIU formatter) as the
ARMv7-M ARM (appendix D4) and ../../shared/docs/wire-formats.md §4 word it, to check what
target-fw's ITM-over-UART mode sends independently of the host's decoder
(protocol/itm_decoder): sync, overflow, software packets per stimulus port, DWT periodic PC
samples (and sleep samples). Anything else the firmware never sends is an error here."""

from dataclasses import dataclass, field

SIZES = {1: 1, 2: 2, 3: 4}  # header bits [1:0] -> payload bytes
PC_SAMPLE = 2  # hardware source discriminator of periodic PC samples


@dataclass
class Itm:
    syncs: int = 0
    overflows: int = 0
    ports: dict = field(default_factory=dict)  # stimulus port -> bytearray
    software_packets: dict = field(default_factory=dict)  # payload size -> packets
    pcs: dict = field(default_factory=dict)  # pc -> samples
    sleep_samples: int = 0


def read(data: bytes) -> Itm:
    itm = Itm()
    i = 0
    while i < len(data):
        header = data[i]
        if header == 0:
            zeros = i
            while i < len(data) and data[i] == 0:
                i += 1
            # At least 47 zero bits then a one: five zero bytes and 0x80.
            if i - zeros < 5 or i == len(data) or data[i] != 0x80:
                raise ValueError(f"byte {zeros}: zeros that are not a sync packet")
            itm.syncs += 1
            i += 1
            continue
        if header == 0x70:
            itm.overflows += 1
            i += 1
            continue
        if header & 3 == 0:
            raise ValueError(f"byte {i}: {header:#04x} is a protocol packet the firmware never sends")
        size = SIZES[header & 3]
        payload = data[i + 1 : i + 1 + size]
        if len(payload) < size:
            raise ValueError(f"byte {i}: packet cut short")
        i += 1 + size
        if header & 4:  # hardware source
            if header >> 3 != PC_SAMPLE:
                raise ValueError(f"hardware packet {header:#04x} the firmware never sends")
            if size == 4:
                pc = int.from_bytes(payload, "little")
                itm.pcs[pc] = itm.pcs.get(pc, 0) + 1
            elif payload == b"\x00":
                itm.sleep_samples += 1
            else:
                raise ValueError(f"PC sample packet {header:#04x} {payload.hex()}")
            continue
        itm.ports.setdefault(header >> 3, bytearray()).extend(payload)
        itm.software_packets[size] = itm.software_packets.get(size, 0) + 1
    return itm
