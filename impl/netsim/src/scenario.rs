//! One simulated run described as data: a dumbbell, its flows, and what the run measured.
//!
//! A [`RunSpec`] (JSON, written by `testbed/udtbed/simulation/sim.py` from a scenario file of
//! `experiments/sim/`) names a bottleneck and a list of flows, each with its own round-trip
//! time. The dumbbell built from it (docs/simulator.md, "Topology"):
//!
//! ```text
//! sender i ──access i (delay d_i)──▶ ┌──────────────────────────┐ ──▶ receiver i
//!                                    │ bottleneck: rate, DropTail│
//! sender i ◀─access i (delay d_i)─── │ queue, delay D, loss      │ ◀── receiver i
//!                                    └──────────────────────────┘
//! ```
//!
//! with `d_i = rtt_i/2 − D`, so that flow i's propagation RTT is `rtt_i`. Access links are
//! as fast as `access_rate_mbps` (unlimited by default); the reverse bottleneck has the
//! forward one's rate and delay and a queue no ACK stream fills. A flow may have a link of its
//! own after the shared one (`own_rate_mbps`, `own_queue_pkts`): a second, slower bottleneck
//! on its path only.
//!
//! [`run`] returns a [`RunResult`]: each flow's goodput per sample interval (payload bytes the
//! receiving application read), the sender's window, period and RTT at each sample, totals,
//! and the bottleneck's queue and drops. The metrics (Jain's index, stability, friendliness)
//! are computed from it by `conformance/udtconf/metrics.py`, the one implementation the
//! testbed and the suite share.

use std::sync::Arc;

use link_model::link_spec::{LinkSpec, QueueLimit};
use link_model::loss::LossSpec;
use serde::{Deserialize, Serialize};
use transfer::time::Instant;
use udt_proto::cc::native::{NativeVariant, UdtNative};
use udt_proto::config::ConnectionConfig;

use crate::agent::Agent;
use crate::network::{FlowId, FlowSetup, LinkId, Nanos, Network, SocketLimit};
use crate::sabul::{SabulReceiver, SabulSender};
use crate::sabul2004;
use crate::tcp::{self, TcpConfig, TcpReceiver, TcpSender};
use crate::udt::{SendTick, UdtReceiver, UdtSender, WithoutFlowControl, RECEIVER_ADDR};
use crate::udt2004::{self, DecRandomSource};

/// The `cc` of a UDT flow that runs the 2004 NS-2 module's agents ([`udt2004`]), and of a SABUL
/// flow that runs the 2004 SABUL NS-2 module's ([`sabul2004`]).
pub const NS2_2004: &str = "ns2-2004";

/// How long a simulated UDT application waits for its connection.
pub const CONNECT_TIMEOUT: transfer::time::Duration = transfer::time::Duration::from_secs(60);

/// The bottleneck link (both directions).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bottleneck {
    /// The bottleneck's rate, Mb/s.
    pub rate_mbps: f64,
    /// DropTail limit of the forward queue, packets.
    pub queue_pkts: u64,
    /// One-way propagation delay of the bottleneck itself (default 0: all in the access links).
    #[serde(default)]
    pub delay_ms: f64,
    /// Random loss probability on the forward direction.
    #[serde(default)]
    pub loss: f64,
    /// Rate of every access link (default: unlimited).
    #[serde(default)]
    pub access_rate_mbps: Option<f64>,
    /// Every sender on one host whose own NIC comes first on every flow's path (default:
    /// none, each sender on a host of its own with an unlimited interface).
    #[serde(default)]
    pub host_nic: Option<HostNic>,
}

/// The sending host's NIC (issue 13's third Fig. 13 bottleneck): the senders of every flow
/// share it, its queue is the interface's transmit queue, and a datagram socket blocks while
/// `socket_pkts` of its datagrams wait there (its UDP send buffer), where a router would drop
/// them. TCP senders are not limited this way: their segments enter the queue (and are
/// dropped when it is full) as a 2004 Linux's did.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostNic {
    /// The NIC's rate, Mb/s.
    pub rate_mbps: f64,
    /// The transmit queue (`txqueuelen`), packets: Linux's default 1000.
    #[serde(default = "thousand")]
    pub queue_pkts: u64,
    /// A UDT or SABUL socket's datagrams the queue may hold before its sender blocks:
    /// UDT 4.11's 64 KiB UDP send buffer (`UDT_UDP_SNDBUF`) holds 44 packets of 1500 bytes.
    #[serde(default = "udp_socket_pkts")]
    pub socket_pkts: u32,
}

fn thousand() -> u64 {
    1000
}
fn udp_socket_pkts() -> u32 {
    (64 * 1024 / 1500) as u32 + 1
}

/// Which protocol a flow runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// UDT (`udt-proto`'s core, or the 2004 NS-2 module with `cc = "ns2-2004"`).
    Udt,
    /// TCP as NS-2's SACK agent.
    Tcp,
    /// SABUL (`sabul`'s core, or the 2004 SABUL NS-2 module with `cc = "ns2-2004"`).
    Sabul,
}

/// One flow (or `count` identical ones).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    /// Name in the results (default: protocol and index, e.g. `udt3`).
    #[serde(default)]
    pub name: Option<String>,
    /// The protocol the flow runs.
    pub protocol: Protocol,
    /// UDT's controller: `udt411` (4.11's CUDTCC, default), `paper` (the SC'04 variant), or
    /// `ns2-2004`: not a controller but the 2004 NS-2 module's own agents ([`udt2004`]), which
    /// take `window_pkts` as their window cap `Wmax` and refuse `bytes` and `flow_control`.
    /// SABUL: absent (the `sabul` crate) or `ns2-2004`, the 2004 SABUL NS-2 module's agents
    /// ([`sabul2004`]): `window_pkts` its two windows, `initial_rate_mbps` its first `I`, the
    /// flow's `rtt_ms` its Tcl `rtt_`; no `bytes`.
    #[serde(default)]
    pub cc: Option<String>,
    /// UDT: the window-based flow control on (default) or off (rate control alone, Fig. 7).
    #[serde(default = "yes")]
    pub flow_control: bool,
    /// Propagation round-trip time.
    pub rtt_ms: f64,
    /// When the flow starts, s (default 0).
    #[serde(default)]
    pub start_s: f64,
    /// When the sender stops and falls silent (default: never).
    #[serde(default)]
    pub stop_s: Option<f64>,
    /// Bytes to send (default: endless).
    #[serde(default)]
    pub bytes: Option<u64>,
    /// TCP: the largest window (`window_`); UDT: the flow window and both buffers; SABUL: the
    /// receiver's flow window. Default: the protocol's own default (TCP: 20 000).
    #[serde(default)]
    pub window_pkts: Option<u32>,
    /// SABUL: the initial sending rate (default: §7.1's 10 µs interval).
    #[serde(default)]
    pub initial_rate_mbps: Option<f64>,
    /// A link of this flow's own after the shared bottleneck, at this rate (SC'04 Fig. 12: the
    /// OC-12 from StarLight to Ottawa behind Chicago's shared 1 Gb/s uplink). Default: none.
    #[serde(default)]
    pub own_rate_mbps: Option<f64>,
    /// That link's DropTail limit, packets (default 1000).
    #[serde(default)]
    pub own_queue_pkts: Option<u64>,
    /// This many flows of this description (default 1).
    #[serde(default = "one")]
    pub count: u32,
    /// TCP: the model's parameter set, `default` or `ns2-2.26` (NS-2 2.26's timers, Limited
    /// Transmit, SYN and whole-segment reductions: [`TcpConfig::ns2_226`]). Default: `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_profile: Option<String>,
    /// UDT (4.11 or paper controller): the sender's thread wakes only every this many µs, as
    /// a driver whose sleeps end on a coarse timer does; data leaves only at a wake-up, and
    /// every timer of the sender waits for the next one ([`crate::udt::SendTick`]). Packets from
    /// the peer are still handled, and answered, as they arrive. Default: none, every
    /// departure exactly on its schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_tick_us: Option<u64>,
    /// UDT (4.11 or paper controller): packets a late sender may send back to back to catch
    /// up (`ConnectionConfig::pacing_burst`). Default 1: strict pacing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_burst: Option<u32>,
}

fn yes() -> bool {
    true
}
fn one() -> u32 {
    1
}
fn default_sample() -> f64 {
    1.0
}

/// One run: a seed, how long, how often to sample, the bottleneck and the flows.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// Seed of every random draw in the run: links, endpoints, controllers.
    pub seed: u64,
    /// How long the run lasts, s of virtual time.
    pub duration_s: f64,
    /// The sampling interval, s (default 1).
    #[serde(default = "default_sample")]
    pub sample_s: f64,
    /// The shared bottleneck.
    pub bottleneck: Bottleneck,
    /// The long-lived flows (default none).
    #[serde(default)]
    pub flows: Vec<FlowSpec>,
    /// Short transfers started one after another beside the flows (SC'04 Fig. 13, SABUL
    /// Table 2).
    #[serde(default)]
    pub short_flows: Option<ShortFlows>,
}

/// Successive short transfers: `concurrency` at a time, each replaced when it finishes (within
/// 1 ms), until `count` have started or the run ends.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShortFlows {
    /// The transfers' protocol (default TCP).
    #[serde(default = "tcp")]
    pub protocol: Protocol,
    /// Bytes of each transfer.
    pub bytes: u64,
    /// How many transfers run at once.
    pub concurrency: u32,
    /// How many transfers start in all.
    pub count: u32,
    /// Their propagation round-trip time, ms.
    pub rtt_ms: f64,
    /// Their window, packets (default: the protocol's).
    #[serde(default)]
    pub window_pkts: Option<u32>,
    /// When the first transfer starts, s (default 0): later than the bulk flows, so that they
    /// have left their start-up behind.
    #[serde(default)]
    pub start_s: f64,
    /// Count-bound: the run ends when the last of the `count` transfers ends (the bulk flows
    /// kept until then), at `duration_s` at the latest. Default: time-bound, to `duration_s`.
    #[serde(default)]
    pub until_done: bool,
    /// TCP transfers: the model's parameter set, as a flow's `tcp_profile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_profile: Option<String>,
}

fn tcp() -> Protocol {
    Protocol::Tcp
}

/// What the short transfers achieved.
#[derive(Debug, Clone, Serialize)]
pub struct ShortFlowsResult {
    /// Transfers started.
    pub started: u32,
    /// Transfers completed.
    pub completed: u32,
    /// Bytes of the completed transfers.
    pub bytes: u64,
    /// The completed transfers' bytes over the time from the first one's start to the last
    /// one's end, Mb/s (the testbed's short-flow aggregate).
    pub aggregate_mbps: f64,
    /// The completed transfers' mean duration, s.
    pub mean_duration_s: f64,
}

/// One flow's measurements.
#[derive(Debug, Clone, Serialize)]
pub struct FlowResult {
    /// The flow's name.
    pub name: String,
    /// Its protocol.
    pub protocol: Protocol,
    /// Its controller, as the spec named it.
    pub cc: Option<String>,
    /// Its propagation round-trip time, ms.
    pub rtt_ms: f64,
    /// The rate of the flow's own link after the bottleneck, if it has one.
    pub own_rate_mbps: Option<f64>,
    /// When it started, s.
    pub start_s: f64,
    /// Sample times, s since the run began (the end of each interval).
    pub times_s: Vec<f64>,
    /// Goodput over each sample interval, Mb/s (payload bytes read by the receiving
    /// application).
    pub throughput_mbps: Vec<f64>,
    /// The sender's window at each sample, packets (UDT: congestion window; TCP: cwnd).
    pub window_pkts: Vec<f64>,
    /// The sender's inter-packet period at each sample, µs (rate-based senders).
    pub period_us: Vec<f64>,
    /// The sender's smoothed RTT at each sample, ms (where it keeps one).
    pub rtt_sample_ms: Vec<f64>,
    /// Payload bytes the receiving application read in all.
    pub delivered_bytes: u64,
    /// Data packets sent, retransmissions included.
    pub packets_sent: u64,
    /// Data packets retransmitted.
    pub retransmitted: u64,
    /// Loss events the sender reacted to (UDT: NAKs; TCP: fast retransmits and timeouts;
    /// SABUL: ERRs).
    pub loss_events: u64,
    /// When a finite transfer was fully read, s.
    pub finished_s: Option<f64>,
}

/// The bottleneck's measurements.
#[derive(Debug, Clone, Serialize)]
pub struct LinkResult {
    /// Sample times, s since the run began.
    pub times_s: Vec<f64>,
    /// Frames in the forward queue at each sample.
    pub queue_pkts: Vec<usize>,
    /// Frames the link delivered in all.
    pub frames_out: u64,
    /// Bytes the link delivered in all.
    pub bytes_out: u64,
    /// Frames the full queue dropped.
    pub dropped_queue: u64,
    /// Frames the random loss dropped.
    pub dropped_loss: u64,
    /// Bytes out over what the rate could carry in the run, 0..1.
    pub utilisation: f64,
}

/// What one run produced.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// The spec the run ran.
    pub spec: RunSpec,
    /// Each flow's measurements, in the spec's order (a `count` expanded).
    pub flows: Vec<FlowResult>,
    /// The bottleneck's forward direction.
    pub bottleneck: LinkResult,
    /// The senders' host NIC, when the spec has one (`bottleneck.host_nic`).
    pub host_nic: Option<LinkResult>,
    /// The short transfers, when the spec has them.
    pub short_flows: Option<ShortFlowsResult>,
    /// Events the simulator processed.
    pub events: u64,
}

/// What is wrong with a run spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError(pub String);

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpecError {}

fn secs(s: f64) -> Nanos {
    (s * 1e9).round() as Nanos
}

fn bps(mbps: f64) -> u64 {
    (mbps * 1e6).round() as u64
}

impl RunSpec {
    /// Checks the values a run cannot start with, and says which is wrong.
    pub fn validate(&self) -> Result<(), SpecError> {
        let err = |m: String| Err(SpecError(m));
        let b = &self.bottleneck;
        if !self.duration_s.is_finite() || self.duration_s <= 0.0 {
            return err(format!("duration_s must be a positive number of seconds, not {}", self.duration_s));
        }
        if self.sample_s.is_nan() || self.sample_s <= 0.0 || self.sample_s > self.duration_s {
            return err(format!("sample_s must be in (0, duration_s], not {}", self.sample_s));
        }
        if !b.rate_mbps.is_finite() || b.rate_mbps <= 0.0 {
            return err(format!("bottleneck.rate_mbps must be positive, not {}", b.rate_mbps));
        }
        if b.queue_pkts == 0 {
            return err("bottleneck.queue_pkts must be at least 1".into());
        }
        if !(0.0..1.0).contains(&b.loss) {
            return err(format!("bottleneck.loss is a probability in [0, 1), not {}", b.loss));
        }
        if b.delay_ms.is_nan() || b.delay_ms < 0.0 {
            return err(format!("bottleneck.delay_ms must be ≥ 0, not {}", b.delay_ms));
        }
        if let Some(n) = &b.host_nic {
            if !n.rate_mbps.is_finite() || n.rate_mbps <= 0.0 || n.queue_pkts == 0 || n.socket_pkts == 0 {
                return err(format!(
                    "bottleneck.host_nic: rate_mbps must be positive and queue_pkts and socket_pkts at least 1, not {n:?}"
                ));
            }
        }
        if self.flows.is_empty() && self.short_flows.is_none() {
            return err("a run needs at least one flow (or short_flows)".into());
        }
        if let Some(s) = &self.short_flows {
            if s.bytes == 0 || s.concurrency == 0 || s.count == 0 {
                return err("short_flows: bytes, concurrency and count must be at least 1".into());
            }
            if !(0.0..self.duration_s).contains(&s.start_s) {
                return err(format!("short_flows: start_s must be in [0, duration_s), not {}", s.start_s));
            }
            if !s.rtt_ms.is_finite() || s.rtt_ms / 2.0 < b.delay_ms {
                return err(format!("short_flows: rtt_ms {} is less than twice the bottleneck's delay_ms", s.rtt_ms));
            }
            check_tcp_profile("short_flows", s.protocol, s.tcp_profile.as_deref())?;
        }
        for (i, f) in self.flows.iter().enumerate() {
            if !f.rtt_ms.is_finite() || f.rtt_ms / 2.0 < b.delay_ms {
                return err(format!(
                    "flow {i}: rtt_ms {} is less than twice the bottleneck's delay_ms {}",
                    f.rtt_ms, b.delay_ms
                ));
            }
            if f.count == 0 {
                return err(format!("flow {i}: count must be at least 1"));
            }
            if f.start_s.is_nan() || f.start_s < 0.0 || f.stop_s.is_some_and(|s| s.is_nan() || s < f.start_s) {
                return err(format!("flow {i}: start_s must be ≥ 0 and stop_s ≥ start_s"));
            }
            if f.protocol == Protocol::Udt {
                if let Some(cc) = &f.cc {
                    if cc != "udt411" && cc != "paper" && cc != NS2_2004 {
                        return err(format!(
                            "flow {i}: cc {cc:?} is not a UDT controller: use udt411 or paper, or {NS2_2004} for the 2004 NS-2 model"
                        ));
                    }
                    if cc == NS2_2004 && f.bytes.is_some() {
                        return err(format!(
                            "flow {i}: the {NS2_2004} model has no finite transfers (its source is unlimited, \
                             UDT-2004-NS2.md §3.7): drop bytes and bound the flow with stop_s"
                        ));
                    }
                    if cc == NS2_2004 && !f.flow_control {
                        return err(format!(
                            "flow {i}: the {NS2_2004} model has no switch for its window (UDT-2004-NS2.md §7.3): \
                             keep flow_control and set window_pkts (its Wmax) large instead"
                        ));
                    }
                }
            } else if f.protocol == Protocol::Sabul && f.cc.is_some() {
                let cc = f.cc.as_deref().unwrap_or_default();
                if cc != NS2_2004 {
                    return err(format!(
                        "flow {i}: cc {cc:?} is not a SABUL model: leave cc out for the sabul crate, or use {NS2_2004} \
                         for the 2004 NS-2 module"
                    ));
                }
                if f.bytes.is_some() {
                    return err(format!(
                        "flow {i}: the SABUL {NS2_2004} model has no finite transfers (its source is unlimited, \
                         SABUL-2004-NS2.md §1.4): drop bytes and bound the flow with stop_s"
                    ));
                }
                if !f.flow_control {
                    return err(format!("flow {i}: flow_control applies to UDT flows only"));
                }
            } else if f.cc.is_some() || !f.flow_control {
                return err(format!("flow {i}: cc and flow_control apply to UDT flows only"));
            }
            if f.initial_rate_mbps.is_some() && f.protocol != Protocol::Sabul {
                return err(format!("flow {i}: initial_rate_mbps applies to SABUL flows only"));
            }
            if f.own_rate_mbps.is_some_and(|r| !r.is_finite() || r <= 0.0) || f.own_queue_pkts == Some(0) {
                return err(format!("flow {i}: own_rate_mbps must be positive and own_queue_pkts at least 1"));
            }
            if f.own_queue_pkts.is_some() && f.own_rate_mbps.is_none() {
                return err(format!("flow {i}: own_queue_pkts needs own_rate_mbps"));
            }
            if f.send_tick_us.is_some() || f.pacing_burst.is_some() {
                if f.protocol != Protocol::Udt || f.cc.as_deref() == Some(NS2_2004) {
                    return err(format!(
                        "flow {i}: send_tick_us and pacing_burst apply to UDT flows on udt-proto's core only \
                         (cc udt411 or paper)"
                    ));
                }
                if f.send_tick_us == Some(0) || f.pacing_burst == Some(0) {
                    return err(format!(
                        "flow {i}: send_tick_us and pacing_burst must be at least 1 (leave send_tick_us out for \
                         exact pacing)"
                    ));
                }
            }
            if f.window_pkts.is_some_and(|w| w < 32) {
                return err(format!("flow {i}: window_pkts must be at least 32"));
            }
            check_tcp_profile(&format!("flow {i}"), f.protocol, f.tcp_profile.as_deref())?;
        }
        Ok(())
    }
}

/// A `tcp_profile` names one of [`tcp::PROFILES`] and is given to TCP only.
fn check_tcp_profile(what: &str, protocol: Protocol, profile: Option<&str>) -> Result<(), SpecError> {
    let Some(name) = profile else { return Ok(()) };
    if protocol != Protocol::Tcp {
        return Err(SpecError(format!("{what}: tcp_profile applies to TCP only")));
    }
    if TcpConfig::profile(name).is_none() {
        return Err(SpecError(format!(
            "{what}: tcp_profile {name:?} is not a TCP profile: use {}",
            tcp::PROFILES.join(" or ")
        )));
    }
    Ok(())
}

/// Builds the dumbbell of `spec` and runs it to the end.
pub fn run(spec: &RunSpec) -> Result<RunResult, SpecError> {
    spec.validate()?;
    let b = &spec.bottleneck;
    let mut net = Network::new(secs(spec.sample_s));
    let link_seed = |n: u64| spec.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(n);
    let forward = net.add_link(
        "bottleneck",
        &LinkSpec {
            delay_ns: secs(b.delay_ms / 1e3),
            rate_bps: Some(bps(b.rate_mbps)),
            queue: QueueLimit::Packets(b.queue_pkts),
            loss: if b.loss > 0.0 { LossSpec::Random { p: b.loss } } else { LossSpec::None },
            seed: link_seed(0),
            ..LinkSpec::default()
        },
    );
    let reverse = net.add_link(
        "bottleneck-reverse",
        &LinkSpec {
            delay_ns: secs(b.delay_ms / 1e3),
            rate_bps: Some(bps(b.rate_mbps)),
            queue: QueueLimit::Unlimited,
            seed: link_seed(1),
            ..LinkSpec::default()
        },
    );
    let nic = b.host_nic.as_ref().map(|n| {
        let link = net.add_link(
            "host-nic",
            &LinkSpec {
                rate_bps: Some(bps(n.rate_mbps)),
                queue: QueueLimit::Packets(n.queue_pkts),
                seed: link_seed(u64::MAX),
                ..LinkSpec::default()
            },
        );
        SocketLimit { link, packets: n.socket_pkts }
    });
    let shared = Shared { forward, reverse, nic };
    // The 2004 module's unseeded `rand()`: one stream for every 2004 sender of the run.
    let dec_random = udt2004::dec_random_source(spec.seed);
    let mut ids: Vec<(FlowId, &FlowSpec, String)> = Vec::new();
    let mut index = 0u64;
    for f in &spec.flows {
        for k in 0..f.count {
            index += 1;
            let name = match (&f.name, f.count) {
                (Some(n), 1) => n.clone(),
                (Some(n), _) => format!("{n}{}", k + 1),
                (None, _) => format!("{}{index}", protocol_name(f.protocol)),
            };
            let id = add_flow(&mut net, spec, f, &name, index, secs(f.start_s), shared, &dec_random);
            ids.push((id, f, name));
        }
    }
    let end = secs(spec.duration_s) + 1;
    let short = match &spec.short_flows {
        None => {
            net.run_until(end);
            None
        }
        Some(s) => Some(run_short_flows(&mut net, spec, s, index, shared, end, &dec_random)),
    };
    let mut result = collect(spec, &net, shared, &ids);
    result.short_flows = short;
    Ok(result)
}

/// The shared bottleneck's two directions.
#[derive(Clone, Copy)]
struct Shared {
    forward: LinkId,
    reverse: LinkId,
    /// The senders' host NIC (first on every forward route), with a datagram socket's limit.
    nic: Option<SocketLimit>,
}

/// Adds one flow of `f`'s description with its own access links (and own link, if any).
#[allow(clippy::too_many_arguments)]
fn add_flow(
    net: &mut Network,
    spec: &RunSpec,
    f: &FlowSpec,
    name: &str,
    index: u64,
    start: Nanos,
    shared: Shared,
    dec_random: &DecRandomSource,
) -> FlowId {
    let b = &spec.bottleneck;
    let link_seed = |n: u64| spec.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(n);
    let access = LinkSpec {
        delay_ns: secs((f.rtt_ms / 2.0 - b.delay_ms) / 1e3),
        rate_bps: b.access_rate_mbps.map(bps),
        queue: QueueLimit::Unlimited,
        seed: link_seed(2 * index),
        ..LinkSpec::default()
    };
    let up: LinkId = net.add_link(&format!("{name}-access"), &access);
    let down: LinkId = net.add_link(&format!("{name}-access-reverse"), &access);
    let mut route: Vec<LinkId> = shared.nic.map(|n| n.link).into_iter().chain([up, shared.forward]).collect();
    if let Some(rate) = f.own_rate_mbps {
        let own = LinkSpec {
            rate_bps: Some(bps(rate)),
            queue: QueueLimit::Packets(f.own_queue_pkts.unwrap_or(1000)),
            seed: link_seed(2 * index + 1),
            ..LinkSpec::default()
        };
        route.push(net.add_link(&format!("{name}-own"), &own));
    }
    net.add_flow(FlowSetup {
        name: name.into(),
        forward: route,
        reverse: vec![shared.reverse, down],
        start,
        stop: f.stop_s.map(secs),
        socket: shared.nic.filter(|_| f.protocol != Protocol::Tcp),
        make: ends(f, spec.seed.wrapping_mul(1_000_003).wrapping_add(index), dec_random.clone()),
    })
}

/// How often the short-flow generator looks for finished flows to replace.
const SHORT_FLOW_TICK: Nanos = 1_000_000;

/// Runs to `end` while keeping `concurrency` short flows going, each started when one
/// finishes, until `count` have started.
fn run_short_flows(
    net: &mut Network,
    spec: &RunSpec,
    s: &ShortFlows,
    mut index: u64,
    shared: Shared,
    end: Nanos,
    dec_random: &DecRandomSource,
) -> ShortFlowsResult {
    let f = FlowSpec {
        name: None,
        protocol: s.protocol,
        cc: None,
        flow_control: true,
        rtt_ms: s.rtt_ms,
        start_s: 0.0,
        stop_s: None,
        bytes: Some(s.bytes),
        window_pkts: s.window_pkts,
        initial_rate_mbps: None,
        own_rate_mbps: None,
        own_queue_pkts: None,
        count: 1,
        tcp_profile: s.tcp_profile.clone(),
        send_tick_us: None,
        pacing_burst: None,
    };
    let mut active: Vec<(FlowId, Nanos)> = Vec::new();
    let mut started = 0u32;
    let mut done: Vec<(Nanos, Nanos)> = Vec::new();
    net.run_until(secs(s.start_s));
    loop {
        let now = net.now();
        active.retain(|&(id, start)| match net.flow(id).2 {
            Some(t) => {
                done.push((start, t));
                false
            }
            None => true,
        });
        while active.len() < s.concurrency as usize && started < s.count && now < end {
            index += 1;
            started += 1;
            let id = add_flow(net, spec, &f, &format!("short{started}"), index, now, shared, dec_random);
            active.push((id, now));
        }
        if now >= end || (s.until_done && started == s.count && active.is_empty()) {
            break;
        }
        net.run_until((now + SHORT_FLOW_TICK).min(end));
    }
    let bytes = done.len() as u64 * s.bytes;
    let first = done.iter().map(|d| d.0).min().unwrap_or(0);
    let last = done.iter().map(|d| d.1).max().unwrap_or(0);
    let span = (last.saturating_sub(first)) as f64 / 1e9;
    ShortFlowsResult {
        started,
        completed: done.len() as u32,
        bytes,
        aggregate_mbps: if span > 0.0 { bytes as f64 * 8.0 / 1e6 / span } else { 0.0 },
        mean_duration_s: if done.is_empty() {
            0.0
        } else {
            done.iter().map(|d| (d.1 - d.0) as f64 / 1e9).sum::<f64>() / done.len() as f64
        },
    }
}

fn protocol_name(p: Protocol) -> &'static str {
    match p {
        Protocol::Udt => "udt",
        Protocol::Tcp => "tcp",
        Protocol::Sabul => "sabul",
    }
}

/// The flow's two ends, built at its start.
fn ends(f: &FlowSpec, seed: u64, dec_random: DecRandomSource) -> crate::network::MakeEnds {
    let f = f.clone();
    Box::new(move |now: Instant| -> (Box<dyn Agent>, Box<dyn Agent>) {
        match f.protocol {
            Protocol::Udt if f.cc.as_deref() == Some(NS2_2004) => {
                let config = udt2004::SenderConfig { wmax: f.window_pkts.unwrap_or(udt2004::DEFAULT_WMAX) };
                (Box::new(udt2004::Sender::new(config, dec_random, now)), Box::new(udt2004::Receiver::new(now)))
            }
            Protocol::Udt => {
                let variant =
                    if f.cc.as_deref() == Some("paper") { NativeVariant::Paper } else { NativeVariant::Udt411 };
                // Strict 4.11 pacing unless the flow names a coarse sender (no late wake-ups to
                // catch up on otherwise), and an application
                // that waits for its connection: hundreds of flows starting at once on a full
                // link lose handshakes for longer than 4.11's 3 s (SC'04 Fig. 3's 400 flows).
                let mut config = ConnectionConfig {
                    pacing_burst: f.pacing_burst.unwrap_or(1),
                    connect_timeout: CONNECT_TIMEOUT,
                    ..ConnectionConfig::default()
                };
                let native = Arc::new(UdtNative::new(variant));
                config.cc = if f.flow_control { native } else { Arc::new(WithoutFlowControl(native)) };
                if let Some(w) = f.window_pkts {
                    config.flight_flag_size = w;
                    config.snd_buf_pkts = w;
                    config.rcv_buf_pkts = w;
                }
                let receiver = UdtReceiver::new(seed ^ 0xA5A5, config.clone(), f.bytes, now);
                let tick = f.send_tick_us.map(|every_us| SendTick::new(every_us, seed));
                let sender = UdtSender::new(seed, config, RECEIVER_ADDR, f.bytes, now).with_send_tick(tick);
                (Box::new(sender), Box::new(receiver))
            }
            Protocol::Tcp => {
                let profile = f.tcp_profile.as_deref().and_then(TcpConfig::profile).unwrap_or_default();
                let mut config = TcpConfig { bytes: f.bytes, ..profile };
                if let Some(w) = f.window_pkts {
                    config.window_pkts = w;
                }
                if let Some(tick) = config.rtt_tick {
                    // The tick clock's phase, NS-2's per-agent `boot_time_`.
                    let t = (tick.as_micros() as u64).max(1);
                    config.tick_phase =
                        transfer::time::Duration::from_micros(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) % t);
                }
                (Box::new(TcpSender::new(config.clone())), Box::new(TcpReceiver::new(&config)))
            }
            Protocol::Sabul if f.cc.as_deref() == Some(NS2_2004) => {
                let mut config = sabul2004::Config { rtt: f.rtt_ms / 1e3, ..sabul2004::Config::default() };
                if let Some(r) = f.initial_rate_mbps {
                    config.initial_interval = f64::from(sabul2004::PACKET_BYTES) * 8.0 / (r * 1e6);
                }
                if let Some(w) = f.window_pkts {
                    config.send_window = i64::from(w);
                    config.recv_window = i64::from(w);
                }
                (Box::new(sabul2004::Sender::new(config, now)), Box::new(sabul2004::Receiver::new(config, now)))
            }
            Protocol::Sabul => {
                let mut sc = sabul::SenderConfig::default();
                let initial = f.initial_rate_mbps.map_or(sabul::cc::INITIAL_INTERVAL_US, sabul::cc::interval_for_rate);
                sc.controller = Arc::new(sabul::cc::SabulRate::new(initial, true));
                let mut rc = sabul::ReceiverConfig::default();
                if let Some(w) = f.window_pkts {
                    rc.recv_flag_size = w;
                    sc.send_buf_pkts = w as usize;
                }
                (Box::new(SabulSender::new(sc, f.bytes, now)), Box::new(SabulReceiver::new(rc, f.bytes, now)))
            }
        }
    })
}

fn collect(spec: &RunSpec, net: &Network, shared: Shared, ids: &[(FlowId, &FlowSpec, String)]) -> RunResult {
    let s = |t: Nanos| t as f64 / 1e9;
    let flows = ids
        .iter()
        .map(|(id, f, name)| {
            let (_, samples, finished) = net.flow(*id);
            let mut last = 0u64;
            let mut last_t = secs(f.start_s);
            let mut throughput = Vec::with_capacity(samples.len());
            for x in samples {
                let dt = s(x.time - last_t).max(1e-9);
                throughput.push((x.delivered - last) as f64 * 8.0 / 1e6 / dt);
                last = x.delivered;
                last_t = x.time;
            }
            let (sender, receiver) = net.ends(*id).map(|(a, b)| (a.stats(), b.stats())).unwrap_or_default();
            FlowResult {
                name: name.clone(),
                protocol: f.protocol,
                cc: match f.protocol {
                    Protocol::Udt => Some(f.cc.clone().unwrap_or_else(|| "udt411".into())),
                    _ => f.cc.clone(),
                },
                rtt_ms: f.rtt_ms,
                own_rate_mbps: f.own_rate_mbps,
                start_s: f.start_s,
                times_s: samples.iter().map(|x| s(x.time)).collect(),
                throughput_mbps: throughput,
                window_pkts: samples.iter().map(|x| x.sender.window).collect(),
                period_us: samples.iter().map(|x| x.sender.period_us).collect(),
                rtt_sample_ms: samples.iter().map(|x| x.sender.rtt_us / 1e3).collect(),
                delivered_bytes: receiver.delivered,
                packets_sent: sender.packets_sent,
                retransmitted: sender.retransmitted,
                loss_events: sender.loss_events,
                finished_s: finished.map(s),
            }
        })
        .collect();
    let link = |id: LinkId, rate_mbps: f64| {
        let (_, link_samples) = net.link(id);
        let stats = net.link_stats(id);
        let capacity_bytes = rate_mbps * 1e6 / 8.0 * (net.now() as f64 / 1e9);
        LinkResult {
            times_s: link_samples.iter().map(|x| s(x.time)).collect(),
            queue_pkts: link_samples.iter().map(|x| x.queue_pkts).collect(),
            frames_out: stats.frames_out,
            bytes_out: stats.bytes_out,
            dropped_queue: stats.dropped_queue,
            dropped_loss: stats.dropped_loss,
            utilisation: stats.bytes_out as f64 / capacity_bytes,
        }
    };
    RunResult {
        spec: spec.clone(),
        flows,
        short_flows: None,
        bottleneck: link(shared.forward, spec.bottleneck.rate_mbps),
        host_nic: shared.nic.zip(spec.bottleneck.host_nic.as_ref()).map(|(n, h)| link(n.link, h.rate_mbps)),
        events: net.events(),
    }
}
