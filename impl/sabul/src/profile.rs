//! What a protocol of SABUL's family sets on the shared role machinery: SABUL itself
//! (`docs/spec/SABUL.md`) and FRTP, SABUL modified for dedicated circuits
//! (`docs/spec/FRTP.md` §7 lists the differences).
//!
//! [`crate::Sender`] and [`crate::Receiver`] are one implementation of the option exchange,
//! the paced DATA, the loss lists, ACK/ERR, EXP and the teardown; a [`Profile`] chooses the
//! option-block layout, which receiver timers run with which periods, the periodic ERR
//! policy and when a full buffer is acknowledged. The rate comes from the option block when
//! it names one (FRTP: the core's `FixedRate`), else from the sender's controller factory
//! (SABUL: `SabulRate`).

use transfer::cc::SYN;
use transfer::time::Duration;

/// How the receiver's ERR timer reports losses again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrPolicy {
    /// Each gap again after k·RTT, k = 2, 3, …, checked every `period` (SABUL.md §6).
    Rereport {
        /// How often the timer looks for gaps due again.
        period: Duration,
    },
    /// The whole loss list every `period`, in as many ERRs of at most `max_loss_length`
    /// words as it needs (FRTP.md §5).
    WholeList {
        /// How often the whole list goes out.
        period: Duration,
    },
}

impl ErrPolicy {
    /// How often the receiver's ERR timer fires.
    pub fn period(self) -> Duration {
        match self {
            ErrPolicy::Rereport { period } | ErrPolicy::WholeList { period } => period,
        }
    }
}

/// The settings that tell SABUL and FRTP apart on the shared roles. See the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Profile {
    /// The option block carries FRTP's words 10–12, the data-path address and the rate
    /// (FRTP.md §3.3): 52 bytes instead of 40.
    pub circuit: bool,
    /// The receiver's ACK timer (SABUL.md §6: 10 ms; FRTP.md §5: 100 ms).
    pub ack_period: Duration,
    /// How the receiver's ERR timer reports losses again: SABUL's k·RTT re-reports or FRTP's
    /// whole list.
    pub err: ErrPolicy,
    /// The receiver's SYN timer; `None`: the receiver never sends a SYN and the sender
    /// ignores one (FRTP.md §3.2).
    pub syn_period: Option<Duration>,
    /// A packet the resequencing buffer has no slot for is acknowledged at once, like one
    /// beyond the window (FRTP.md §5 "buffer full"); SABUL only drops it.
    pub ack_when_full: bool,
    /// DATA is taken from any source (FRTP.md §2 step 6: the circuit is dedicated); SABUL
    /// takes it from the control peer's IP only (SABUL.md §2 step 7).
    pub data_from_any_source: bool,
}

impl Profile {
    /// SABUL (SABUL.md §6, §9).
    pub const SABUL: Profile = Profile {
        circuit: false,
        ack_period: SYN,
        err: ErrPolicy::Rereport { period: Duration::from_millis(20) },
        syn_period: Some(SYN),
        ack_when_full: false,
        data_from_any_source: false,
    };

    /// FRTP (FRTP.md §3–§5, §7).
    pub const FRTP: Profile = Profile {
        circuit: true,
        ack_period: Duration::from_millis(100),
        err: ErrPolicy::WholeList { period: Duration::from_millis(20) },
        syn_period: None,
        ack_when_full: true,
        data_from_any_source: true,
    };
}

impl Default for Profile {
    fn default() -> Profile {
        Profile::SABUL
    }
}
