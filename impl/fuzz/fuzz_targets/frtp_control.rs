//! FRTP's control stream (FRTP.md §3.2, §3.3): the sender's decoder reads the 52-byte option
//! block, then frames; the receiver's the echo, then nothing. Neither may panic on any bytes
//! cut into any chunks, and every block or frame accepted must re-emit to the bytes it came
//! from (the circuit words included).
#![no_main]
use libfuzzer_sys::fuzz_target;
use sabul::control_stream::{ControlDecoder, Decoded};
use sabul::Profile;

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, bytes)) = data.split_first() else { return };
    let mut d = if chunk & 0x80 == 0 {
        ControlDecoder::sender_for(&Profile::FRTP)
    } else {
        ControlDecoder::receiver_for(&Profile::FRTP)
    };
    let mut out = Vec::new();
    'feed: for mut c in bytes.chunks(usize::from(chunk & 0x7f).max(1)) {
        loop {
            match d.decode(&mut c) {
                Ok(Some(Decoded::Options(o))) => {
                    assert!(o.circuit.is_some(), "an FRTP block has the circuit words");
                    o.emit(&mut out)
                }
                Ok(Some(Decoded::Frame(f))) => f.emit(&mut out),
                Ok(None) => break,
                Err(_) => break 'feed,
            }
        }
    }
    assert_eq!(&out[..], &bytes[..out.len()], "emit reproduces the accepted prefix");
    let _ = d.finish();
});
