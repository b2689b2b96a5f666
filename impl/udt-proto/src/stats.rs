//! Per-connection counters and estimates, like UDT 4.11's `perfmon` (`CPerfMon`).

/// A snapshot of a connection's statistics. Counters are totals since the connection opened.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Data packets sent, including retransmissions.
    pub pkts_sent: u64,
    /// Data packets received, including duplicates.
    pub pkts_recv: u64,
    /// Data packets sent again (after a NAK or EXP).
    pub pkts_retrans: u64,
    /// Packets the sender learned were lost (newly added to its loss list by NAK or EXP).
    pub pkts_lost_snd: u64,
    /// Packets the receiver found missing (gaps).
    pub pkts_lost_rcv: u64,
    /// Missing packets that later arrived.
    pub pkts_recovered: u64,
    /// Received data packets dropped as duplicates or outside the window.
    pub pkts_recv_dropped: u64,
    /// Data packets from the peer whose payload was longer than negotiated MSS − 44, dropped
    /// unacknowledged (UDT4.md §8.2 step 0); not counted in `pkts_recv`.
    pub oversize_drops: u64,
    /// Payload bytes sent, including retransmissions.
    pub bytes_sent: u64,
    /// Payload bytes of first transmissions only.
    pub bytes_sent_unique: u64,
    /// Payload bytes received, duplicates included.
    pub bytes_recv: u64,
    /// Payload bytes stored for the application (duplicates excluded).
    pub bytes_recv_unique: u64,
    /// ACKs with an ACK number (full or medium, §5.3), as 4.11 counts them (`pktSentACK`).
    pub acks_sent: u64,
    /// Full and medium ACKs received.
    pub acks_recv: u64,
    /// Light ACKs (one word, every 64 packets, §9.2), which 4.11 does not count.
    pub light_acks_sent: u64,
    /// Light ACKs received.
    pub light_acks_recv: u64,
    /// NAKs sent.
    pub naks_sent: u64,
    /// NAKs received.
    pub naks_recv: u64,
    /// ACK2s sent.
    pub ack2_sent: u64,
    /// ACK2s received.
    pub ack2_recv: u64,
    /// Control packets sent, of every type.
    pub ctrl_sent: u64,
    /// EXP timer expiries with data outstanding, which queued it again (§9.4).
    pub exp_timeouts: u64,
    /// Packets from the peer that could not be parsed or broke a protocol rule.
    pub malformed: u64,
    /// Message drop requests received on a STREAM connection, where they have no meaning
    /// (§5.8) and are ignored.
    pub drop_requests_ignored: u64,
    /// Smoothed RTT (µs).
    pub rtt_us: u32,
    /// RTT variance (µs).
    pub rtt_var_us: u32,
    /// Flow window (packets) last advertised by the peer.
    pub flow_window: u32,
    /// Congestion window (packets).
    pub cwnd: f64,
    /// Inter-packet sending period (µs).
    pub period_us: f64,
    /// Sender's EWMA of the peer's arrival speed (packets/s).
    pub delivery_rate: u32,
    /// Sender's EWMA of the peer's link-capacity estimate (packets/s).
    pub bandwidth: u32,
    /// Packets in the send buffer: unacknowledged or not yet sent.
    pub snd_buffered_pkts: u32,
    /// Sequence numbers on the sender's loss list.
    pub snd_loss_len: u32,
    /// Sequence numbers on the receiver's loss list.
    pub rcv_loss_len: u32,
    /// Free receive-buffer packets (what the next ACK advertises).
    pub rcv_avail: u32,
}
