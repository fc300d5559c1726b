"""Read an mpiscope OTF2 trace back two independent ways, into the same plain records.

`read_python(dir)` uses the `otf2` Python reader; `read_print(dir)` parses the text of
`otf2-print` (the OTF2 reference tool). Tests compare the two and then assert on the
records: per-rank event lists, communicator definitions, hosts, region properties.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import otf2

from mpiscope.archive.decode import fix_otf2_intercomm

UNDEFINED_ROOT = 0xFFFFFFFF


@dataclass
class Event:
    kind: str  # Python reader class name: "Enter", "MpiSend", "MpiCollectiveEnd", ...
    time: int
    fields: dict[str, object] = field(default_factory=dict)

    def __getitem__(self, key: str) -> object:
        return self.fields[key]

    def get(self, key: str, default: object = None) -> object:
        return self.fields.get(key, default)

    @property
    def recorded(self) -> dict[str, object]:
        """The fields that say what the program did, without what the tracer measured of
        how it was scheduled (MEASURED: differs run to run, and whether a record carries
        a sample at all depends on timing), as the time is left out."""
        return {k: v for k, v in self.fields.items() if k not in MEASURED}


# attributes that measure the run (descheduling samples), not what the program did
MEASURED = frozenset(("mpiscope:cpu_ns", "mpiscope:run_delay_ns"))


@dataclass
class Comm:
    ref: int
    name: str
    members: list[int]  # world ranks in communicator-rank order (intercomm: group A, then B)
    parent: int | None
    # an intercommunicator's groups A and B: a rank names its peers in the other one
    groups: tuple[list[int], list[int]] | None = None

    def peer(self, rank: int, local: int) -> int:
        """World rank of the peer `rank` names `local` in this communicator."""
        if self.groups is None:
            return self.members[local]
        a, b = self.groups
        return (b if rank in a else a)[local]


@dataclass
class Trace:
    events: dict[int, list[Event]]  # by location: world rank for a rank's main thread
    comms: dict[int, Comm]
    hosts: dict[int, str]  # location -> system-tree node name
    regions: dict[str, tuple[str, str]]  # region name -> (paradigm, role)
    locations: dict[int, str] = field(default_factory=dict)  # location -> its name
    groups: dict[int, int] = field(default_factory=dict)  # location -> its process (rank)

    def rank_of(self, loc: int) -> int:
        return self.groups.get(loc, loc)

    def threads(self, rank: int) -> list[int]:
        """The locations of a rank (its threads), main thread first."""
        return sorted(loc for loc in self.events if self.rank_of(loc) == rank)

    def of(self, rank: int, kind: str) -> list[Event]:
        return [e for e in self.events[rank] if e.kind == kind]

    def kinds(self, rank: int) -> Counter[str]:
        return Counter(e.kind for e in self.events[rank])

    def enters(self, rank: int) -> Counter[str]:
        return Counter(e["region"] for e in self.of(rank, "Enter"))

    def calls(self, rank: int) -> Counter[str]:
        """MPI calls per region: a merged polling visit counts the calls its Leave's
        `mpiscope:calls` says it stands for."""
        n = Counter(self.enters(rank))
        for e in self.of(rank, "Leave"):
            n[str(e["region"])] += int(e.fields.get("mpiscope:calls", 1)) - 1
        return n

    def comm_world_ranks(self, comm: int) -> list[int]:
        return self.comms[comm].members


# ---------------------------------------------------------------- Python otf2 reader


def _ref(definition: object) -> int:
    # the otf2 package exposes a definition's reference number only as `_ref`
    return int(definition._ref)  # type: ignore[attr-defined]


def _enum(value: object) -> str:
    return str(value).rsplit(".", 1)[-1]  # "Paradigm.MPI" -> "MPI"


def _py_fields(ev: object) -> dict[str, object]:
    f: dict[str, object] = {}
    if hasattr(ev, "region"):
        f["region"] = ev.region.name
    for src, dst in (("receiver", "peer"), ("sender", "peer"), ("msg_tag", "tag"),
                     ("msg_length", "bytes"), ("request_id", "request"),
                     ("size_sent", "sent"), ("size_received", "received"),
                     ("bytes_sent", "sent"), ("bytes_received", "received")):
        if hasattr(ev, src):
            f[dst] = int(getattr(ev, src))
    if hasattr(ev, "communicator"):
        # undefined: a communicator the trace cannot define (one spanning two jobs, from
        # MPI_Comm_spawn); as otf2-print shows it
        f["comm"] = _ref(ev.communicator) if ev.communicator is not None else -1
    if hasattr(ev, "collective_op"):
        f["op"] = _enum(ev.collective_op)
    if hasattr(ev, "root"):
        f["root"] = None if int(ev.root) == UNDEFINED_ROOT else int(ev.root)
    for attr, value in (ev.attributes or {}).items():
        if attr.name == "mpiscope:callsite":
            f["callsite"] = f"{value.file}:{value.line_number}"
        elif attr.name == "mpiscope:callpath":  # a CallingContext: its global ref
            f[attr.name] = _ref(value)
        else:
            f[attr.name] = int(value)
    return f


def read_python(trace_dir: Path) -> Trace:
    fix_otf2_intercomm()
    with otf2.reader.open(str(trace_dir / "traces.otf2")) as tr:
        d = tr.definitions
        comms = {}
        for c in d.comms:
            parent = None if c.parent is None else _ref(c.parent)
            if isinstance(c, otf2.definitions.InterComm):
                a, b = ([_ref(m) for m in g.members] for g in (c.groupA, c.groupB))
                comms[_ref(c)] = Comm(_ref(c), c.name, a + b, parent, (a, b))
            else:
                comms[_ref(c)] = Comm(_ref(c), c.name, [_ref(m) for m in c.group.members],
                                      parent)
        hosts = {_ref(loc): loc.group.system_tree_parent.name for loc in d.locations}
        names = {_ref(loc): loc.name for loc in d.locations}
        groups = {_ref(loc): _ref(loc.group) for loc in d.locations}
        regions = {r.name: (_enum(r.paradigm), _enum(r.region_role)) for r in d.regions}
        events: dict[int, list[Event]] = {rank: [] for rank in hosts}
        for loc, ev in tr.events:
            events[_ref(loc)].append(Event(type(ev).__name__, int(ev.time), _py_fields(ev)))
    return Trace(events, comms, hosts, regions, names, groups)


# ---------------------------------------------------------------- otf2-print text

_EVENT = re.compile(r"^([A-Z][A-Z_]+)\s+(\d+)\s+(\d+)\s*(.*)$")
_INT_FIELDS = {"Receiver": "peer", "Sender": "peer", "Tag": "tag", "Length": "bytes",
               "Request": "request", "Sent": "sent", "Received": "received"}
_ATTR = re.compile(r'\("([^"]+)" <\d+>; (\w+); ([^)]*?)\)(?:, |$)')


def _camel(kind: str) -> str:
    """MPI_ISEND_COMPLETE -> MpiIsendComplete (the Python reader's class names)."""
    return "".join(part.capitalize() for part in kind.split("_"))


def _print_fields(text: str) -> dict[str, object]:
    f: dict[str, object] = {}
    if m := re.search(r'Region: "([^"]+)"', text):
        f["region"] = m.group(1)
    for key, dst in _INT_FIELDS.items():
        # a field of its own: "Request: 3" is a request id, "Bytes Request: 16" (I/O) is not
        if m := re.search(rf"(?:^|, ){key}: (\d+)", text):
            f[dst] = int(m.group(1))
    if m := re.search(r'Communicator: "[^"]*" <(\d+)>', text):
        f["comm"] = int(m.group(1))
    elif re.search(r"(?:^|, )Communicator: UNDEFINED", text):
        f["comm"] = -1
    if m := re.search(r"Operation: (\w+)", text):
        f["op"] = m.group(1)
    if m := re.search(r"Root: (NONE|\d+)", text):
        f["root"] = None if m.group(1) == "NONE" else int(m.group(1))
    return f


def _print_attributes(text: str, f: dict[str, object]) -> None:
    for name, _type, value in _ATTR.findall(text):
        if name == "mpiscope:callsite":
            f["callsite"] = value.split('"')[1]
        elif name == "mpiscope:callpath":  # "frame@file:line" <ref>
            f[name] = int(value.rsplit("<", 1)[1].rstrip(">"))
        else:
            f[name] = int(value)


def _print_defs(text: str) -> tuple[dict[int, Comm], dict[int, str], dict[str, tuple[str, str]],
                                    dict[int, str], dict[int, int]]:
    groups: dict[int, list[int]] = {}
    comms: dict[int, Comm] = {}
    nodes: dict[int, str] = {}
    group_node: dict[int, int] = {}
    loc_group: dict[int, int] = {}
    loc_name: dict[int, str] = {}
    regions: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        rest = rest.strip()
        ref_s, _, body = rest.partition(" ")
        if not ref_s.isdigit():
            continue
        ref = int(ref_s)
        if kind == "GROUP":
            # COMM_GROUP members print as `N ("rank N" <N>)`; COMM_LOCATIONS as `"rank N" <N>`
            listed = re.split(r"Members?:", body, maxsplit=1)
            groups[ref] = [int(x) for x in re.findall(r"<(\d+)>\)?(?:,|$)", listed[1])] \
                if len(listed) == 2 else []
        elif kind == "COMM":
            name = re.search(r'Name: "([^"]*)"', body).group(1)
            group = int(re.search(r'Group: "[^"]*" <(\d+)>', body).group(1))
            parent = re.search(r'Parent: "[^"]*" <(\d+)>', body)
            comms[ref] = Comm(ref, name, groups[group], int(parent.group(1)) if parent else None)
        elif kind == "INTER_COMM":
            name = re.search(r'name: "([^"]*)"', body).group(1)
            a = groups[int(re.search(r'Group A: "[^"]*" <(\d+)>', body).group(1))]
            b = groups[int(re.search(r'Group B: "[^"]*" <(\d+)>', body).group(1))]
            common = re.search(r'Common Communicator: "[^"]*" <(\d+)>', body)
            comms[ref] = Comm(ref, name, a + b, int(common.group(1)) if common else None, (a, b))
        elif kind == "SYSTEM_TREE_NODE":
            nodes[ref] = re.search(r'Name: "([^"]*)"', body).group(1)
        elif kind == "LOCATION_GROUP":
            group_node[ref] = int(re.search(r'Parent: "[^"]*" <(\d+)>', body).group(1))
        elif kind == "LOCATION":
            loc_group[ref] = int(re.search(r'Group: "[^"]*" <(\d+)>', body).group(1))
            loc_name[ref] = re.search(r'Name: "([^"]*)"', body).group(1)
        elif kind == "REGION":
            name = re.search(r'Name: "([^"]*)"', body).group(1)
            role = re.search(r"Role: (\w+)", body).group(1)
            paradigm = re.search(r'Paradigm: "?([^",]*)', body).group(1)
            regions[name] = (paradigm, role)
    hosts = {loc: nodes[group_node[g]] for loc, g in loc_group.items()}
    return comms, hosts, regions, loc_name, loc_group


def otf2_print(trace_dir: Path, *args: str) -> str:
    proc = subprocess.run(["otf2-print", *args, str(trace_dir / "traces.otf2")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"otf2-print failed: {proc.stderr}"
    # a valid archive reads without complaint (e.g. definitions out of reference order)
    assert "warning" not in proc.stderr, f"otf2-print: {proc.stderr[:2000]}"
    return proc.stdout


def read_print(trace_dir: Path) -> Trace:
    comms, hosts, regions, names, groups = _print_defs(otf2_print(trace_dir, "-G"))
    events: dict[int, list[Event]] = {rank: [] for rank in hosts}
    last: Event | None = None
    for line in otf2_print(trace_dir).splitlines():
        if m := _EVENT.match(line):
            kind, loc, time, rest = m.groups()
            last = Event(_camel(kind), int(time), _print_fields(rest))
            events[int(loc)].append(last)
        elif last is not None and "ADDITIONAL ATTRIBUTES:" in line:
            _print_attributes(line.split("ADDITIONAL ATTRIBUTES:", 1)[1].strip(), last.fields)
    return Trace(events, comms, hosts, regions, names, groups)


def archive_properties(trace_dir: Path) -> dict[str, str]:
    """Anchor-file properties (`otf2-print -A`), e.g. MPISCOPE::MPI_LIBRARY."""
    lines = otf2_print(trace_dir, "-A").splitlines()
    props: dict[str, str] = {}
    for name, value in zip(lines, lines[1:], strict=False):
        if name.startswith("Property name") and value.startswith("Property value"):
            props[name.split(None, 2)[2]] = value.split(None, 2)[2] if len(
                value.split(None, 2)) == 3 else ""
    return props
