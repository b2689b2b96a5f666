use std::sync::Arc;
use std::thread;
use std::time::Duration;
use udt::UdtSocket;
fn drain(s: &UdtSocket) -> usize {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0;
    loop { let k = s.recv(&mut buf).unwrap(); if k == 0 { return total } total += k; }
}
fn main() {
    let n: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(10);
    let listener = UdtSocket::builder().listen("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let t = thread::spawn(move || {
        let c = Arc::new(UdtSocket::builder().connect(addr).unwrap());
        let c2 = c.clone();
        let snd = thread::spawn(move || { c2.send_all(&vec![7u8; n]).unwrap(); eprintln!("client send_all done"); });
        let mon = c.clone();
        thread::spawn(move || loop { thread::sleep(Duration::from_secs(2)); eprintln!("CLIENT {:?}", mon.stats().map(|s| s.core)); });
        let got = drain(&c);
        eprintln!("client got {got}");
        snd.join().unwrap();
    });
    let s = Arc::new(listener.accept().unwrap());
    let s2 = s.clone();
    let snd = thread::spawn(move || { s2.send_all(&vec![8u8; n]).unwrap(); eprintln!("server send_all done"); s2.flush().unwrap(); eprintln!("server flushed"); });
    let mon = s.clone();
    thread::spawn(move || loop { thread::sleep(Duration::from_secs(2)); eprintln!("SERVER {:?}", mon.stats().map(|s| s.core)); });
    let got = drain(&s);
    eprintln!("server got {got}");
    snd.join().unwrap();
    t.join().unwrap();
}
