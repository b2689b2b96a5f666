//! End-to-end behaviour over loopback UDP. No wall-time assertions: every bounded wait only
//! turns a hang into a failure.

use std::net::UdpSocket;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use prng::pattern;
use udt::{SocketType, UdtError, UdtSocket};

/// FNV-1a over 64 bits: enough to tell two byte streams apart.
fn checksum(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

/// Runs `f` on its own thread and fails the test if it has not finished after `secs`.
fn bounded<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs)).expect("test hung (or its thread panicked)")
}

fn recv_exact(s: &UdtSocket, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    let mut at = 0;
    while at < len {
        let n = s.recv(&mut out[at..]).expect("recv");
        assert!(n > 0, "EOF after {at} of {len} bytes");
        at += n;
    }
    out
}

fn recv_to_eof(s: &UdtSocket) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = s.recv(&mut buf).expect("recv");
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// Each side sends its data on one thread while reading the other side's on another, then
/// closes; both directions must arrive byte-exact.
#[test]
fn stream_transfers_megabytes_both_directions() {
    bounded(120, || {
        let listener = UdtSocket::builder().listen("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let up = pattern(5 << 20, 1);
        let down = pattern((3 << 20) | 77, 2);
        let (up_sum, down_sum) = (checksum(&up), checksum(&down));
        let (up_len, down_len) = (up.len(), down.len());

        let exchange = move |s: UdtSocket, out: Vec<u8>, in_len: usize| {
            let s = Arc::new(s);
            let s2 = s.clone();
            let sender = thread::spawn(move || {
                s2.send_all(&out).unwrap();
                s2.flush().unwrap();
            });
            let got = recv_exact(&s, in_len);
            sender.join().unwrap();
            let mut s = Arc::try_unwrap(s).unwrap();
            s.close().unwrap();
            got
        };
        let client = thread::spawn(move || exchange(UdtSocket::builder().connect(addr).unwrap(), up, down_len));
        let server = exchange(listener.accept().unwrap(), down, up_len);
        let client = client.join().unwrap();
        assert_eq!(checksum(&server), up_sum);
        assert_eq!(checksum(&client), down_sum);
    });
}

#[test]
fn peer_close_is_eof_after_all_data() {
    bounded(60, || {
        let listener = UdtSocket::builder().listen("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let data = pattern(2_000_003, 3);
        let sum = checksum(&data);
        let client = thread::spawn(move || {
            let mut c = UdtSocket::builder().connect(addr).unwrap();
            c.send_all(&data).unwrap();
            c.close().unwrap();
        });
        let s = listener.accept().unwrap();
        let got = recv_to_eof(&s);
        client.join().unwrap();
        assert_eq!(got.len(), 2_000_003);
        assert_eq!(checksum(&got), sum);
        // EOF is sticky.
        assert_eq!(s.recv(&mut [0u8; 16]).unwrap(), 0);
    });
}

/// `close` returns only once the peer acknowledged everything: after it returned, the data
/// is all in the peer's buffer although the peer has not read a byte yet.
#[test]
fn close_waits_for_acknowledgement() {
    bounded(60, || {
        let listener = UdtSocket::builder().listen("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let data = pattern(3 << 20, 4);
        let sum = checksum(&data);
        let (closed_tx, closed_rx) = mpsc::channel();
        let client = thread::spawn(move || {
            let mut c = UdtSocket::builder().connect(addr).unwrap();
            c.send_all(&data).unwrap();
            let before = c.send_buffered_packets().unwrap();
            c.close().unwrap();
            closed_tx.send(before).unwrap();
        });
        let s = listener.accept().unwrap();
        // Do not read until the client's close() has returned.
        closed_rx.recv().unwrap();
        client.join().unwrap();
        let stats = s.stats().unwrap();
        assert_eq!(stats.core.bytes_recv_unique, 3 << 20, "close returned before the peer had everything");
        let got = recv_to_eof(&s);
        assert_eq!(checksum(&got), sum);
    });
}

#[test]
fn dgram_messages_arrive_whole_and_in_order() {
    bounded(60, || {
        let b = UdtSocket::builder().socket_type(SocketType::Dgram);
        let listener = b.listen("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let sizes: Vec<usize> = (0..400).map(|i| [1, 1455, 1456, 1457, 5000, 20_000, 65_536, 3][i % 8] + i).collect();
        let msgs: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| pattern(n, i as u64 + 10)).collect();
        let expect = msgs.clone();
        let client = thread::spawn(move || {
            let mut c = b.connect(addr).unwrap();
            for m in &msgs {
                c.sendmsg(m).unwrap();
            }
            assert!(matches!(c.send(b"x"), Err(UdtError::InvalidState(_))));
            c.close().unwrap();
        });
        let s = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 20];
        let mut got = Vec::new();
        while let Some(n) = s.recvmsg(&mut buf).unwrap() {
            got.push(buf[..n].to_vec());
        }
        client.join().unwrap();
        assert_eq!(got.len(), expect.len());
        for (i, (g, e)) in got.iter().zip(&expect).enumerate() {
            assert_eq!(g.len(), e.len(), "message {i} length");
            assert!(g == e, "message {i} content");
        }
    });
}

fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn rendezvous_peers_connect_and_exchange() {
    bounded(60, || {
        let (pa, pb) = (free_port(), free_port());
        let a_addr = format!("127.0.0.1:{pa}");
        let b_addr = format!("127.0.0.1:{pb}");
        let rv = UdtSocket::builder().rendezvous(true);
        let mut a = rv.bind(a_addr.as_str()).unwrap();
        let mut b = rv.bind(b_addr.as_str()).unwrap();
        let data = pattern(1 << 20, 5);
        let sum = checksum(&data);
        let ta = thread::spawn(move || {
            a.connect(b_addr.as_str()).unwrap();
            a.send_all(&data).unwrap();
            a.close().unwrap();
        });
        b.connect(a_addr.as_str()).unwrap();
        assert_eq!(b.peer_addr().unwrap().port(), pa);
        let got = recv_to_eof(&b);
        ta.join().unwrap();
        assert_eq!(checksum(&got), sum);
    });
}

#[test]
fn eight_connections_share_one_listener_port() {
    bounded(120, || {
        let listener = UdtSocket::builder().listen("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let clients: Vec<_> = (0..8u64)
            .map(|i| {
                thread::spawn(move || {
                    let mut c = UdtSocket::builder().connect(addr).unwrap();
                    // The first 8 bytes say who we are.
                    let mut data = i.to_be_bytes().to_vec();
                    data.extend(pattern(1 << 20, 100 + i));
                    c.send_all(&data).unwrap();
                    c.close().unwrap();
                })
            })
            .collect();
        let servers: Vec<_> = (0..8)
            .map(|_| {
                let s = listener.accept().unwrap();
                assert_eq!(s.local_addr().unwrap(), addr, "accepted socket must share the listener's port");
                thread::spawn(move || recv_to_eof(&s))
            })
            .collect();
        let mut seen = Vec::new();
        for s in servers {
            let got = s.join().unwrap();
            let who = u64::from_be_bytes(got[..8].try_into().unwrap());
            assert_eq!(got.len(), 8 + (1 << 20));
            assert_eq!(checksum(&got[8..]), checksum(&pattern(1 << 20, 100 + who)));
            seen.push(who);
        }
        for c in clients {
            c.join().unwrap();
        }
        seen.sort();
        assert_eq!(seen, (0..8).collect::<Vec<_>>());
    });
}

#[test]
fn connecting_to_a_closed_port_times_out() {
    let port = free_port();
    let err = bounded(30, move || UdtSocket::builder().connect(("127.0.0.1", port)).unwrap_err());
    assert!(matches!(err, UdtError::ConnectTimedOut { .. }), "{err}");
    assert!(err.to_string().contains("timed out"));
}

#[test]
fn bad_addresses_are_reported() {
    let err = UdtSocket::builder().connect("not an address").unwrap_err();
    assert!(matches!(err, UdtError::BadAddress { .. }), "{err}");
    assert!(err.to_string().contains("not an address"), "{err}");
    let err = UdtSocket::builder().connect("127.0.0.1:0").unwrap_err();
    assert!(matches!(err, UdtError::BadAddress { .. }), "{err}");
}

#[test]
fn io_traits_and_sendfile_roundtrip() {
    use std::io::{Read, Write};
    bounded(60, || {
        let dir = std::env::temp_dir().join(format!("udt-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("src.bin");
        let dst = dir.join("dst.bin");
        let data = pattern(1_500_000, 6);
        std::fs::write(&src, &data).unwrap();
        let listener = UdtSocket::builder().listen("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let src2 = src.clone();
        let client = thread::spawn(move || {
            let mut c = UdtSocket::builder().connect(addr).unwrap();
            c.write_all(b"HDR!").unwrap();
            let f = std::fs::File::open(&src2).unwrap();
            assert_eq!(c.sendfile(&f, 1000, 1_000_000).unwrap(), 1_000_000);
            c.close().unwrap();
        });
        let mut s = listener.accept().unwrap();
        let mut hdr = [0u8; 4];
        s.read_exact(&mut hdr).unwrap();
        assert_eq!(&hdr, b"HDR!");
        let out = std::fs::File::create(&dst).unwrap();
        assert_eq!(s.recvfile(&out, 0, 2_000_000).unwrap(), 1_000_000);
        client.join().unwrap();
        assert!(std::fs::read(&dst).unwrap() == data[1000..1_001_000]);
        let _ = std::fs::remove_dir_all(&dir);
    });
}
