"""hccl_tune_torch.LinkInspector: which link joins two ranks of a process group, how fast it is, and which link
a pair actually used for its last collective.

Creating an inspector measures (hccl-tune's link inspector, the same code as ``hccl-tune links``): it is a
collective — every rank of the group creates it, with the same arguments — that runs on communicators of its own,
so the group's links in use stay those of the program's calls. Pairs are measured one after another; 3 ranks on
one node take about a second with the defaults. With ``source="stored"`` it instead reads the table the node's
hccl-tuned stored for this topology (``hccl-tune links`` stores what it measures): local, no communication, a
few milliseconds. Everything else is local: every rank holds the whole table.
"""

import datetime
import json

import torch.distributed as dist

from hccl_tune_torch._C import ProcessGroupHcclTune

__all__ = ["Bandwidth", "Latency", "Link", "UsedLink", "LinkInspector"]


def _fmt(x):
    return f"{x:.3g}"


class _Quantity(float):
    """A float in `unit`; str() is readable text with a unit, repr() names the class and the unit."""

    unit = ""

    def __repr__(self):
        return f"{type(self).__name__}({float(self)!r} {self.unit})"


class Bandwidth(_Quantity):
    """A bandwidth in Gbit/s (1e9 bit/s): a float that prints with its unit ("9.87 Gbit/s", "180 Mbit/s")."""

    unit = "Gbit/s"

    @property
    def gbps(self):
        return float(self)

    @property
    def bytes_per_s(self):
        return float(self) * 1e9 / 8

    def __str__(self):
        g = float(self)
        return f"{_fmt(g)} Gbit/s" if g >= 1 else f"{_fmt(g * 1e3)} Mbit/s"


class Latency(_Quantity):
    """A one-way latency in microseconds: a float that prints with its unit ("12.3 us", "1.5 ms")."""

    unit = "us"

    @property
    def us(self):
        return float(self)

    @property
    def seconds(self):
        return float(self) * 1e-6

    def __str__(self):
        u = float(self)
        return f"{_fmt(u)} us" if u < 1000 else f"{_fmt(u / 1e3)} ms"


class Link:
    """One link between ranks ``src`` < ``dst``: ``type`` ("shm", the HCCS class, inside a node; "tcp" between
    nodes), ``network`` (the subnet, None for shm), each side's ``src_interface``/``dst_interface`` and
    ``src_address``/``dst_address`` (None for shm), ``default`` (the link "auto" uses without a tuned table),
    ``bandwidth`` (Bandwidth, Gbit/s) and ``latency`` (Latency, us, one way), ``source`` ("measured": by this
    inspector; "stored": read from the node daemon) and ``when`` (a UTC datetime: when it was measured)."""

    __slots__ = ("src", "dst", "type", "network", "src_interface", "dst_interface", "src_address", "dst_address",
                 "default", "bandwidth", "latency", "source", "when")

    def __init__(self, j):
        self.src, self.dst, self.type = j["src"], j["dst"], j["type"]
        self.network = j["network"] or None
        self.src_interface, self.dst_interface = j["interface"] or None, j["peer_interface"] or None
        self.src_address, self.dst_address = j["address"] or None, j["peer_address"] or None
        self.default = j["default"]
        self.bandwidth, self.latency = Bandwidth(j["bandwidth_gbps"]), Latency(j["latency_us"])
        self.source = j["source"]
        self.when = datetime.datetime.fromtimestamp(j["measured_unix_ms"] / 1e3, tz=datetime.timezone.utc)

    def to_dict(self):
        """Plain values only (no pandas, no unit classes): numbers under *_gbps/_us keys, readable strings under
        bandwidth/latency, when as ISO 8601 text."""
        d = {k: getattr(self, k) for k in self.__slots__ if k not in ("bandwidth", "latency", "when")}
        d.update(bandwidth_gbps=float(self.bandwidth), latency_us=float(self.latency), bandwidth=str(self.bandwidth),
                 latency=str(self.latency), when=self.when.isoformat())
        return d

    def __str__(self):
        where = "" if self.type == "shm" else f" {self.network} {self.src_interface}->{self.dst_interface}"
        return f"{self.src}-{self.dst} {self.type}{where}: {self.bandwidth}, {self.latency} ({self.source})"

    def __repr__(self):
        return f"Link({self})"


class UsedLink:
    """The link a pair of ranks used for its last collective, as this rank (``src``) sees it: ``type``,
    ``network`` and ``interface`` (src's side; None for shm), ``address``/``peer_address``, ``lanes`` (TCP
    connections), ``operation`` (the collective's number in the group), and the measured ``bandwidth`` and
    ``latency`` of that link (None when the inspector did not measure that network)."""

    __slots__ = ("src", "dst", "type", "network", "interface", "address", "peer_address", "lanes", "operation",
                 "bandwidth", "latency")

    def __init__(self, j, measured):
        self.src, self.dst, self.type = j["src"], j["dst"], j["type"]
        self.network, self.interface = j["network"] or None, j["interface"] or None
        self.address, self.peer_address = j["address"] or None, j["peer_address"] or None
        self.lanes, self.operation = j["lanes"], j["operation"]
        self.bandwidth = measured.bandwidth if measured is not None else None
        self.latency = measured.latency if measured is not None else None

    def to_dict(self):
        d = {k: getattr(self, k) for k in self.__slots__ if k not in ("bandwidth", "latency")}
        d.update(bandwidth_gbps=None if self.bandwidth is None else float(self.bandwidth),
                 latency_us=None if self.latency is None else float(self.latency))
        return d

    def __str__(self):
        where = "" if self.type == "shm" else f" {self.network} {self.interface} -> {self.peer_address}"
        return f"{self.src}-{self.dst} used {self.type}{where} (operation {self.operation})"

    def __repr__(self):
        return f"UsedLink({self})"


def _hccltune_group(group):
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if not isinstance(pg, ProcessGroupHcclTune):
        raise TypeError(f"LinkInspector needs an hccltune (or hccl) process group, got {type(pg).__name__}")
    return pg


class LinkInspector:
    """The links between the ranks of ``group`` (default: the world). Ranks are the group's ranks.

    ``source="measure"`` (default) measures when created: a collective, every rank of the group creates it with
    the same ``bytes`` (the bandwidth message size) and ``iters`` (bandwidth iterations per link, after one
    warm-up). ``source="stored"`` reads the table this rank's node daemon stored for the group's topology (local;
    RuntimeError naming the daemon and topology when it has none)."""

    def __init__(self, group=None, bytes=4 << 20, iters=3, source="measure"):
        if source not in ("measure", "stored"):
            raise ValueError(f"LinkInspector: source must be 'measure' or 'stored', not {source!r}")
        if int(bytes) <= 0 or int(iters) < 1:
            raise ValueError(f"LinkInspector: bytes must be > 0 and iters >= 1 (got {bytes}, {iters})")
        self._pg = _hccltune_group(group)
        text = self._pg.stored_links() if source == "stored" else self._pg.measure_links(int(bytes), int(iters))
        table = json.loads(text)
        self.ranks = table["ranks"]
        self._links = [Link(j) for j in table["links"]]

    def _pair(self, src, dst):
        for r in (src, dst):
            if not isinstance(r, int) or not 0 <= r < self.ranks:
                raise ValueError(f"LinkInspector: rank {r!r} is not in this group of {self.ranks} ranks")
        if src == dst:
            raise ValueError(f"LinkInspector: {src} to itself is no pair")
        return min(src, dst), max(src, dst)

    def _of(self, src, dst):
        a, b = self._pair(src, dst)
        return [l for l in self._links if l.src == a and l.dst == b]

    def get_link(self, src, dst):
        """The link ranks src and dst use by default (either order): a Link."""
        found = [l for l in self._of(src, dst) if l.default]
        if not found:
            raise LookupError(f"LinkInspector: no measured default link between ranks {src} and {dst}")
        return found[0]

    def best_link(self, src, dst):
        """The pair's measured link with the highest bandwidth (the default one on a tie)."""
        best = self.get_link(src, dst)
        for l in self._of(src, dst):
            if l.bandwidth > best.bandwidth:
                best = l
        return best

    def links(self, plain=False):
        """Every measured link of every pair (the default one and, between nodes, one per shared network), by pair
        and network: Link objects, or with plain=True a list of dicts (Link.to_dict)."""
        return [l.to_dict() for l in self._links] if plain else list(self._links)

    def used_link(self, src, dst):
        """The link src and dst used for their last collective in this group (either order; this rank must be one
        of them: a rank knows its own links). None before their first collective. Local, no communication."""
        self._pair(src, dst)
        me = self._pg.rank()
        if me not in (src, dst):
            raise ValueError(f"LinkInspector.used_link({src}, {dst}) on rank {me}: a rank knows the links of its own "
                             f"pairs only (ask rank {src} or {dst})")
        peer = dst if src == me else src
        for u in self.used_links():
            if u.dst == peer:
                return u
        return None

    def used_links(self):
        """For every rank this rank exchanged a collective's data with: the UsedLink of the latest such collective."""
        out = []
        for j in json.loads(self._pg.links_used()):
            match = [l for l in self._of(j["src"], j["dst"]) if l.type == j["type"] and
                     (l.type == "shm" or l.network == (j["network"] or None))]
            out.append(UsedLink(j, match[0] if match else None))
        return out

    def __str__(self):
        rows = [f"{'src':>4} {'dst':>4} {'link':<5} {'network':<18} {'interfaces':<22} {'bandwidth':>12} "
                f"{'latency':>10} default"]
        for l in self._links:
            ifs = "-" if l.type == "shm" else f"{l.src_interface}->{l.dst_interface}"
            rows.append(f"{l.src:>4} {l.dst:>4} {l.type:<5} {l.network or '-':<18} {ifs:<22} {str(l.bandwidth):>12} "
                        f"{str(l.latency):>10} {'yes' if l.default else ''}")
        return "\n".join(rows)
