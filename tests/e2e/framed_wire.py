"""Reads a capture in rackprof framed protocol v1-v5 (protocol/framed-protocol.md) as the spec
words it, to check what target-fw sends: every frame's COBS, length, CRC and items, and the
sequence numbers. The host's decoder (protocol/framed_decoder) is the product; this is the
test's independent reading of the same spec, kept as small as the spec allows."""

from dataclasses import dataclass, field

TAG_HELLO, TAG_ARC, TAG_ARC_N, TAG_PC, TAG_PC_N, TAG_DROPPED, TAG_START, TAG_STOP = range(1, 9)
# Version 2: ENTER/EXIT (callee, call site, u32 stamp), the _IN_HANDLER forms with u16 IPSR.
TAG_ENTER, TAG_EXIT, TAG_ENTER_IN_HANDLER, TAG_EXIT_IN_HANDLER = range(9, 13)
# Version 5: TASK_SWITCH (task A, u32 stamp, name_len u8 0..32, name), TASK_DELETED (task A, u32).
TAG_TASK_SWITCH, TAG_TASK_DELETED = 0x13, 0x14
MAX_TASK_NAME = 32
UNKNOWN_TASK = "unknown"  # the task after a loss, until the next TASK_SWITCH


def crc16_ccitt_false(data: bytes) -> int:
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def cobs_decode(encoded: bytes) -> bytes | None:
    out = bytearray()
    i = 0
    while i < len(encoded):
        code = encoded[i]
        if code == 0 or i + code > len(encoded):
            return None
        out += encoded[i + 1 : i + code]
        i += code
        if code < 0xFF and i < len(encoded):
            out.append(0)
    return bytes(out)


@dataclass
class Hello:
    version: int
    addr_bytes: int
    flags: int
    text_lo: int
    text_hi: int
    sample_hz: int
    core_clock_hz: int
    build_id: bytes
    arch: int | None = None  # flags bit 5: the architecture byte after the build-id


@dataclass
class Capture:
    frames_good: int = 0
    frames_bad: int = 0
    frames_lost: int = 0
    hellos: list = field(default_factory=list)
    arcs: dict = field(default_factory=dict)  # (from, self) -> calls
    pcs: dict = field(default_factory=dict)  # pc -> samples
    dropped_total: int = 0
    markers: list = field(default_factory=list)  # "start" / "stop", in order
    # (enter, callee, call_site, stamp, exception), in order
    events: list = field(default_factory=list)
    # Version 5. ("switch", task, stamp, name or None) / ("deleted", task, stamp), in order.
    task_items: list = field(default_factory=list)
    task_names: dict = field(default_factory=dict)  # task -> the name it was last sent with
    # The running task in stream order: None before the first TASK_SWITCH, UNKNOWN_TASK after
    # a loss (frames lost, DROPPED grown) until the next one.
    task: object = None
    pcs_by_task: dict = field(default_factory=dict)  # task -> {pc: samples}
    arcs_by_task: dict = field(default_factory=dict)  # task -> {(from, self): calls}
    event_tasks: list = field(default_factory=list)  # the task in force at each of events

    def lost(self):
        if self.task is not None:
            self.task = UNKNOWN_TASK


def _leb128(body: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = body[i]
        value |= (byte & 0x7F) << shift
        i += 1
        if not byte & 0x80:
            return value, i
        shift += 7


def _items(body: bytes, addr_bytes: int, cap: Capture) -> int:
    """Parses the items of one good body into cap; returns the addr_bytes in force after it."""
    i = 2
    end = len(body) - 2
    u32 = lambda at: int.from_bytes(body[at : at + 4], "little")
    addr = lambda at: int.from_bytes(body[at : at + addr_bytes], "little")
    while i < end:
        tag = body[i]
        i += 1
        if tag == TAG_HELLO:
            id_len = body[i + 19]
            hello = Hello(body[i], body[i + 1], body[i + 2], u32(i + 3), u32(i + 7), u32(i + 11),
                          u32(i + 15), bytes(body[i + 20 : i + 20 + id_len]))
            i += 20 + id_len
            if hello.flags & 0x20:
                hello.arch = body[i]
                i += 1
            cap.hellos.append(hello)
            addr_bytes = hello.addr_bytes
        elif tag in (TAG_ARC, TAG_ARC_N):
            key = (addr(i), addr(i + addr_bytes))
            i += 2 * addr_bytes
            count = 1
            if tag == TAG_ARC_N:
                count, i = _leb128(body, i)
            cap.arcs[key] = cap.arcs.get(key, 0) + count
            arcs = cap.arcs_by_task.setdefault(cap.task, {})
            arcs[key] = arcs.get(key, 0) + count
        elif tag in (TAG_PC, TAG_PC_N):
            pc = addr(i)
            i += addr_bytes
            count = 1
            if tag == TAG_PC_N:
                count, i = _leb128(body, i)
            cap.pcs[pc] = cap.pcs.get(pc, 0) + count
            pcs = cap.pcs_by_task.setdefault(cap.task, {})
            pcs[pc] = pcs.get(pc, 0) + count
        elif tag == TAG_DROPPED:
            if u32(i) > cap.dropped_total:
                cap.lost()
            cap.dropped_total = u32(i)
            i += 4
        elif tag in (TAG_START, TAG_STOP):
            cap.markers.append("start" if tag == TAG_START else "stop")
        elif TAG_ENTER <= tag <= TAG_EXIT_IN_HANDLER:
            in_handler = tag >= TAG_ENTER_IN_HANDLER
            exception = int.from_bytes(body[i + 2 * addr_bytes + 4 : i + 2 * addr_bytes + 6],
                                       "little") if in_handler else 0
            cap.events.append((tag in (TAG_ENTER, TAG_ENTER_IN_HANDLER), addr(i),
                               addr(i + addr_bytes), u32(i + 2 * addr_bytes), exception))
            cap.event_tasks.append(cap.task)
            i += 2 * addr_bytes + 4 + (2 if in_handler else 0)
        elif tag == TAG_TASK_SWITCH:
            task, stamp, name_len = addr(i), u32(i + addr_bytes), body[i + addr_bytes + 4]
            i += addr_bytes + 5
            if name_len > MAX_TASK_NAME or i + name_len > end:
                raise ValueError("task name too long or cut short")
            name = bytes(body[i : i + name_len]).decode("utf-8", "backslashreplace") or None
            i += name_len
            if name is not None:
                cap.task_names[task] = name
            cap.task_items.append(("switch", task, stamp, name))
            cap.task = task
        elif tag == TAG_TASK_DELETED:
            cap.task_items.append(("deleted", addr(i), u32(i + addr_bytes)))
            i += addr_bytes + 4
        else:
            raise ValueError(f"unknown item tag {tag:#x}")
    if i != end:
        raise ValueError("item runs past the end of the body")
    return addr_bytes


def read(data: bytes) -> Capture:
    cap = Capture()
    addr_bytes = 4
    expected_seq = None
    for chunk in data.split(b"\x00")[:-1]:  # bytes after the last delimiter: an unfinished frame
        body = cobs_decode(chunk)
        if body is None or not 5 <= len(body) <= 254 or \
                crc16_ccitt_false(body[:-2]) != int.from_bytes(body[-2:], "little"):
            cap.frames_bad += 1
            continue
        seq = int.from_bytes(body[:2], "little")
        try:
            probe = Capture()
            _items(body, addr_bytes, probe)
        except (ValueError, IndexError):
            cap.frames_bad += 1
            continue
        if not probe.hellos and expected_seq is not None:
            gap = (seq - expected_seq) & 0xFFFF
            cap.frames_lost += gap
            if gap:
                cap.lost()  # before this frame's items: they may follow the lost frames' switch
        elif probe.hellos and seq == 0:
            cap.task, cap.task_names = None, {}  # a reset: no task runs yet
        addr_bytes = _items(body, addr_bytes, cap)
        cap.frames_good += 1
        expected_seq = (seq + 1) & 0xFFFF
    return cap
