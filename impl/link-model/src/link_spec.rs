//! The link spec: one direction of an emulated link, written on the command line as
//! comma-separated `key=value` pairs, e.g. `delay=55ms,rate=1gbit,queue=1000p,loss=0.001,seed=1`.
//!
//! | key     | value                                             | default     |
//! |---------|---------------------------------------------------|-------------|
//! | `delay` | one-way propagation delay: `s`, `ms`, `us`, `ns`  | `0`         |
//! | `rate`  | `bit`/`bps`, `kbit`/`kbps`, `mbit`/`mbps`, `gbit`/`gbps` (bits/s, 1000-based), or `unlimited` | `unlimited` |
//! | `queue` | DropTail limit: `1000p` packets, `64kb` bytes (`b`, `kb`=1024, `mb`=1024²) or `unlimited` | `1000p` |
//! | `loss`  | `P`, `P%`, `random:P`, or `ge:p,r,h[,k]` (Gilbert–Elliott) or `none` | `none` |
//! | `duplicate` | `P` or `P%`: a frame that gets through is delivered twice with probability P, the copy right behind it ([`crate::duplicate`]) | `0` |
//! | `reorder` | `P` or `P%`: a frame is held back `reorder_delay` past the bottleneck with probability P, so later frames overtake it ([`crate::reorder`]) | `0` |
//! | `reorder_delay` | the extra delay of a held-back frame: `s`, `ms`, `us`, `ns`; needs `reorder` | `1ms` |
//! | `seed`  | seed of the direction's PRNG streams: loss, duplicate, reorder (u64) | `1` |
//!
//! Unlike `tc`, `bps` means *bits* per second here. Inside `ge:` the commas separate the
//! model's parameters; a comma-separated part without `=` continues the previous value.
//! `duplicate` and `reorder` take a single probability (no netem-style correlation or gap).

use crate::loss::LossSpec;
use std::fmt;

/// DropTail limit of the serialization queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueLimit {
    /// At most this many frames waiting or in serialization (`queue=1000p`).
    Packets(u64),
    /// At most this many bytes waiting or in serialization (`queue=64kb`).
    Bytes(u64),
    /// No limit (`queue=unlimited`).
    Unlimited,
}

/// One direction of an emulated link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkSpec {
    /// One-way delay in nanoseconds (parsed at µs precision or better).
    pub delay_ns: u64,
    /// Bottleneck rate in bits per second; `None` = no serialization delay.
    pub rate_bps: Option<u64>,
    /// DropTail limit of the bottleneck queue (only with a `rate_bps`).
    pub queue: QueueLimit,
    /// Loss, decided for each offered frame before the queue.
    pub loss: LossSpec,
    /// Probability that a frame that gets through is delivered twice; 0 = never.
    pub duplicate: f64,
    /// Probability that a frame is held back by `reorder_delay_ns`; 0 = never.
    pub reorder: f64,
    /// Extra delay of a held-back frame, after the bottleneck ([`DEFAULT_REORDER_DELAY_NS`]).
    pub reorder_delay_ns: u64,
    /// Seed of the direction's random streams: loss draws from it, duplication and reordering
    /// from it mixed with a constant of their own.
    pub seed: u64,
}

/// `reorder_delay`'s default: 1 ms, several frame times at the rates the testbed emulates
/// (1514 B take 121 µs at 100 Mbit/s), so a held frame is overtaken on a busy link.
pub const DEFAULT_REORDER_DELAY_NS: u64 = 1_000_000;

impl Default for LinkSpec {
    /// A transparent link: no delay, no rate limit, netem's default 1000-packet queue.
    fn default() -> Self {
        Self {
            delay_ns: 0,
            rate_bps: None,
            queue: QueueLimit::Packets(1000),
            loss: LossSpec::None,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay_ns: DEFAULT_REORDER_DELAY_NS,
            seed: 1,
        }
    }
}

/// What is wrong with a link spec, and an example of what would be right.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSpecError {
    /// The key whose value is wrong; empty for an error of the spec as a whole.
    pub key: String,
    /// The value as given.
    pub value: String,
    /// What is wrong, and what would be right.
    pub reason: String,
}

impl fmt::Display for LinkSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "link spec: {}", self.reason)
        } else {
            write!(f, "link spec: {}={:?}: {}", self.key, self.value, self.reason)
        }
    }
}

impl std::error::Error for LinkSpecError {}

impl std::str::FromStr for LinkSpec {
    type Err = LinkSpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)
    }
}

impl fmt::Display for LinkSpec {
    /// Prints a spec that parses back to `self`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "delay={}us", self.delay_ns as f64 / 1e3)?;
        match self.rate_bps {
            Some(r) => write!(f, ",rate={r}bit")?,
            None => write!(f, ",rate=unlimited")?,
        }
        match self.queue {
            QueueLimit::Packets(n) => write!(f, ",queue={n}p")?,
            QueueLimit::Bytes(n) => write!(f, ",queue={n}b")?,
            QueueLimit::Unlimited => write!(f, ",queue=unlimited")?,
        }
        match self.loss {
            LossSpec::None => write!(f, ",loss=none")?,
            LossSpec::Random { p } => write!(f, ",loss=random:{p}")?,
            LossSpec::GilbertElliott { p, r, h, k } => write!(f, ",loss=ge:{p},{r},{h},{k}")?,
        }
        // Only when set, so a spec without them prints as it always did.
        if self.duplicate > 0.0 {
            write!(f, ",duplicate={}", self.duplicate)?;
        }
        if self.reorder > 0.0 || self.reorder_delay_ns != DEFAULT_REORDER_DELAY_NS {
            write!(f, ",reorder={},reorder_delay={}us", self.reorder, self.reorder_delay_ns as f64 / 1e3)?;
        }
        write!(f, ",seed={}", self.seed)
    }
}

fn err(key: &str, value: &str, reason: impl Into<String>) -> LinkSpecError {
    LinkSpecError { key: key.into(), value: value.into(), reason: reason.into() }
}

/// Parses a link spec; see the module docs for the syntax.
pub fn parse(s: &str) -> Result<LinkSpec, LinkSpecError> {
    // Group "ge:0.01,0.3,1" back together: parts without '=' continue the previous value.
    let mut pairs: Vec<(String, String)> = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some((k, v)) => pairs.push((k.trim().to_ascii_lowercase(), v.trim().to_string())),
            None => match pairs.last_mut() {
                Some((_, v)) => {
                    v.push(',');
                    v.push_str(part);
                }
                None => {
                    return Err(err(
                        "",
                        "",
                        format!(
                        "{part:?} is not key=value; write e.g. delay=20ms,rate=100mbit,queue=1000p,loss=0.001,seed=1"
                    ),
                    ))
                }
            },
        }
    }
    let mut spec = LinkSpec::default();
    let mut seen: Vec<String> = Vec::new();
    for (k, v) in &pairs {
        if seen.contains(k) {
            return Err(err(k, v, "given twice"));
        }
        seen.push(k.clone());
        match k.as_str() {
            "delay" => spec.delay_ns = parse_duration_ns(v).map_err(|r| err(k, v, r))?,
            "rate" => spec.rate_bps = parse_rate_bps(v).map_err(|r| err(k, v, r))?,
            "queue" | "limit" => spec.queue = parse_queue(v).map_err(|r| err(k, v, r))?,
            "loss" => spec.loss = parse_loss(v).map_err(|r| err(k, v, r))?,
            "duplicate" => {
                spec.duplicate =
                    parse_single_probability(v, "duplicate=0.5% (no correlation)").map_err(|r| err(k, v, r))?
            }
            "reorder" => {
                spec.reorder =
                    parse_single_probability(v, "reorder=1%,reorder_delay=2ms (the extra delay is its own key)")
                        .map_err(|r| err(k, v, r))?
            }
            "reorder_delay" => {
                spec.reorder_delay_ns = parse_duration_ns(v).map_err(|r| err(k, v, r))?;
                if spec.reorder_delay_ns == 0 {
                    return Err(err(
                        k,
                        v,
                        "a held-back frame with no extra delay is overtaken by nothing; give e.g. 1ms",
                    ));
                }
            }
            "seed" => spec.seed = v.parse().map_err(|_| err(k, v, "not an unsigned 64-bit integer; e.g. seed=1"))?,
            _ => {
                return Err(err(
                    k,
                    v,
                    "unknown key; known keys are delay, rate, queue, loss, duplicate, reorder, reorder_delay, seed",
                ))
            }
        }
    }
    if let Some((k, v)) = pairs.iter().find(|(k, _)| k == "reorder_delay") {
        if !seen.iter().any(|s| s == "reorder") {
            return Err(err(k, v, "has no effect without reorder=P; add e.g. reorder=1%"));
        }
    }
    Ok(spec)
}

/// Splits "55ms" into (55.0, "ms").
fn split_number(v: &str) -> Result<(f64, String), String> {
    let end = v.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(v.len());
    let (num, unit) = v.split_at(end);
    if num.is_empty() {
        return Err("expected a number first".into());
    }
    let x: f64 = num.parse().map_err(|_| format!("{num:?} is not a number"))?;
    if !x.is_finite() || x < 0.0 {
        return Err("must be a non-negative number".into());
    }
    Ok((x, unit.trim().to_ascii_lowercase()))
}

fn parse_duration_ns(v: &str) -> Result<u64, String> {
    let (x, unit) = split_number(v)?;
    let scale = match unit.as_str() {
        "s" => 1e9,
        "ms" => 1e6,
        "us" | "µs" => 1e3,
        "ns" => 1.0,
        "" if x == 0.0 => 0.0,
        "" => return Err("missing unit; write e.g. 55ms, 500us or 0.1s".into()),
        _ => return Err(format!("unknown unit {unit:?}; use s, ms, us or ns")),
    };
    let ns = (x * scale).round();
    if ns > 3600e9 {
        return Err("longer than an hour; is the unit right?".into());
    }
    Ok(ns as u64)
}

fn parse_rate_bps(v: &str) -> Result<Option<u64>, String> {
    if matches!(v.to_ascii_lowercase().as_str(), "unlimited" | "none" | "inf") {
        return Ok(None);
    }
    let (x, unit) = split_number(v)?;
    let scale = match unit.as_str() {
        "bit" | "bps" => 1.0,
        "kbit" | "kbps" => 1e3,
        "mbit" | "mbps" => 1e6,
        "gbit" | "gbps" => 1e9,
        "" => return Err("missing unit; write e.g. 100mbit, 1gbit or 64kbit".into()),
        _ => return Err(format!("unknown unit {unit:?}; use bit, kbit, mbit or gbit (bits per second)")),
    };
    let bps = (x * scale).round();
    if bps < 1.0 {
        return Err("rate must be at least 1bit; for no limit write rate=unlimited".into());
    }
    if bps > 1e12 {
        return Err("above 1 Tbit/s; is the unit right?".into());
    }
    Ok(Some(bps as u64))
}

fn parse_queue(v: &str) -> Result<QueueLimit, String> {
    if matches!(v.to_ascii_lowercase().as_str(), "unlimited" | "none" | "inf") {
        return Ok(QueueLimit::Unlimited);
    }
    let (x, unit) = split_number(v)?;
    if x.fract() != 0.0 {
        return Err("must be a whole number".into());
    }
    let n = x as u64;
    let limit = match unit.as_str() {
        "p" | "pkt" | "pkts" | "packets" => QueueLimit::Packets(n),
        "b" => QueueLimit::Bytes(n),
        "kb" => QueueLimit::Bytes(n * 1024),
        "mb" => QueueLimit::Bytes(n * 1024 * 1024),
        "" => return Err("missing unit; write e.g. 1000p (packets) or 256kb (bytes)".into()),
        _ => return Err(format!("unknown unit {unit:?}; use p (packets) or b, kb, mb (bytes)")),
    };
    if n == 0 {
        return Err("a zero queue drops everything; give at least 1p".into());
    }
    Ok(limit)
}

fn parse_probability(v: &str) -> Result<f64, String> {
    let (s, scale) = match v.strip_suffix('%') {
        Some(s) => (s, 0.01),
        None => (v, 1.0),
    };
    let p: f64 = s.trim().parse().map_err(|_| format!("{v:?} is not a probability; write e.g. 0.001 or 0.1%"))?;
    let p = p * scale;
    if !(0.0..=1.0).contains(&p) {
        return Err(format!("{v:?} is not a probability between 0 and 1"));
    }
    Ok(p)
}

/// `P`, `P%` or `none` for a key that takes one probability; `example` shows the right form
/// when a comma continued the value.
fn parse_single_probability(v: &str, example: &str) -> Result<f64, String> {
    if v.contains(',') {
        return Err(format!("takes one probability; write e.g. {example}"));
    }
    if v.eq_ignore_ascii_case("none") {
        return Ok(0.0);
    }
    parse_probability(v)
}

fn parse_loss(v: &str) -> Result<LossSpec, String> {
    let lower = v.to_ascii_lowercase();
    if matches!(lower.as_str(), "none" | "0") {
        return Ok(LossSpec::None);
    }
    if let Some(p) = lower.strip_prefix("random:") {
        return Ok(LossSpec::Random { p: parse_probability(p)? });
    }
    if let Some(params) = lower.strip_prefix("ge:") {
        let ps = params.split(',').map(|x| parse_probability(x.trim())).collect::<Result<Vec<_>, _>>()?;
        return match ps[..] {
            [p, r, h] => Ok(LossSpec::GilbertElliott { p, r, h, k: 0.0 }),
            [p, r, h, k] => Ok(LossSpec::GilbertElliott { p, r, h, k }),
            _ => Err("Gilbert–Elliott takes ge:p,r,h or ge:p,r,h,k (p: good→bad, r: bad→good, h: loss in bad, k: loss in good)".into()),
        };
    }
    if lower.contains(':') {
        return Err("unknown loss model; use random:P or ge:p,r,h".into());
    }
    Ok(LossSpec::Random { p: parse_probability(&lower)? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_full_example() {
        let s: LinkSpec = "delay=55ms,rate=1gbit,queue=1000p,loss=0.001,seed=1".parse().unwrap();
        assert_eq!(
            s,
            LinkSpec {
                delay_ns: 55_000_000,
                rate_bps: Some(1_000_000_000),
                queue: QueueLimit::Packets(1000),
                loss: LossSpec::Random { p: 0.001 },
                seed: 1,
                ..LinkSpec::default()
            }
        );
    }

    #[test]
    fn durations_take_s_ms_us_with_microsecond_precision() {
        assert_eq!(parse("delay=1.5s").unwrap().delay_ns, 1_500_000_000);
        assert_eq!(parse("delay=250us").unwrap().delay_ns, 250_000);
        assert_eq!(parse("delay=0.001ms").unwrap().delay_ns, 1_000);
        assert_eq!(parse("delay=0").unwrap().delay_ns, 0);
    }

    #[test]
    fn rates_are_bits_per_second_1000_based() {
        assert_eq!(parse("rate=64kbit").unwrap().rate_bps, Some(64_000));
        assert_eq!(parse("rate=2.5mbit").unwrap().rate_bps, Some(2_500_000));
        assert_eq!(parse("rate=100Mbps").unwrap().rate_bps, Some(100_000_000));
        assert_eq!(parse("rate=9600bps").unwrap().rate_bps, Some(9600));
        assert_eq!(parse("rate=unlimited").unwrap().rate_bps, None);
    }

    #[test]
    fn queue_in_packets_or_bytes() {
        assert_eq!(parse("queue=50p").unwrap().queue, QueueLimit::Packets(50));
        assert_eq!(parse("queue=1500b").unwrap().queue, QueueLimit::Bytes(1500));
        assert_eq!(parse("queue=64kb").unwrap().queue, QueueLimit::Bytes(65536));
        assert_eq!(parse("queue=2mb").unwrap().queue, QueueLimit::Bytes(2 << 20));
        assert_eq!(parse("queue=unlimited").unwrap().queue, QueueLimit::Unlimited);
    }

    #[test]
    fn loss_models() {
        assert_eq!(parse("loss=random:0.01").unwrap().loss, LossSpec::Random { p: 0.01 });
        assert_eq!(parse("loss=1%").unwrap().loss, LossSpec::Random { p: 0.01 });
        assert_eq!(
            parse("loss=ge:0.01,0.3,0.8,rate=1gbit").unwrap(),
            LinkSpec {
                rate_bps: Some(1_000_000_000),
                loss: LossSpec::GilbertElliott { p: 0.01, r: 0.3, h: 0.8, k: 0.0 },
                ..LinkSpec::default()
            }
        );
        assert_eq!(
            parse("loss=ge:0.01,0.3,1,0.001").unwrap().loss,
            LossSpec::GilbertElliott { p: 0.01, r: 0.3, h: 1.0, k: 0.001 }
        );
    }

    #[test]
    fn duplicate_and_reorder_take_a_probability() {
        let s = parse("delay=10ms,duplicate=0.01,reorder=2%,reorder_delay=3ms,seed=4").unwrap();
        assert_eq!(
            (s.duplicate, s.reorder, s.reorder_delay_ns, s.delay_ns, s.seed),
            (0.01, 0.02, 3_000_000, 10_000_000, 4)
        );
        assert_eq!(parse("reorder=0.5").unwrap().reorder_delay_ns, DEFAULT_REORDER_DELAY_NS);
        assert_eq!(parse("duplicate=none,reorder=0").unwrap(), LinkSpec::default());
        assert_eq!(parse("duplicate=100%").unwrap().duplicate, 1.0);
    }

    #[test]
    fn empty_spec_is_a_transparent_link() {
        assert_eq!(parse("").unwrap(), LinkSpec::default());
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "delay=55ms,rate=1gbit,queue=1000p,loss=0.001,seed=9",
            "delay=1us,queue=64kb,loss=ge:0.01,0.3,0.8",
            "",
            "duplicate=0.3%",
            "reorder=0.25,reorder_delay=1.5ms,duplicate=0.001",
            "reorder=0,reorder_delay=2ms",
        ] {
            let a = parse(s).unwrap();
            assert_eq!(parse(&a.to_string()).unwrap(), a, "{a}");
        }
    }

    #[test]
    fn errors_name_the_key_and_the_fix() {
        let e = |s: &str| parse(s).unwrap_err().to_string();
        assert!(e("delay=55").contains("missing unit"), "{}", e("delay=55"));
        assert!(e("rate=fast").contains("expected a number"));
        assert!(e("rate=10furlongs").contains("use bit, kbit, mbit or gbit"));
        assert!(e("queue=10").contains("1000p"));
        assert!(e("loss=1.5").contains("between 0 and 1"));
        assert!(e("loss=ge:0.1,0.2").contains("ge:p,r,h"));
        assert!(e("loss=pareto:1").contains("unknown loss model"));
        assert!(e("jitter=1ms").contains("unknown key"));
        assert!(e("delay=1ms,delay=2ms").contains("twice"));
        assert!(e("55ms").contains("key=value"));
        assert!(e("seed=-1").contains("unsigned"));
        assert!(e("duplicate=2").contains("between 0 and 1"));
        assert!(e("duplicate=often").contains("is not a probability"));
        assert!(e("duplicate=1%,25%").contains("takes one probability; write e.g. duplicate=0.5%"));
        assert!(e("reorder=-0.1").contains("between 0 and 1"));
        assert!(e("reorder=1%,2ms").contains("reorder=1%,reorder_delay=2ms"), "{}", e("reorder=1%,2ms"));
        assert!(e("reorder=1%,reorder_delay=2").contains("missing unit"));
        assert!(e("reorder=1%,reorder_delay=0ms").contains("no extra delay"));
        assert!(e("reorder_delay=2ms").contains("without reorder=P"));
        assert!(e("reorder=1%,reorder=2%").contains("twice"));
        assert!(e("dup=1%").contains("duplicate, reorder, reorder_delay"));
    }

    #[test]
    fn specs_without_the_new_keys_print_as_before() {
        assert_eq!(
            parse("delay=55ms,rate=1gbit,loss=0.001,seed=3").unwrap().to_string(),
            "delay=55000us,rate=1000000000bit,queue=1000p,loss=random:0.001,seed=3"
        );
    }
}
