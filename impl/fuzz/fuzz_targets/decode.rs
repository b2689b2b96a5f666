//! The packet decoder must never panic, and whatever it accepts must re-emit to a datagram
//! that parses to the same representation (UDT4.md §2–5).
#![no_main]
use libfuzzer_sys::fuzz_target;
use udt_proto::wire::{Control, Repr};

fuzz_target!(|data: &[u8]| {
    let Ok(repr) = Repr::parse_bytes(data) else { return };
    if let Repr::Control { control: Control::Nak(list), .. } = repr {
        let _ = list.ranges();
    }
    let bytes = repr.to_vec();
    let again = Repr::parse_bytes(&bytes).expect("re-emitted packet parses");
    assert_eq!(again.to_vec(), bytes, "emit is stable");
});
