//! The SABUL control-stream decoder (SABUL.md §3.2, §3.4) must never panic on any bytes cut
//! into any chunks, must buffer at most one frame, and every frame it accepts must re-emit to
//! the bytes it came from.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sabul::control_stream::{ControlDecoder, Decoded};

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, bytes)) = data.split_first() else { return };
    let mut d = ControlDecoder::sender();
    let mut out = Vec::new();
    'feed: for mut c in bytes.chunks(usize::from(chunk).max(1)) {
        loop {
            match d.decode(&mut c) {
                Ok(Some(Decoded::Options(o))) => o.emit(&mut out),
                Ok(Some(Decoded::Frame(f))) => f.emit(&mut out),
                Ok(None) => break,
                Err(_) => break 'feed,
            }
        }
    }
    assert_eq!(&out[..], &bytes[..out.len()], "emit reproduces the accepted prefix");
    let _ = d.finish();
});
