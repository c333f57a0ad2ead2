//! What each control request does to a running lab (emulator/README.md
//! section 6): the request's meaning and its reply. The wire format and the
//! socket are `control/`.

use meshemu_model::{Action, LinkOverride, Medium, NodeId, RadioConfig, Time};
use meshemu_radiostats::PeerEntry;
use serde_json::{json, Value};

use super::capture::Capture;
use super::nodes::Nodes;
use super::stats::fill_peers;
use super::timer::realtime_ns;
use super::{Lateness, Port};
use crate::control::{error_reply, ControlServer, EventKind, Request};

/// What a request may see and change: the loop's parts, lent for one request.
pub struct Lab<'a, T: Port> {
    pub name: &'a str,
    pub now: Time,
    pub medium: &'a mut Medium<T::Payload>,
    pub nodes: &'a mut Nodes,
    pub capture: &'a mut Capture<T>,
    pub control: &'a mut ControlServer,
    pub lateness: &'a Lateness,
    /// Deliveries the nodes' side refused so far.
    pub delivery_errors: u64,
    /// Where the model's actions go (a flush drops frames): the loop carries
    /// them out before it replies.
    pub actions: &'a mut Vec<Action<T::Payload>>,
    pub shutdown: &'a mut bool,
}

/// The reply to `request` from `client`: `ok` true with the request's
/// fields, or `ok` false and why.
pub fn handle<T: Port>(lab: Lab<'_, T>, client: u64, request: Request) -> Value {
    match try_handle(lab, client, request) {
        Ok(mut reply) => {
            reply["ok"] = json!(true);
            reply
        }
        Err(message) => error_reply(message),
    }
}

fn try_handle<T: Port>(lab: Lab<'_, T>, client: u64, request: Request) -> Result<Value, String> {
    let now = lab.now;
    let nodes = lab.nodes;
    Ok(match request {
        Request::Status {} => {
            json!({"lab": lab.name, "time_ns": now, "nodes": nodes.len(),
                "lateness": lab.lateness.actions.summary(), "subscriber_drops": lab.control.subscriber_drops(),
                "tap_write_errors": lab.delivery_errors,
                "capture": lab.capture.path()})
        }
        Request::Stats { node, peers } => {
            let mut stats = serde_json::Map::new();
            for i in selected(nodes, node)? {
                stats.insert(nodes.names[i].clone(), node_stats(lab.medium, nodes, i, peers));
            }
            json!({"time_ns": now, "nodes": stats})
        }
        Request::Positions {} => {
            let positions: serde_json::Map<String, Value> = nodes
                .names
                .iter()
                .enumerate()
                .map(|(i, name)| (name.clone(), json!(lab.medium.position(i, now))))
                .collect();
            json!({"time_ns": now, "nodes": positions})
        }
        Request::Links {} => {
            json!({"time_ns": now, "nodes": nodes.len(), "links": lab.medium.links(now)})
        }
        Request::Move { node, position } => {
            let i = nodes.index(&node)?;
            if let Some(k) = position.iter().position(|v| !v.is_finite()) {
                return Err(format!("position[{k}] must be a finite number"));
            }
            lab.medium.set_position(now, i, position);
            if lab.control.wants(EventKind::Move) {
                let event = json!({"event": "move", "time_ns": now, "node": node, "position": position});
                lab.control.publish(EventKind::Move, &event);
            }
            json!({})
        }
        Request::SetRadio { node, radio } => {
            let i = nodes.index(&node)?;
            let mut merged = serde_json::to_value(&nodes.radios[i]).expect("radio serializes");
            for (field, value) in radio {
                merged[field] = value;
            }
            let radio: RadioConfig = serde_path_to_error::deserialize(merged)
                .map_err(|e| format!("radio.{}: {}", e.path(), e.inner()))?;
            lab.medium.set_radio(now, i, radio.clone()).map_err(|e| e.to_string())?;
            nodes.radios[i] = radio;
            json!({})
        }
        Request::Flush { node, to } => {
            let i = nodes.index(&node)?;
            let j = nodes.macs.iter().position(|&mac| mac == to.0).ok_or_else(|| format!("no node has address {to}"))?;
            let dropped = lab.medium.flush_queue(now, i, j, lab.actions);
            json!({"dropped": dropped})
        }
        Request::SetLink { a, b, bit_error_rate, extra_loss_db } => {
            let (ia, ib) = (nodes.index(&a)?, nodes.index(&b)?);
            if ia == ib {
                return Err("a and b must be different nodes".into());
            }
            lab.medium.set_link(ia, ib, LinkOverride { bit_error_rate, extra_loss_db }).map_err(|e| e.to_string())?;
            json!({})
        }
        Request::Mobility { node, run: false, from_ns: None } => {
            for i in selected(nodes, node)? {
                lab.medium.pause_mobility(now, i);
            }
            json!({})
        }
        Request::Mobility { node, run: true, from_ns } => {
            let from = from_ns.unwrap_or(now);
            if from < now {
                return Err(format!("from_ns {from} has passed (the model's time is {now})"));
            }
            for i in selected(nodes, node)? {
                lab.medium.resume_mobility(now, i, from);
            }
            json!({})
        }
        Request::Mobility { run: false, from_ns: Some(_), .. } => return Err("from_ns is for run true".into()),
        Request::Capture { path, run: true } => {
            let path = path.ok_or("capture with run true needs a path")?;
            if !path.is_absolute() {
                return Err(format!("path {} is not absolute", path.display()));
            }
            let epoch = realtime_ns().saturating_sub(now);
            lab.capture.start(&path, epoch, now)?;
            lab.medium.set_air_capture(true);
            json!({"path": path})
        }
        Request::Capture { run: false, .. } => match lab.capture.stop() {
            Some((path, frames)) => {
                lab.medium.set_air_capture(false);
                json!({"path": path, "frames": frames})
            }
            None => return Err("no capture is running".into()),
        },
        Request::Lateness {} => {
            let mut reply = serde_json::to_value(lab.lateness.actions.summary()).expect("summary serializes");
            reply["buckets"] = json!(lab.lateness.actions.buckets());
            reply["sched_fifo"] = json!(lab.lateness.sched_fifo);
            reply["timer_wakeup"] = json!(lab.lateness.timer_wakeup.summary());
            reply
        }
        Request::Subscribe { events } => {
            lab.control.subscribe(client, events)?;
            json!({})
        }
        Request::Shutdown {} => {
            *lab.shutdown = true;
            json!({})
        }
    })
}

/// The node named, or every node.
fn selected(nodes: &Nodes, name: Option<String>) -> Result<Vec<NodeId>, String> {
    match name {
        Some(name) => Ok(vec![nodes.index(&name)?]),
        None => Ok((0..nodes.len()).collect()),
    }
}

/// A node's counters and, with `with_peers`, the peers it exchanged frames
/// with (a peer never heard nor sent to has nothing to say).
fn node_stats<P: Clone>(medium: &Medium<P>, nodes: &Nodes, node: NodeId, with_peers: bool) -> Value {
    let mut value = serde_json::to_value(medium.stats(node)).expect("counters serialize");
    if !with_peers {
        return value;
    }
    let mut peers = vec![PeerEntry::default(); nodes.len()];
    fill_peers(medium, node, &nodes.macs, &mut peers);
    let peers: Vec<Value> = peers
        .iter()
        .enumerate()
        .filter(|&(j, peer)| j != node && peer.tx_acked + peer.tx_failed + peer.rx_frames > 0)
        .map(|(j, peer)| {
            let mut entry = serde_json::to_value(peer).expect("peer serializes");
            entry["node"] = json!(nodes.names[j]);
            entry
        })
        .collect();
    value["peers"] = json!(peers);
    value
}
