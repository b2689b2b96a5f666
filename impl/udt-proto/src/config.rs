//! Connection options with UDT 4.11's defaults (UDT4.md §9.1, §13.4).

use std::sync::Arc;

use crate::cc::native::UdtNative;
use crate::wire::SocketType;
use transfer::cc::ControllerFactory;
use transfer::time::Duration;

/// The smallest MSS (IP packet) 4.11's `UDT_MSS` takes: 28 bytes of IP and UDP headers + 48
/// (UDT4.md §13, `UDT_MSS`). A handshake asking for less is rejected.
pub const MIN_MSS: u32 = 76;

/// Per-connection configuration. `Default` gives UDT 4.11's defaults.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// `UDT_MSS`: maximum packet size including IP and UDP headers (default 1500).
    pub mss: u32,
    /// `UDT_FC`: maximum flow window in packets (default 25 600).
    pub flight_flag_size: u32,
    /// `UDT_SNDBUF` in packets (default 8192).
    pub snd_buf_pkts: u32,
    /// `UDT_RCVBUF` in packets (default 8192; never more than `flight_flag_size`).
    pub rcv_buf_pkts: u32,
    /// STREAM or DGRAM (default STREAM); a listener rejects a handshake of the other type.
    pub socket_type: SocketType,
    /// `UDT_LINGER` (default 180 s).
    pub linger: Duration,
    /// `UDT_MAXBW` in bytes/s; `None` = unlimited.
    pub max_bw: Option<u64>,
    /// The congestion controller (UDT4.md §12): 4.11's CUDTCC by default; any
    /// [`ControllerFactory`] (`crate::cc::by_name` knows UDT's by name).
    pub cc: Arc<dyn ControllerFactory>,
    /// Connection setup timeout (3 s; rendezvous uses 30 s).
    pub connect_timeout: Duration,
    /// Rendezvous setup timeout (30 s).
    pub rendezvous_timeout: Duration,
    /// Draft mode (§8.4): also re-send the whole receiver loss list periodically.
    pub periodic_nak: bool,
    /// Largest burst (in packets) the pacer may send back to back to catch up after a late
    /// wake-up. A busy-waiting 4.11 never catches up, one built with `NO_BUSY_WAITING` (Debian's)
    /// catches up without a bound (UDT4.md §7 step 3); a driver that batches system calls needs
    /// a little slack to hold the average rate. 1 = strict pacing.
    pub pacing_burst: u32,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            mss: 1500,
            flight_flag_size: 25_600,
            snd_buf_pkts: 8192,
            rcv_buf_pkts: 8192,
            socket_type: SocketType::Stream,
            linger: Duration::from_secs(180),
            max_bw: None,
            cc: Arc::new(UdtNative::default()),
            connect_timeout: Duration::from_secs(3),
            rendezvous_timeout: Duration::from_secs(30),
            periodic_nak: false,
            pacing_burst: 16,
        }
    }
}

impl ConnectionConfig {
    /// Receive buffer capacity in packets: `min(UDT_RCVBUF, UDT_FC)`, at least 32.
    pub fn rcv_capacity(&self) -> u32 {
        self.rcv_buf_pkts.min(self.flight_flag_size).max(32)
    }

    /// Checks option ranges (§13.4) and says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.mss < MIN_MSS || self.mss > 65_535 {
            return Err(format!(
                "MSS {} out of range: UDT needs 76..=65535 bytes (IP+UDP+UDT headers included)",
                self.mss
            ));
        }
        if self.flight_flag_size < 32 {
            return Err("flow window (UDT_FC) must be at least 32 packets".into());
        }
        if self.snd_buf_pkts < 2 {
            return Err("send buffer must hold at least 2 packets".into());
        }
        Ok(())
    }
}
