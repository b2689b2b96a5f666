use std::thread;
use udt::UdtSocket;
fn main() {
    let n: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(10);
    let listener = UdtSocket::builder().listen("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    eprintln!("listening {addr}");
    let t = thread::spawn(move || {
        let mut c = UdtSocket::builder().connect(addr).unwrap();
        eprintln!("client connected");
        c.send_all(&vec![7u8; n]).unwrap();
        eprintln!("client sent; closing");
        c.close().unwrap();
        eprintln!("client closed {:?}", ());
    });
    let s = listener.accept().unwrap();
    eprintln!("accepted");
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0;
    loop {
        let k = s.recv(&mut buf).unwrap();
        if k == 0 { break }
        total += k;
    }
    eprintln!("server got {total}");
    eprintln!("{:?}", s.stats().unwrap());
    t.join().unwrap();
}
