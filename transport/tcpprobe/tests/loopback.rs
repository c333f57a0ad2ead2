//! Samples a real TCP connection over loopback (no root needed).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use meshemu_tcpprobe::{diag::Diag, sample, uses_port};

#[test]
fn samples_a_loopback_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut client = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (mut server, _) = listener.accept().unwrap();
    let data = vec![7u8; 200_000];
    client.write_all(&data).unwrap();
    let mut received = vec![0u8; data.len()];
    server.read_exact(&mut received).unwrap();

    let sockets = Diag::open().unwrap().dump().unwrap();
    let ours: Vec<_> = sockets.iter().filter(|s| uses_port(s, port)).collect();
    // The listener, and both ends of the connection.
    assert!(ours.len() >= 3, "found {} sockets on port {port}", ours.len());
    let sender = ours
        .iter()
        .filter_map(|s| sample(42, s))
        .find(|s| s.dport == port)
        .expect("the client's socket with its tcp_info");
    assert_eq!(sender.time_ns, 42);
    assert_eq!(sender.bytes_acked, 200_000 + 1, "bytes_acked counts the SYN too");
    assert!(sender.bytes_sent >= 200_000);
    assert!(sender.srtt_us > 0 && sender.rto_us >= 200_000, "{sender:?}");
    assert!(sender.cwnd >= 10 && sender.mss > 0);
    assert!(sender.congestion.is_some());
    let receiver = ours.iter().filter_map(|s| sample(0, s)).find(|s| s.sport == port && s.state != 10).unwrap();
    assert_eq!(receiver.bytes_received, 200_000, "bytes_received counts data only");
}
