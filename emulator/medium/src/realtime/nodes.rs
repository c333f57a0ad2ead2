//! The lab's nodes as the loop and the control plane know them: names, MAC
//! addresses and each node's current radio.

use std::collections::HashMap;

use meshemu_model::{MediumConfig, NodeId, RadioConfig};

pub struct Nodes {
    pub names: Vec<String>,
    by_name: HashMap<String, NodeId>,
    pub macs: Vec<[u8; 6]>,
    /// Current radio of each node (`set_radio` changes single fields).
    pub radios: Vec<RadioConfig>,
}

impl Nodes {
    pub fn new(config: &MediumConfig) -> Self {
        let names: Vec<String> = config.nodes.iter().map(|n| n.name.clone()).collect();
        Nodes {
            by_name: names.iter().enumerate().map(|(i, n)| (n.clone(), i)).collect(),
            names,
            macs: config.nodes.iter().map(|n| n.mac_address.0).collect(),
            radios: config.nodes.iter().map(|n| n.radio.clone()).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// The node called `name`.
    pub fn index(&self, name: &str) -> Result<NodeId, String> {
        self.by_name.get(name).copied().ok_or_else(|| format!("unknown node {name:?}"))
    }
}
