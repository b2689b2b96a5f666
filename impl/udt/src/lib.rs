//! UDT4 over real UDP sockets.
//!
//! The protocol lives in the sans-IO core [`udt_proto`]; this crate drives it. Every UDP port
//! in use is a *multiplexer*: one I/O thread owns the socket and an
//! [`udt_proto::endpoint::Endpoint`] that demultiplexes the port's connections by socket ID
//! (UDT4.md §3.3). The thread receives and sends in batches (`recvmmsg`/`sendmmsg`, with UDP
//! GRO/GSO where the kernel offers them) and paces data precisely, spinning through waits
//! shorter than ~50 µs rather than sleeping. Application threads use the blocking
//! [`UdtSocket`], shaped after UDT's own API, which only takes the endpoint's lock to copy
//! data in or out.
//!
//! The I/O engine under the multiplexer, [`driver`], is not UDT's: it drives any sans-IO
//! protocol of the family over one UDP socket, or one UDP socket plus a TCP control stream
//! (SABUL, FRTP).
//!
//! ```no_run
//! use udt::UdtSocket;
//! use std::io::Read;
//!
//! let listener = UdtSocket::builder().listen("127.0.0.1:9000")?;
//! std::thread::spawn(|| {
//!     let mut c = UdtSocket::builder().connect("127.0.0.1:9000").unwrap();
//!     c.send_all(b"hello, udt").unwrap();
//!     c.close().unwrap(); // lingers until the peer acknowledged everything
//! });
//! let mut conn = listener.accept()?;
//! let mut text = String::new();
//! conn.read_to_string(&mut text).expect("read");
//! assert_eq!(text, "hello, udt");
//! # Ok::<(), udt::UdtError>(())
//! ```

pub mod driver;
mod error;
mod huge_pages;
mod mux;
mod socket;
mod udp;

pub use error::{Result, UdtError};
pub use huge_pages::{HugePages, HUGE_PAGES_FROM};
pub use mux::MuxOptions;
pub use socket::{resolve_addr, Builder, SocketStats, UdtSocket};
pub use transfer::cc::{CongestionControl, ControllerFactory};
pub use udt_proto::cc;
pub use udt_proto::config::ConnectionConfig;
pub use udt_proto::connection::{BrokenReason, ConnectError};
pub use udt_proto::stats::Stats;
pub use udt_proto::wire::SocketType;
