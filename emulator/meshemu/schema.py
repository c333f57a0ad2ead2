"""The user syntax of topology files, as strict pydantic models.

Values with units are parsed here (to metres, ns, bit/s, bytes, dBm, dB, Hz,
m/s), so the models hold numbers in the units of the resolved configuration.
Checks that need more than one field or file (thresholds after merging a
profile, addresses, areas, node names in links) live in `topology.py`.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag, model_validator

from . import limits, units
from .units import Quantity

NODE_NAME = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
LAB_NAME = re.compile(r"^[a-z][a-z0-9-]{0,15}$")


class StrictModel(BaseModel):
    """Unknown keys are errors; no silent type coercion."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    @classmethod
    def known_keys(cls) -> frozenset[str]:
        """Every field name of every strict model (for "did you mean")."""
        names: set[str] = set()
        pending: list[type[StrictModel]] = [StrictModel]
        while pending:
            model = pending.pop()
            names.update(model.model_fields)
            pending.extend(model.__subclasses__())
        return frozenset(names)


# --- scalar types with units --------------------------------------------------

def measured(quantity: Quantity, *, minimum: float | None = None, positive: bool = False,
             integer: bool = False) -> Any:
    """An annotated type: a `quantity` with its unit, range-checked, as a
    float (or an int for ns, bytes and bit/s)."""

    def parse(value: Any) -> float | int:
        number = quantity.parse(value)
        if positive and number <= 0:
            raise ValueError(f"must be positive, got {value}")
        if minimum is not None and number < minimum:
            raise ValueError(f"must not be negative, got {value}")
        return units.whole(number, f"a {quantity.name} in base units") if integer else number

    # The quantity rides along as metadata: it names the field's unit in section 1 (`resolved_key`).
    return Annotated[int if integer else float, BeforeValidator(parse), quantity]


Distance = measured(units.LENGTH, minimum=0.0)
PositiveDistance = measured(units.LENGTH, positive=True)
Duration = measured(units.TIME, minimum=0.0, integer=True)  # ns
PositiveDuration = measured(units.TIME, positive=True, integer=True)
PositiveRate = measured(units.RATE, positive=True, integer=True)  # bit/s
Size = measured(units.SIZE, minimum=0.0, integer=True)  # bytes
PositiveSize = measured(units.SIZE, positive=True, integer=True)
Power = measured(units.POWER)  # dBm
Loss = measured(units.DECIBEL, minimum=0.0)  # dB
Gain = measured(units.GAIN)  # dBi
Frequency = measured(units.FREQUENCY, positive=True)  # Hz
PositiveSpeed = measured(units.SPEED, positive=True)  # m/s
Probability = Annotated[float, Field(ge=0.0, le=1.0)]
PositiveNumber = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]


def _position(value: Any) -> tuple[float, float, float]:
    if not isinstance(value, list) or len(value) not in (2, 3):
        raise ValueError("expected [x, y] or [x, y, z] in metres")
    xyz = [units.coordinate(part) for part in value]
    return (xyz[0], xyz[1], xyz[2] if len(xyz) == 3 else 0.0)


def _point(value: Any) -> tuple[float, float]:
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError("expected [x, y] in metres")
    return (units.coordinate(value[0]), units.coordinate(value[1]))


Position = Annotated[tuple[float, float, float], BeforeValidator(_position)]
Point = Annotated[tuple[float, float], BeforeValidator(_point)]


def _range_of(quantity: Quantity, positive: bool) -> Any:
    """A [min, max] pair of a quantity, or one value meaning min = max."""
    def parse(value: Any) -> tuple[float, float]:
        parts = value if isinstance(value, list) else [value]
        if len(parts) not in (1, 2):
            raise ValueError(f"expected one {quantity.name} or [min, max], such as [{quantity.example}, "
                             f"{quantity.example}]")
        numbers = []
        for part in parts:
            number = quantity.parse(part)
            if number < 0 or (positive and number == 0):
                raise ValueError(f"must be {'positive' if positive else 'non-negative'}, got {part}")
            numbers.append(number)
        low, high = numbers[0], numbers[-1]
        if low > high:
            raise ValueError(f"min {parts[0]} is above max {parts[1]}")
        return (low, high)

    return Annotated[tuple[float, float], BeforeValidator(parse)]


SpeedRange = _range_of(units.SPEED, positive=True)  # m/s
PauseRange = _range_of(units.TIME, positive=False)  # ns (floats; made whole in resolution)


def _ipv4(value: Any) -> ipaddress.IPv4Address:
    if not isinstance(value, str):
        raise ValueError("expected an IPv4 address such as 10.0.0.1")
    try:
        return ipaddress.IPv4Address(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an IPv4 address") from None


def _ipv4_network(value: Any) -> ipaddress.IPv4Network:
    if not isinstance(value, str):
        raise ValueError("expected an IPv4 subnet such as 10.0.0.0/16")
    try:
        return ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not an IPv4 subnet ({exc})") from None


IPv4 = Annotated[ipaddress.IPv4Address, BeforeValidator(_ipv4)]
Subnet = Annotated[ipaddress.IPv4Network, BeforeValidator(_ipv4_network)]


def _name_checker(pattern: re.Pattern[str], what: str, rule: str) -> Any:
    def check(value: Any) -> str:
        if not isinstance(value, str) or not pattern.match(value):
            raise ValueError(f"bad {what} {value!r}: {rule}")
        return value

    return Annotated[str, BeforeValidator(check)]


NodeName = _name_checker(NODE_NAME, "node name", "a lower-case letter, then up to 31 of a-z, 0-9, '-'")
LabName = _name_checker(LAB_NAME, "lab name", "a lower-case letter, then up to 15 of a-z, 0-9, '-'")


def _rts_threshold(value: Any) -> int:
    if value == "off":
        return RTS_OFF
    number = units.SIZE.parse(value)
    if number < 0:
        raise ValueError(f"must not be negative, got {value}")
    return units.whole(number, "rts_threshold in bytes")


# "off": no MPDU is ever larger than this, so RTS/CTS is never used.
RTS_OFF = 2**32 - 1
RtsThreshold = Annotated[int, BeforeValidator(_rts_threshold), units.SIZE]


# --- section 1's keys ---------------------------------------------------------------

def _quantity_in(annotation: Any) -> Quantity | None:
    for part in get_args(annotation):  # Annotated's metadata, a union's members
        if isinstance(part, Quantity):
            return part
        found = _quantity_in(part)
        if found is not None:
            return found
    return None


@functools.cache
def resolved_key(model: type[BaseModel], name: str) -> str:
    """The key of field `name` in the resolved configuration: the name, and
    the base unit of a quantity after it (`data_rate` -> `data_rate_bps`)."""
    field = model.model_fields[name]  # pydantic keeps a plain Annotated's metadata apart, an optional's inside
    quantity = next((part for part in field.metadata if isinstance(part, Quantity)), None) or \
        _quantity_in(field.annotation)
    return f"{name}_{quantity.suffix}" if quantity is not None else name


def resolved(value: Any) -> Any:
    """A schema value in the resolved configuration's terms: a model's fields
    under their resolved keys (every field, defaults included)."""
    if isinstance(value, BaseModel):
        return {resolved_key(type(value), name): resolved(getattr(value, name)) for name in type(value).model_fields}
    return value


# --- radio ----------------------------------------------------------------------

class FreeSpace(StrictModel):
    model: Literal["free_space"]


class TwoRayGround(StrictModel):
    model: Literal["two_ray_ground"]


class LogDistance(StrictModel):
    model: Literal["log_distance"]
    exponent: PositiveNumber
    reference_distance: PositiveDistance


class Shadowing(StrictModel):
    model: Literal["shadowing"]
    exponent: PositiveNumber
    reference_distance: PositiveDistance
    sigma: Loss
    per: Literal["frame", "link"] = "frame"


def _propagation_shorthand(value: Any) -> Any:
    return {"model": value} if isinstance(value, str) else value


Propagation = Annotated[
    Union[FreeSpace, TwoRayGround, LogDistance, Shadowing],
    Field(discriminator="model"),
    BeforeValidator(_propagation_shorthand),
]


class Radio(StrictModel):
    """Radio settings in user syntax; every field optional (layers merge)."""

    phy: Literal["dsss", "ofdm"] | None = None
    data_rate: PositiveRate | None = None
    basic_rate: PositiveRate | None = None
    preamble: Literal["long", "short"] | None = None
    signal_extension: Duration | None = None
    frequency: Frequency | None = None
    tx_power: Power | None = None
    antenna_gain: Gain | None = None
    antenna_height: Distance | None = None
    system_loss: Loss | None = None
    propagation: Propagation | None = None
    rx_threshold: Power | None = None
    cs_threshold: Power | None = None
    capture_threshold: Loss | None = None
    capture_restart: bool | None = None
    noise_floor: Power | None = None
    interference_floor: Power | None = None
    bit_error_rate: Probability | None = None
    slot: PositiveDuration | None = None
    sifs: PositiveDuration | None = None
    cw_min: Annotated[int, Field(ge=1, le=65535)] | None = None
    cw_max: Annotated[int, Field(ge=1, le=65535)] | None = None
    rts_threshold: RtsThreshold | None = None
    short_retry_limit: Annotated[int, Field(ge=1, le=255)] | None = None
    long_retry_limit: Annotated[int, Field(ge=1, le=255)] | None = None
    queue_len: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    queue_priority: bool | None = None
    eifs_nav: bool | None = None  # ns-2: EIFS as a NAV, and a NAV over a captured weaker frame
    receive_during_tx: bool | None = None  # ns-2: frames arriving while sending still take the receiver
    responses_need_idle: bool | None = None  # ns-2: no CTS (or DATA after CTS) while receiving or under NAV
    retry_drop_flush: bool | None = None  # a retry-limit drop takes the queued frames to that receiver


# --- mac --------------------------------------------------------------------------

class Tdma(StrictModel):
    slot: Duration | Literal["auto"] = "auto"


class TdmaMac(StrictModel):
    tdma: Tdma | None = None


def _mac_kind(value: Any) -> str | None:
    if value == "dcf":
        return "dcf"
    if isinstance(value, dict):
        return "tdma"
    return None


Mac = Annotated[
    Union[Annotated[Literal["dcf"], Tag("dcf")], Annotated[TdmaMac, Tag("tdma")]],
    Discriminator(_mac_kind, custom_error_type="mac", custom_error_message="expected dcf or {tdma: {slot: 6ms}}"),
]


# --- mobility ---------------------------------------------------------------------

class StaticMobility(StrictModel):
    model: Literal["static"]


def _waypoint(value: Any) -> tuple[int, tuple[float, float, float]]:
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError("expected [time, [x, y]] such as [10s, [100m, 0m]]")
    time_ns = units.TIME.parse(value[0])
    if time_ns < 0:
        raise ValueError(f"time must not be negative, got {value[0]}")
    return (units.whole(time_ns, "a waypoint time in ns"), _position(value[1]))


Waypoint = Annotated[tuple[int, tuple[float, float, float]], BeforeValidator(_waypoint)]


class WaypointsMobility(StrictModel):
    model: Literal["waypoints"]
    points: Annotated[list[Waypoint], Field(min_length=1)]

    @model_validator(mode="after")
    def _times_increase(self) -> "WaypointsMobility":
        times = [time for time, _ in self.points]
        if any(later < earlier for earlier, later in zip(times, times[1:])):
            raise ValueError("waypoint times must not decrease")
        return self


class Move(StrictModel):
    at: Duration
    to: Position
    speed: PositiveSpeed


class SetdestMobility(StrictModel):
    model: Literal["setdest"]
    moves: list[Move]

    @model_validator(mode="after")
    def _times_increase(self) -> "SetdestMobility":
        times = [move.at for move in self.moves]
        if any(later < earlier for earlier, later in zip(times, times[1:])):
            raise ValueError("move times (at) must not decrease")
        return self


class RandomWaypointMobility(StrictModel):
    model: Literal["random_waypoint"]
    speed: SpeedRange
    pause: PauseRange = (0.0, 0.0)
    steady_state: bool = True


class Ns2TraceMobility(StrictModel):
    model: Literal["ns2_trace"]
    file: str


NodeMobility = Annotated[
    Union[StaticMobility, WaypointsMobility, SetdestMobility, RandomWaypointMobility],
    Field(discriminator="model"),
]
LabMobility = Annotated[
    Union[StaticMobility, RandomWaypointMobility, Ns2TraceMobility],
    Field(discriminator="model"),
]


# --- generators -------------------------------------------------------------------

NodeCount = Annotated[int, Field(ge=1, le=limits.MAX_NODES)]
Attempts = Annotated[int, Field(ge=1, le=limits.MAX_PLACEMENT_ATTEMPTS)]


class ChainGenerator(StrictModel):
    kind: Literal["chain"]
    n: NodeCount
    spacing: PositiveDistance


class GridGenerator(StrictModel):
    kind: Literal["grid"]
    rows: NodeCount
    cols: NodeCount
    spacing: PositiveDistance

    @model_validator(mode="after")
    def _node_count(self) -> "GridGenerator":
        if self.rows * self.cols > limits.MAX_NODES:
            raise ValueError(f"{self.rows} x {self.cols} are {self.rows * self.cols} nodes, more than the "
                             f"{limits.MAX_NODES} of a topology (meshemu/limits.py)")
        return self


class RandomPlacement(StrictModel):
    """What the random generators share: n nodes drawn from the seed, redrawn
    until connected."""

    n: NodeCount
    connected: bool = True
    max_attempts: Attempts = 100

    @model_validator(mode="after")
    def _draws(self) -> "RandomPlacement":
        most = limits.placement_attempts(self.n)
        if self.max_attempts > most:
            raise ValueError(f"max_attempts: {self.max_attempts} draws of {self.n} nodes are more than a placement "
                             f"may make (n x n x max_attempts at most {limits.MAX_PLACEMENT_PAIRS} node pairs, "
                             f"meshemu/limits.py): at most {most}")
        return self


class RandomGenerator(RandomPlacement):
    kind: Literal["random"]


class StripGenerator(RandomPlacement):
    kind: Literal["strip"]
    length: PositiveDistance
    width: PositiveDistance


class StarGenerator(StrictModel):
    kind: Literal["star"]
    n: NodeCount  # nodes on the circle; n0 is the centre
    radius: PositiveDistance


Generator = Annotated[
    Union[ChainGenerator, GridGenerator, RandomGenerator, StripGenerator, StarGenerator],
    Field(discriminator="kind"),
]


# --- topology ---------------------------------------------------------------------

class Area(StrictModel):
    min: Point
    max: Point

    @model_validator(mode="after")
    def _ordered(self) -> "Area":
        if not (self.min[0] < self.max[0] and self.min[1] < self.max[1]):
            raise ValueError("min must be below max in both x and y")
        return self


class NodeSpec(StrictModel):
    position: Position | None = None
    radio: Radio | None = None
    ipv4: IPv4 | None = None
    promiscuous: bool | None = None
    mobility: NodeMobility | None = None


class Defaults(StrictModel):
    promiscuous: bool | None = None
    radio: Radio | None = None
    mobility: NodeMobility | None = None


class LinkSpec(StrictModel):
    a: str
    b: str
    bit_error_rate: Probability | None = None
    extra_loss: Loss | None = None


Seed = Annotated[int, Field(ge=0, le=2**64 - 1)]


# Radio profiles: one YAML file each (profiles.py loads them).
PROFILE_DIR = Path(__file__).parent / "profiles"


def profile_names() -> list[str]:
    return sorted(path.stem for path in PROFILE_DIR.glob("*.yaml"))


def _profile_name(value: Any) -> str:
    if not isinstance(value, str) or value not in profile_names():
        raise ValueError(f"unknown profile {value!r}; available: {', '.join(profile_names())}")
    return value


ProfileName = Annotated[str, BeforeValidator(_profile_name)]


# --- routing ---------------------------------------------------------------------

Ttl = Annotated[int, Field(ge=1, le=255)]
PerSecond = Annotated[int, Field(ge=1, le=10_000)]


class AodvOptions(StrictModel):
    """aodvd settings (routing/aodv/README.md); unset ones keep the daemon's
    defaults (RFC 3561 with the TCP-variants paper's Table I)."""

    hello_interval: Duration | None = None  # 0s: no HELLOs (then link_layer_feedback)
    allowed_hello_loss: Annotated[int, Field(ge=1, le=100)] | None = None
    active_route_timeout: PositiveDuration | None = None
    link_layer_feedback: bool | None = None
    link_failures: Literal["any", "data"] | None = None  # data: only failed data frames break a link (ns-2)
    local_repair: bool | None = None
    gratuitous_rrep: bool | None = None
    intermediate_replies: bool | None = None
    expanding_ring_search: bool | None = None
    ttl_start: Ttl | None = None
    ttl_increment: Ttl | None = None
    ttl_threshold: Ttl | None = None
    ring_limit: Literal["rfc", "ns2"] | None = None  # ns2: the last ring may pass ttl_threshold (6 + 2 = 8)
    measured_hop_time: bool | None = None  # RREP waits count the measured latency per hop (ns-2's PerHopTime)
    net_diameter: Ttl | None = None
    node_traversal_time: PositiveDuration | None = None
    rreq_retries: Annotated[int, Field(ge=0, le=100)] | None = None
    rreq_rate_limit: PerSecond | None = None
    rerr_rate_limit: PerSecond | None = None
    rrep_ack: bool | None = None
    broadcast_jitter: Duration | None = None
    # ns-2.35's AODV (routing/aodv/NS2.md): `preset: ns2` starts from its values, the keys beside it win.
    preset: Literal["default", "ns2"] | None = None
    local_repair_rule: Literal["rfc", "ns2"] | None = None
    rreq_backoff: Literal["binary", "linear"] | None = None
    rerr_broadcast: bool | None = None
    acked_frames_alive: bool | None = None
    flush_on_break: bool | None = None  # aodvd asks the medium to drop what is queued for a neighbour it gives up
    relay_every_reply: bool | None = None  # a reply that is no news on its way back goes on as the own route
    renumber_replies: bool | None = None  # the destination answers with max(own, asked) + 1 (ns-2)
    precursor_rule: Literal["rfc", "ns2"] | None = None  # ns2: precursors on the way to a reply's destination only
    release_spacing: Duration | None = None  # held packets leave this far apart after a reply (ns-2: 10 ms)
    timeout_buffer: Annotated[int, Field(ge=0, le=255)] | None = None
    link_feedback_poll: PositiveDuration | None = None  # aodvd's [daemon] link_feedback_poll_ms


class AodvRouting(StrictModel):
    aodv: AodvOptions


class CopasOptions(StrictModel):
    """copasd settings (routing/copas/README.md); unset ones keep the
    daemon's defaults (the COPAS paper's Table 1)."""

    t_backoff: PositiveDuration | None = None
    alpha: Annotated[float, Field(gt=0, le=1)] | None = None
    t_collect: PositiveDuration | None = None
    backoff_thres: Annotated[float, Field(ge=0)] | None = None
    probe_interval: PositiveDuration | None = None
    probe_idle: PositiveDuration | None = None
    active_route_timeout: PositiveDuration | None = None
    discovery_timeout: PositiveDuration | None = None
    rreq_retries: Annotated[int, Field(ge=0, le=100)] | None = None
    net_diameter: Annotated[int, Field(ge=2, le=255)] | None = None
    broadcast_jitter: Duration | None = None
    reroute_hold: Duration | None = None
    length_slack: Annotated[int, Field(ge=0, le=64)] | None = None
    max_candidates: Annotated[int, Field(ge=2, le=64)] | None = None
    link_layer_feedback: bool | None = None
    route_ack_timeout: PositiveDuration | None = None
    route_retries: Annotated[int, Field(ge=0, le=10)] | None = None
    silent_hold: Duration | None = None


class CopasRouting(StrictModel):
    copas: CopasOptions


class BabeldOptions(StrictModel):
    """Debian's babeld; unset ones keep babeld's defaults."""

    hello_interval: PositiveDuration | None = None
    update_interval: PositiveDuration | None = None


class BabeldRouting(StrictModel):
    babeld: BabeldOptions


def _routing_kind(value: Any) -> str | None:
    if isinstance(value, str):
        return "name"
    if isinstance(value, dict) and len(value) == 1:
        return next(iter(value)) if next(iter(value)) in ("aodv", "babeld", "copas") else None
    return None


RoutingSpec = Annotated[
    Union[
        # dsr and dsdv: ns-2's agents, for the ns-2 driver only (choices.Ns2Agent).
        Annotated[Literal["static", "none", "aodv", "babeld", "copas", "dsr", "dsdv"], Tag("name")],
        Annotated[AodvRouting, Tag("aodv")],
        Annotated[BabeldRouting, Tag("babeld")],
        Annotated[CopasRouting, Tag("copas")],
    ],
    Discriminator(_routing_kind, custom_error_type="routing",
                  custom_error_message="expected static, none, aodv, babeld, copas, dsr, dsdv, "
                                       "{aodv: {option: value}}, {babeld: {option: value}} or "
                                       "{copas: {option: value}}"),
]


# --- queueing ----------------------------------------------------------------------

class QueueingOptions(StrictModel):
    """bpd settings (routing/backpressure/README.md); unset ones keep bpd's
    defaults. Options that belong to another mode are errors naming them."""

    mode: Literal["fifo", "fq", "backpressure"]
    classify: Literal["source", "destination", "next-hop", "previous-hop"] | None = None
    threshold: Annotated[int, Field(ge=1, le=100_000)] | None = None  # backpressure: packets per flow
    flow_limit: Annotated[int, Field(ge=1, le=1_000_000)] | None = None  # fq: packets per flow
    total_limit: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    knowledge: Literal["overhear", "beacon", "oracle"] | None = None
    beacon_period: Duration | None = None
    overhear_timeout: PositiveDuration | None = None
    radio_depth: Annotated[int, Field(ge=1, le=1000)] | None = None
    max_hold: PositiveDuration | None = None

    @model_validator(mode="after")
    def _fits_mode(self) -> "QueueingOptions":
        only = {"fq": ["flow_limit"],
                "backpressure": ["threshold", "knowledge", "beacon_period", "overhear_timeout"]}
        for mode, keys in only.items():
            for key in keys:
                if getattr(self, key) is not None and self.mode != mode:
                    raise ValueError(f"{key} is for mode {mode}, not {self.mode}")
        if self.mode == "fifo":
            given = [key for key in ("classify", "total_limit", "radio_depth", "max_hold") if getattr(self, key) is not None]
            if given:
                raise ValueError(f"{given[0]} needs mode fq or backpressure (fifo runs no daemon)")
        if self.mode == "backpressure" and self.classify in ("next-hop", "previous-hop"):
            raise ValueError(f"classify: {self.classify} cannot carry backpressure (a flow must have the same name at "
                             "every hop): use source or destination")
        if self.knowledge == "beacon" and self.beacon_period == 0:
            raise ValueError("knowledge: beacon needs beacons: beacon_period must not be 0s")
        return self


def _queueing_shorthand(value: Any) -> Any:
    return {"mode": value} if isinstance(value, str) else value


QueueingSpec = Annotated[QueueingOptions, BeforeValidator(_queueing_shorthand)]


# --- backend -----------------------------------------------------------------------

class TapBackend(StrictModel):
    kind: Literal["tap"]


class HwsimBackend(StrictModel):
    """mac80211_hwsim radios in the nodes (emulator/README.md section 7)."""

    kind: Literal["hwsim"]
    mode: Literal["ibss", "mesh"] = "ibss"
    ssid: Annotated[str, Field(min_length=1, max_length=32)] = "meshemu"  # or the mesh ID
    frequency: Frequency = 2.412e9  # the radios' channel; the model's radio.frequency is what propagates
    vm: bool = False  # the lab only runs inside `meshemu vm`


def _backend_shorthand(value: Any) -> Any:
    return {"kind": value} if isinstance(value, str) else value


Backend = Annotated[
    Union[TapBackend, HwsimBackend],
    Field(discriminator="kind"),
    BeforeValidator(_backend_shorthand),
]


def _sched_fifo(value: Any) -> Any:
    if isinstance(value, bool) or value == "auto":
        return value
    raise ValueError(f"expected true, false or auto, got {value!r}")


class Realtime(StrictModel):
    """How the medium keeps to the wall clock (emulator/README.md section 4)."""

    # The medium's event loop under SCHED_FIFO: true, false, or auto (if the
    # kernel allows it, else normal scheduling and a warning).
    sched_fifo: Annotated[Literal["auto"] | bool, BeforeValidator(_sched_fifo)] = "auto"
    spin: Duration = 0  # an event due sooner than this is waited for by polling, not by the timer

    @model_validator(mode="after")
    def _short_spin(self) -> "Realtime":
        if self.spin > 1_000_000:  # the medium's own limit: spinning is for the last microseconds
            raise ValueError(f"spin must be at most 1ms, got {self.spin / 1e3:g}us")
        return self


class TopologySpec(StrictModel):
    name: LabName | None = None
    profile: ProfileName = "ns2-wavelan"
    radio: Radio | None = None
    seed: Seed = 1
    mac: Mac = "dcf"
    subnet: Subnet = ipaddress.IPv4Network("10.0.0.0/16")
    routing: RoutingSpec = "static"
    queueing: QueueingSpec = QueueingOptions(mode="fifo")
    area: Area | None = None
    defaults: Defaults | None = None
    generate: Generator | None = None
    nodes: dict[NodeName, NodeSpec | None] | None = None
    links: list[LinkSpec] | None = None
    mobility: LabMobility | None = None
    backend: Backend = TapBackend(kind="tap")
    realtime: Realtime = Realtime()
    # How the nodes' kernels keep their neighbours' link addresses (topologies/README.md).
    arp: Literal["kernel", "resolve_once"] = "kernel"


# --- sim and experiment files -----------------------------------------------------------

SweepSpec = dict[str, Annotated[list[Any], Field(min_length=1)] | dict[str | int | float, dict[str, Any]]]


class RunFileSpec(StrictModel):
    """What sim and experiment files share: a topology (file or inline, see
    sweep.py), MAC override, duration and warm-up, the seeds and a sweep (a
    list of values per dotted path, or named cases {CASE: {PATH: VALUE}})."""

    description: str | None = None
    topology: dict[str, Any]
    mac: Mac | None = None
    duration: PositiveDuration
    warmup: Duration = 0
    seeds: Annotated[list[Seed], Field(min_length=1, max_length=limits.MAX_SEEDS)] | None = None
    seed: Seed | None = None
    repetitions: Annotated[int, Field(ge=1, le=limits.MAX_SEEDS)] | None = None
    sweep: SweepSpec | None = None

    @model_validator(mode="after")
    def _consistent_times_and_seeds(self) -> "RunFileSpec":
        given = [key for key in ("seeds", "seed", "repetitions") if getattr(self, key) is not None]
        if len(given) > 1:
            raise ValueError(f"give one of seeds, seed and repetitions, not {' and '.join(given)}")
        if self.warmup >= self.duration:
            raise ValueError("warmup must be shorter than duration")
        return self
