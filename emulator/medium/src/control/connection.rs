//! One client of the control socket: a non-blocking stream split into request
//! lines, with replies and subscribed events buffered while the peer does not read.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;

use serde_json::{json, Value};

use super::request::{error_reply, EventKind};

/// A request line longer than this closes the connection.
const MAX_LINE: usize = 1 << 20;
/// A subscriber's pending output beyond which further events are dropped.
pub const SUBSCRIBER_BACKLOG: usize = 1 << 20;
/// Replies a client has not read beyond which it is disconnected: one that
/// sends requests and never reads would otherwise grow without bound.
const MAX_UNREAD_REPLIES: usize = 16 << 20;
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
