//! The control socket itself: the listener (root peers only, at most
//! [`MAX_CLIENTS`] at once) and its clients, served without blocking from the
//! event loop. Each client is known by its epoll token.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

use anyhow::Context;
use nix::sys::epoll::{Epoll, EpollEvent, EpollFlags};
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use serde_json::Value;

use super::connection::{Connection, Subscription};
use super::request::{error_reply, parse_request, EventKind, Request};
use crate::files::RemoveOnDrop;

/// Connections served at once; more are told so and closed (the runner, the
/// CLI and daemons' flush requests need a handful).
pub const MAX_CLIENTS: usize = 256;

/// The listening socket and the connected clients. Field order is teardown
/// order: the socket's name goes first.
pub struct ControlServer {
    _socket_file: RemoveOnDrop,
    listener: UnixListener,
    /// Clients by epoll token.
    clients: HashMap<u64, Connection>,
    next_token: u64,
    /// Which event kinds any subscriber wants (index: [`event_index`]).
    wanted: [bool; 4],
}

fn event_index(kind: EventKind) -> usize {
    match kind {
        EventKind::Tx => 0,
        EventKind::Rx => 1,
        EventKind::Drop => 2,
        EventKind::Move => 3,
    }
}

/// Whether the peer of `stream` runs as root.
fn peer_is_root(stream: &UnixStream) -> io::Result<bool> {
    Ok(getsockopt(&stream.as_fd(), PeerCredentials)?.uid() == 0)
}

impl ControlServer {
    /// Listens at `path` (mode 0600, replacing what a killed medium left
    /// there); clients get the epoll tokens from `first_token` up.
    pub fn bind(path: &Path, first_token: u64) -> anyhow::Result<Self> {
        let _ = fs::remove_file(path); // left by a medium that was killed
        let listener =
            UnixListener::bind(path).with_context(|| format!("creating the control socket {}", path.display()))?;
        let socket_file = RemoveOnDrop(path.to_owned());
        fs::set_permissions(path, fs::Permissions::from_mode(0o600))
            .with_context(|| format!("chmod {}", path.display()))?;
        listener.set_nonblocking(true)?;
        Ok(ControlServer {
            _socket_file: socket_file,
            listener,
            clients: HashMap::new(),
            next_token: first_token,
            wanted: [false; 4],
        })
    }

    pub fn listener(&self) -> &UnixListener {
        &self.listener
    }

    /// Accepts every waiting connection: a root peer is added to `epoll`
    /// under its token, any other is told why it is refused and closed.
    pub fn accept(&mut self, epoll: &Epoll) {
        loop {
            let stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    eprintln!("meshemu-medium: accepting a control connection: {e}");
                    return;
                }
            };
            let refusal = match peer_is_root(&stream) {
                Ok(true) if self.clients.len() >= MAX_CLIENTS => {
                    Some(format!("{MAX_CLIENTS} control connections are open, the most served at once"))
                }
                Ok(true) => None,
                Ok(false) | Err(_) => Some("the control socket serves root only".to_owned()),
            };
            if let Some(reason) = refusal {
                if let Ok(mut refused) = Connection::new(stream) {
                    refused.queue(&error_reply(reason));
                    refused.flush();
                }
                continue;
            }
            let Ok(connection) = Connection::new(stream) else {
                continue;
            };
            let token = self.next_token;
            self.next_token += 1;
            let interest = EpollFlags::EPOLLIN | EpollFlags::EPOLLOUT | EpollFlags::EPOLLRDHUP | EpollFlags::EPOLLET;
            if let Err(e) = epoll.add(connection.stream(), EpollEvent::new(interest, token)) {
                eprintln!("meshemu-medium: control connection: {e}");
                continue;
            }
            self.clients.insert(token, connection);
        }
    }

    /// A readiness event came for `client`.
    pub fn mark_readable(&mut self, client: u64) {
        if let Some(connection) = self.clients.get_mut(&client) {
            connection.mark_readable();
        }
    }

    /// The oldest request of `client` not answered yet (or why its line is
    /// not a request); `None` when it has sent none.
    pub fn next_request(&mut self, client: u64) -> Option<Result<Request, String>> {
        let line = self.clients.get_mut(&client)?.next_request()?;
        Some(parse_request(&line))
    }

    /// Queues the reply to a request of `client` and writes what it takes.
    pub fn reply(&mut self, client: u64, reply: &Value, epoll: &Epoll) {
        if let Some(connection) = self.clients.get_mut(&client) {
            connection.queue(reply);
        }
        self.flush_client(client, epoll);
    }

    /// Whether any client has requests waiting for an answer.
    pub fn has_requests(&self) -> bool {
        self.clients.values().any(Connection::has_requests)
    }

    /// The clients with requests waiting for an answer.
    pub fn clients_with_requests(&self) -> Vec<u64> {
        self.clients.iter().filter(|(_, c)| c.has_requests()).map(|(&token, _)| token).collect()
    }

    /// Writes what every client has queued, and drops the clients that are over.
    pub fn flush(&mut self, epoll: &Epoll) {
        let tokens: Vec<u64> =
            self.clients.iter().filter(|(_, c)| c.has_output() || c.is_over()).map(|(&token, _)| token).collect();
        for token in tokens {
            self.flush_client(token, epoll);
        }
    }

    /// Writes what `client` has queued; drops it if it is over.
    pub fn flush_client(&mut self, client: u64, epoll: &Epoll) {
        let Some(connection) = self.clients.get_mut(&client) else {
            return;
        };
        connection.flush();
        if connection.is_over() {
            let connection = self.clients.remove(&client).expect("present");
            let _ = epoll.delete(connection.stream());
            self.update_wanted();
        }
    }

    /// Sends `client` the events of `events` from now on.
    pub fn subscribe(&mut self, client: u64, events: Vec<EventKind>) -> Result<(), String> {
        let Some(connection) = self.clients.get_mut(&client) else {
            return Err("connection gone".into());
        };
        connection.subscription = Some(Subscription { events, ..Default::default() });
        self.update_wanted();
        Ok(())
    }

    /// Whether any subscriber wants events of `kind` (checked before an
    /// event is made at all).
    pub fn wants(&self, kind: EventKind) -> bool {
        self.wanted[event_index(kind)]
    }

    /// Queues `event` for every subscriber of `kind`.
    pub fn publish(&mut self, kind: EventKind, event: &Value) {
        let mut line = serde_json::to_vec(event).expect("JSON values serialize");
        line.push(b'\n');
        for client in self.clients.values_mut() {
            if client.subscription.as_ref().is_some_and(|s| s.events.contains(&kind)) {
                client.queue_event(&line);
            }
        }
    }

    /// Events dropped so far for subscribers too slow to take them.
    pub fn subscriber_drops(&self) -> u64 {
        self.clients.values().filter_map(|c| c.subscription.as_ref()).map(|s| s.dropped_total).sum()
    }

    fn update_wanted(&mut self) {
        self.wanted = [false; 4];
        for sub in self.clients.values().filter_map(|c| c.subscription.as_ref()) {
            for &kind in &sub.events {
                self.wanted[event_index(kind)] = true;
            }
        }
    }
}
