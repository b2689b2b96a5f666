//! FRTP's wire (FRTP.md §3, §8): the spec's hex examples round-trip byte for byte, and the
//! 52-byte option block is validated, echoed and refused as §2 and §3.3 say.

use std::net::Ipv4Addr;

use frtp::{receiver_config, sender_config, Circuit, Event, Profile, Sender, SessionError};
use sabul::control_stream::{ControlDecoder, Decoded, StreamError};
use sabul::wire::{Control, LossWords, OptionBlock, WireError, CIRCUIT_OPTION_BLOCK_LEN};
use transfer::seq::SeqNo;
use transfer::time::Instant;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

const SPEC_BLOCK: &str = "00 00 1b 59 00 00 1b 58 00 00 05 c0 00 00 05 bc
                          00 00 01 6e 00 00 00 00 02 71 00 00 02 71 00 00
                          00 00 64 00 00 00 00 00 c0 a8 0a 02 00 00 00 00
                          1d cd 65 00";

fn spec_circuit() -> Circuit {
    Circuit { data_ip: Ipv4Addr::new(192, 168, 10, 2), rate_bps: 500_000_000 }
}

fn spec_block() -> OptionBlock {
    OptionBlock { circuit: Some(spec_circuit()), ..OptionBlock::new(7001, 7000, 1472) }
}

fn emitted(o: &OptionBlock) -> Vec<u8> {
    let mut v = Vec::new();
    o.emit(&mut v);
    assert_eq!(v.len(), o.buffer_len());
    v
}

#[test]
fn option_block_matches_spec_8_byte_for_byte() {
    let bytes = hex(SPEC_BLOCK);
    assert_eq!(bytes.len(), CIRCUIT_OPTION_BLOCK_LEN);
    assert_eq!(emitted(&spec_block()), bytes);
    assert_eq!(OptionBlock::parse_as(&bytes, true), Ok(spec_block()));
    // The receiver a user configures for §8's example emits exactly these bytes.
    let now = Instant::from_micros(0);
    let mut r = frtp::Receiver::new(receiver_config(7001, 7000, spec_circuit()), "10.0.0.1:7000".parse().unwrap(), now);
    let mut buf = [0u8; 128];
    let t = r.poll_transmit(now, &mut buf).unwrap();
    assert_eq!(&buf[..t.size], &bytes[..]);
    assert_eq!(spec_circuit().ipt_us(1472), 24.0, "1500 B at 500 Mb/s: 24 µs (§8)");
}

#[test]
fn ack_and_whole_list_err_match_spec_8_byte_for_byte() {
    let ack = Control::Ack(SeqNo::new(0x12345));
    let ranges = [(0x12345, 0x12345), (0x12350, 0x12352)].map(|(a, b)| (SeqNo::new(a), SeqNo::new(b)));
    let err = Control::Err(LossWords::encode(ranges, 366).unwrap());
    for (h, c) in
        [("00 00 00 01 00 01 23 45", ack), ("00 00 00 02 00 00 00 03 00 01 23 45 80 01 23 50 00 01 23 52", err)]
    {
        let bytes = hex(h);
        let mut v = Vec::new();
        c.emit(&mut v);
        assert_eq!(v, bytes);
        assert_eq!(Control::parse(&bytes, 366), Ok(c));
    }
}

#[test]
fn the_frtp_decoders_read_52_byte_blocks_and_sabul_s_do_not() {
    let bytes = hex(SPEC_BLOCK);
    let mut input = &bytes[..];
    let mut d = ControlDecoder::sender_for(&Profile::FRTP);
    assert_eq!(d.decode(&mut input), Ok(Some(Decoded::Options(spec_block()))));
    assert!(input.is_empty());
    let mut input = &bytes[..];
    let mut r = ControlDecoder::receiver_for(&Profile::FRTP);
    assert!(matches!(r.decode(&mut input), Ok(Some(Decoded::Options(_)))));
    // A SABUL block on an FRTP stream is short: the decoder waits for 12 more bytes.
    let mut sabul_block = Vec::new();
    OptionBlock::new(7001, 7000, 1472).emit(&mut sabul_block);
    let mut input = &sabul_block[..];
    let mut d = ControlDecoder::sender_for(&Profile::FRTP);
    assert_eq!(d.decode(&mut input), Ok(None));
    assert_eq!(d.finish(), Err(StreamError::EofMidFrame { have: 40 }));
    assert!(matches!(OptionBlock::parse_as(&bytes[..40], true), Err(WireError::Truncated { need: 52, have: 40 })));
}

#[test]
fn bogus_circuit_words_are_rejected_naming_the_field() {
    let o = spec_block();
    let with = |data_ip: Ipv4Addr, rate_bps: u64| OptionBlock { circuit: Some(Circuit { data_ip, rate_bps }), ..o };
    for (bad, field, value) in [
        (with(Ipv4Addr::new(192, 168, 10, 2), 0), "rate_bps", 0),
        (with(Ipv4Addr::new(224, 0, 0, 1), 500_000_000), "data_ip", 0xe000_0001),
        (with(Ipv4Addr::BROADCAST, 500_000_000), "data_ip", 0xffff_ffff),
    ] {
        let e = OptionBlock::parse_as(&emitted(&bad), true).unwrap_err();
        assert_eq!(e, WireError::BadOption { field, value });
        assert!(e.to_string().contains("FRTP.md §3.3"), "{e}");
    }
    // data_ip 0 means "the control peer" (§2 step 5) and 64-bit rates are carried whole.
    assert!(OptionBlock::parse_as(&emitted(&with(Ipv4Addr::UNSPECIFIED, 1 << 40)), true).is_ok());
    // SABUL's rules still apply to words 0–9.
    let e = OptionBlock::parse_as(&emitted(&OptionBlock { reserved: 1, ..o }), true).unwrap_err();
    assert!(matches!(e, WireError::BadOption { field: "reserved", .. }));
}

#[test]
fn an_echo_that_changes_the_rate_or_the_data_address_is_refused() {
    let o = spec_block();
    assert_eq!(o.check_echo(&o.echo(1472)), Ok(()));
    let faster = OptionBlock { circuit: Some(Circuit { rate_bps: 600_000_000, ..spec_circuit() }), ..o };
    assert_eq!(
        o.check_echo(&faster),
        Err(WireError::EchoMismatch { field: "rate_bps", sent: 500_000_000, echoed: 600_000_000 })
    );
    let moved = OptionBlock { circuit: Some(Circuit { data_ip: Ipv4Addr::new(10, 1, 1, 1), ..spec_circuit() }), ..o };
    assert!(matches!(o.check_echo(&moved), Err(WireError::EchoMismatch { field: "data_ip", .. })));
}

#[test]
fn a_sender_refuses_a_rate_it_cannot_honour_and_echoes_one_it_can() {
    let now = Instant::from_micros(0);
    let peer = "10.0.0.2:40000".parse().unwrap();
    let bytes = hex(SPEC_BLOCK);

    let mut s = Sender::new(sender_config(400_000_000), peer, now);
    s.handle_control(now, &bytes);
    let ev: Vec<_> = std::iter::from_fn(|| s.poll_event()).collect();
    assert_eq!(
        ev,
        [Event::Aborted(SessionError::RateRefused { rate_bps: 500_000_000, max_bps: 400_000_000 })],
        "closes rather than echoes (§2 step 3)"
    );
    assert!(s.poll_transmit(now, &mut [0u8; 128]).is_none(), "no echo");

    let mut s = Sender::new(sender_config(1_000_000_000), peer, now);
    s.handle_control(now, &bytes);
    assert_eq!(s.poll_event(), Some(Event::Connected));
    let mut buf = [0u8; 128];
    let t = s.poll_transmit(now, &mut buf).unwrap();
    assert_eq!(&buf[..t.size], &bytes[..], "the echo is the block unchanged");
    assert_eq!(s.controller().get().pacing_period_us(), 24.0);
    assert_eq!(s.controller().get().name(), "fixed-rate");
}
