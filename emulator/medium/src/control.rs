//! The control socket (emulator/README.md section 6): requests, and the
//! non-blocking line-oriented connections the event loop serves.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use meshemu_model::MacAddr;
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// One request line.
#[derive(Debug, Clone, PartialEq, Deserialize)]
// Variants without fields are written `V {}` so that unknown fields are refused.
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    Status {},
    Stats {
        #[serde(default)]
        node: Option<String>,
        /// With false, the counters alone: a whole large lab's peer tables
        /// cost the event loop milliseconds to serialise.
        #[serde(default = "yes")]
        peers: bool,
    },
    Positions {},
    Links {},
    Move {
        node: String,
        position: [f64; 3],
    },
    SetRadio {
        node: String,
        radio: Map<String, Value>,
    },
    /// Drop the frames `node` holds for the receiver `to` (a MAC address,
    /// as a daemon in the node knows its neighbours).
    Flush {
        node: String,
        to: MacAddr,
    },
    SetLink {
        a: String,
        b: String,
        #[serde(default)]
        bit_error_rate: Option<f64>,
        #[serde(default)]
        extra_loss_db: f64,
    },
    Mobility {
        #[serde(default)]
        node: Option<String>,
        run: bool,
    },
    Capture {
        #[serde(default)]
        path: Option<PathBuf>,
        run: bool,
    },
    Lateness {},
    Subscribe {
        events: Vec<EventKind>,
    },
    Shutdown {},
}

fn yes() -> bool {
    true
}

/// What a subscriber can ask to be told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A frame left a node's MAC successfully.
    Tx,
    /// A frame was delivered to a node.
    Rx,
    /// A frame was dropped (retry limit or full queue).
    Drop,
    /// A node was moved through the control socket.
    Move,
}

pub fn parse_request(line: &[u8]) -> Result<Request, String> {
    let text = std::str::from_utf8(line).map_err(|_| "request is not UTF-8".to_string())?;
    let value: Value = serde_json::from_str(text).map_err(|e| format!("request is not JSON: {e}"))?;
    if !value.is_object() {
        return Err("request must be a JSON object with an \"op\"".into());
    }
    serde_json::from_value(value).map_err(|e| format!("bad request: {e}"))
}

pub fn error_reply(message: impl Into<String>) -> Value {
    json!({"ok": false, "error": message.into()})
}

/// A request line longer than this closes the connection.
const MAX_LINE: usize = 1 << 20;
/// A subscriber's pending output beyond which further events are dropped.
pub const SUBSCRIBER_BACKLOG: usize = 1 << 20;
/// Replies a client has not read beyond which it is disconnected: one that
/// sends requests and never reads would otherwise grow without bound.
const MAX_UNREAD_REPLIES: usize = 16 << 20;
/// Connections served at once; more are told so and closed (the runner, the
/// CLI and daemons' flush requests need a handful).
pub const MAX_CLIENTS: usize = 256;
/// Requests read ahead of their answers (checked between reads of 8 KiB);
/// the rest wait in the socket.
const MAX_QUEUED_REQUESTS: usize = 1024;

/// One client connection: input split into lines, output buffered while the
/// peer does not read.
pub struct Connection {
    stream: UnixStream,
    input: Vec<u8>,
    /// Complete request lines not answered yet, oldest first.
    requests: VecDeque<Vec<u8>>,
    /// The peer sends nothing more; what it sent is still answered.
    finished: bool,
    /// The socket may hold input not read yet: a readiness event said so
    /// (edge-triggered: it will not say so again), or reading stopped at
    /// the read-ahead limit.
    readable: bool,
    output: Vec<u8>,
    pub subscription: Option<Subscription>,
    /// The connection broke or must end; drop it.
    pub closed: bool,
}

#[derive(Debug, Default)]
pub struct Subscription {
    pub events: Vec<EventKind>,
    /// Events not queued because the subscriber was too slow, not yet reported.
    pub dropped: u64,
    pub dropped_total: u64,
}

/// Whether the peer of `stream` runs as root.
pub fn peer_is_root(stream: &UnixStream) -> io::Result<bool> {
    Ok(getsockopt(&stream.as_fd(), PeerCredentials)?.uid() == 0)
}

impl Connection {
    pub fn new(stream: UnixStream) -> io::Result<Self> {
        stream.set_nonblocking(true)?;
        Ok(Connection {
            stream,
            input: Vec::new(),
            requests: VecDeque::new(),
            finished: false,
            readable: true,
            output: Vec::new(),
            subscription: None,
            closed: false,
        })
    }

    pub fn stream(&self) -> &UnixStream {
        &self.stream
    }

    /// The oldest request not answered yet, after reading what the peer
    /// sent (at most [`MAX_QUEUED_REQUESTS`] lines are read ahead; the rest
    /// waits in the socket, so a client that floods it is served one
    /// request at a time while the lab runs).
    pub fn next_request(&mut self) -> Option<Vec<u8>> {
        self.receive();
        self.requests.pop_front()
    }

    /// A readiness event came: there may be input to read.
    pub fn mark_readable(&mut self) {
        self.readable = true;
    }

    /// Whether requests wait for an answer (queued, or maybe in the socket).
    pub fn has_requests(&self) -> bool {
        !self.requests.is_empty() || (self.readable && !self.finished && !self.closed)
    }

    /// Whether the connection is over: broken, or the peer finished and
    /// everything it asked is answered and written.
    pub fn is_over(&self) -> bool {
        self.closed || (self.finished && self.requests.is_empty() && self.output.is_empty())
    }

    /// Reads what is available, up to the read-ahead limit, into complete lines.
    fn receive(&mut self) {
        if !self.readable || self.finished || self.closed {
            return;
        }
        let mut buf = [0u8; 8192];
        while self.requests.len() < MAX_QUEUED_REQUESTS {
            match self.stream.read(&mut buf) {
                Ok(0) => {
                    self.finished = true;
                    break;
                }
                Ok(n) => {
                    self.input.extend_from_slice(&buf[..n]);
                    self.split_lines();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.readable = false;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.closed = true;
                    break;
                }
            }
        }
        if self.input.len() > MAX_LINE {
            self.queue(&error_reply(format!("request line longer than {MAX_LINE} bytes")));
            self.input.clear();
            self.requests.clear();
            self.finished = true;
        }
    }

    fn split_lines(&mut self) {
        let mut start = 0;
        while let Some(end) = self.input[start..].iter().position(|&b| b == b'\n') {
            let line = self.input[start..start + end].trim_ascii();
            if !line.is_empty() {
                self.requests.push_back(line.to_vec());
            }
            start += end + 1;
        }
        self.input.drain(..start);
    }

    /// Queues one JSON line; a client that leaves too much unread is
    /// disconnected instead.
    pub fn queue(&mut self, value: &Value) {
        if self.output.len() > MAX_UNREAD_REPLIES {
            self.output.clear();
            self.closed = true;
            return;
        }
        serde_json::to_writer(&mut self.output, value).expect("JSON values serialize");
        self.output.push(b'\n');
    }

    /// Queues an event line for a subscriber unless it is too far behind; the
    /// line is pre-serialized (with its newline) once for all subscribers.
    pub fn queue_event(&mut self, line: &[u8]) {
        let backlog = self.output.len();
        let Some(sub) = self.subscription.as_mut() else { return };
        if backlog + line.len() > SUBSCRIBER_BACKLOG {
            sub.dropped += 1;
            sub.dropped_total += 1;
            return;
        }
        if sub.dropped > 0 {
            let notice = json!({"event": "dropped", "count": sub.dropped});
            sub.dropped = 0;
            self.queue(&notice);
        }
        self.output.extend_from_slice(line);
    }

    pub fn has_output(&self) -> bool {
        !self.output.is_empty()
    }

    /// Writes as much queued output as the socket takes now.
    pub fn flush(&mut self) {
        while !self.output.is_empty() {
            match self.stream.write(&self.output) {
                Ok(0) => {
                    self.closed = true;
                    break;
                }
                Ok(n) => {
                    self.output.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.closed = true;
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Request, String> {
        parse_request(text.as_bytes())
    }

    #[test]
    fn requests_parse() {
        assert_eq!(parse(r#"{"op": "status"}"#), Ok(Request::Status {}));
        assert_eq!(parse(r#"{"op": "stats"}"#), Ok(Request::Stats { node: None, peers: true }));
        assert_eq!(
            parse(r#"{"op": "stats", "node": "n1"}"#),
            Ok(Request::Stats { node: Some("n1".into()), peers: true })
        );
        assert_eq!(parse(r#"{"op": "stats", "peers": false}"#), Ok(Request::Stats { node: None, peers: false }));
        assert_eq!(
            parse(r#"{"op": "flush", "node": "n1", "to": "02:00:00:00:00:0a"}"#),
            Ok(Request::Flush { node: "n1".into(), to: MacAddr([2, 0, 0, 0, 0, 10]) })
        );
        assert_eq!(
            parse(r#"{"op": "move", "node": "n1", "position": [1, 2.5, 0]}"#),
            Ok(Request::Move { node: "n1".into(), position: [1.0, 2.5, 0.0] })
        );
        assert_eq!(
            parse(r#"{"op": "set_link", "a": "n1", "b": "n2", "extra_loss_db": 20}"#),
            Ok(Request::SetLink { a: "n1".into(), b: "n2".into(), bit_error_rate: None, extra_loss_db: 20.0 })
        );
        assert_eq!(
            parse(r#"{"op": "mobility", "node": null, "run": false}"#),
            Ok(Request::Mobility { node: None, run: false })
        );
        assert_eq!(
            parse(r#"{"op": "subscribe", "events": ["rx", "drop"]}"#),
            Ok(Request::Subscribe { events: vec![EventKind::Rx, EventKind::Drop] })
        );
        let Ok(Request::SetRadio { radio, .. }) = parse(r#"{"op": "set_radio", "node": "n0", "radio": {"cw_min": 15}}"#)
        else {
            panic!("set_radio")
        };
        assert_eq!(radio["cw_min"], 15);
    }

    #[test]
    fn malformed_requests_are_explained() {
        let err = |text: &str| parse(text).unwrap_err();
        assert!(err("status").starts_with("request is not JSON"));
        assert!(err("[1]").contains("JSON object"));
        assert!(err("{}").contains("missing field `op`"), "{}", err("{}"));
        assert!(err(r#"{"op": "dance"}"#).contains("unknown variant `dance`"));
        assert!(err(r#"{"op": "flush", "node": "n1", "to": "n2"}"#).contains("not a MAC address"));
        assert!(err(r#"{"op": "move", "node": "n1"}"#).contains("missing field `position`"));
        assert!(err(r#"{"op": "move", "node": "n1", "position": [1, 2]}"#).contains("invalid length 2"));
        assert!(err(r#"{"op": "status", "verbose": true}"#).contains("unknown field `verbose`"));
        assert!(err(r#"{"op": "subscribe", "events": ["everything"]}"#).contains("unknown variant `everything`"));
        assert!(parse_request(&[0xff, 0xfe]).unwrap_err().contains("UTF-8"));
    }

    #[test]
    fn a_slow_subscriber_loses_events_and_is_told_how_many() {
        let (ours, _theirs) = UnixStream::pair().unwrap();
        let mut c = Connection::new(ours).unwrap();
        c.subscription = Some(Subscription { events: vec![EventKind::Rx], ..Default::default() });
        let line = vec![b'x'; 1000];
        let fit = SUBSCRIBER_BACKLOG / line.len();
        for _ in 0..fit + 10 {
            c.queue_event(&line);
        }
        assert_eq!(c.output.len(), fit * line.len());
        assert_eq!(c.subscription.as_ref().unwrap().dropped, 10);
        c.output.clear(); // as if the peer had read everything
        c.queue_event(b"y\n");
        let text = String::from_utf8(c.output.clone()).unwrap();
        let (notice, rest) = text.split_once('\n').unwrap();
        assert_eq!(serde_json::from_str::<Value>(notice).unwrap(), json!({"event": "dropped", "count": 10}));
        assert_eq!(rest, "y\n");
        assert_eq!(c.subscription.as_ref().unwrap().dropped_total, 10);
    }

    #[test]
    fn lines_are_split_and_blank_lines_skipped() {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let mut c = Connection::new(ours).unwrap();
        theirs.write_all(b"{\"op\":\"status\"}\n\n  \n{\"op\":").unwrap();
        assert_eq!(c.next_request(), Some(b"{\"op\":\"status\"}".to_vec()));
        assert_eq!(c.next_request(), None);
        theirs.write_all(b"\"links\"}\n").unwrap();
        assert_eq!(c.next_request(), None, "nothing is read without a readiness event");
        c.mark_readable();
        assert_eq!(c.next_request(), Some(b"{\"op\":\"links\"}".to_vec()));
        drop(theirs);
        c.mark_readable();
        assert_eq!(c.next_request(), None);
        assert!(c.is_over() && !c.closed);
    }

    #[test]
    fn a_flood_is_read_ahead_only_so_far_and_answered_to_the_end() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let mut c = Connection::new(ours).unwrap();
        let writer = std::thread::spawn(move || {
            let mut theirs = theirs;
            for _ in 0..3000 {
                theirs.write_all(b"{\"op\":\"status\"}\n").unwrap();
            }
        });
        let mut answered = 0;
        while answered < 3000 {
            if !c.has_requests() {
                c.mark_readable(); // as a readiness event does
            }
            if c.next_request().is_some() {
                answered += 1;
                // The limit is checked between reads: one read (8 KiB, lines of 2 bytes at least) past it at most.
                assert!(c.requests.len() < MAX_QUEUED_REQUESTS + 4096, "{}", c.requests.len());
            }
        }
        writer.join().unwrap();
        c.mark_readable();
        assert_eq!(c.next_request(), None);
        assert!(c.is_over());
    }
}
