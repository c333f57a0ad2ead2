//! The control socket's wire format (emulator/README.md section 6): one JSON
//! object per line, `op` naming the request; replies are JSON lines with `ok`.

use std::path::PathBuf;

use meshemu_model::MacAddr;
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
        /// With run true: the model time the nodes go on from (not past;
        /// default now). They stand until then.
        #[serde(default)]
        from_ns: Option<u64>,
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
            Ok(Request::Mobility { node: None, run: false, from_ns: None })
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
}
