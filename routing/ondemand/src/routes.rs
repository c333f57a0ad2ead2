//! Kernel routes over rtnetlink: host routes the protocol installs (tagged
//! with our own routing protocol number so leftovers of a crashed daemon
//! are found), and the catch-all subnet route with a realm that sends
//! packets without a host route to the NFQUEUE (see [`crate::iptables`]).

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr};

use meshemu_netutil::rtnetlink::{NetlinkError, RouteSocket};
use netlink_packet_core::{NLM_F_CREATE, NLM_F_REPLACE};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteMetric, RouteProtocol, RouteRealm,
    RouteScope, RouteType,
};
use netlink_packet_route::rule::{RuleAction, RuleAttribute, RuleMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

/// The routing protocol number on our routes (`ip route show proto 173`).
pub const ROUTE_PROTOCOL: u8 = 173;
/// Priority of the policy rules `from SRC lookup TABLE` of per-(source,
/// destination) routes (`ip rule show pref 1730`); below the main table's 32766.
pub const PAIR_RULE_PRIORITY: u32 = 1730;
/// Tables of per-source routes are numbered from here (`ip route show table 17300`).
pub const PAIR_TABLE_BASE: u32 = 17300;

/// The interface the routes go through and the subnet of its address.
#[derive(Clone, Copy, Debug)]
pub struct Interface {
    pub index: u32,
    pub address: Ipv4Addr,
    pub prefix_len: u8,
}

impl Interface {
    pub fn subnet(&self) -> Ipv4Addr {
        let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix_len)).unwrap_or(0);
        Ipv4Addr::from(u32::from(self.address) & mask)
    }
}

/// An rtnetlink socket in the calling thread's network namespace.
pub struct RouteTable {
    socket: RouteSocket,
    interface: Interface,
    /// Per-(source, destination) routes: the table of each source (one
    /// `from SRC` rule each) and the next hop of each pair installed.
    source_tables: HashMap<Ipv4Addr, u32>,
    pair_routes: HashMap<(Ipv4Addr, Ipv4Addr), Ipv4Addr>,
    /// Routes we add carry `quickack 1`: a TCP receiver using them ACKs every
    /// segment at once (Linux's only way to turn delayed ACKs off).
    quickack: bool,
}

impl RouteTable {
    pub fn open(interface: Interface) -> io::Result<RouteTable> {
        Ok(RouteTable {
            socket: RouteSocket::open()?,
            interface,
            source_tables: HashMap::new(),
            pair_routes: HashMap::new(),
            quickack: false,
        })
    }

    /// Every route added from now on gets `quickack 1` (or not).
    pub fn set_quickack(&mut self, quickack: bool) {
        self.quickack = quickack;
    }

    /// `ip route replace ROUTE [quickack 1]`.
    fn add(&mut self, mut route: RouteMessage, what: String) -> Result<(), NetlinkError> {
        if self.quickack {
            route.attributes.push(RouteAttribute::Metrics(vec![RouteMetric::QuickAck(1)]));
        }
        self.socket.request(RouteNetlinkMessage::NewRoute(route), NLM_F_CREATE | NLM_F_REPLACE, what)
    }

    fn route(&self, dst: Ipv4Addr, prefix_len: u8, protocol: RouteProtocol, scope: RouteScope) -> RouteMessage {
        let mut route = RouteMessage::default();
        route.header.address_family = AddressFamily::Inet;
        route.header.destination_prefix_length = prefix_len;
        route.header.table = RouteHeader::RT_TABLE_MAIN;
        route.header.protocol = protocol;
        route.header.scope = scope;
        route.header.kind = RouteType::Unicast;
        route.attributes = vec![
            RouteAttribute::Destination(RouteAddress::Inet(dst)),
            RouteAttribute::Oif(self.interface.index),
        ];
        route
    }

    /// `ip route replace DST/32 [via NEXT_HOP onlink] dev IF proto 173`.
    pub fn set_host_route(&mut self, dst: Ipv4Addr, next_hop: Ipv4Addr) -> Result<(), NetlinkError> {
        let route = self.host_route(dst, next_hop);
        let what = format!("route to {dst} via {next_hop}");
        self.add(route, what)
    }

    /// `DST/32 [via NEXT_HOP onlink] dev IF proto 173` in the main table.
    fn host_route(&self, dst: Ipv4Addr, next_hop: Ipv4Addr) -> RouteMessage {
        let direct = dst == next_hop;
        let scope = if direct { RouteScope::Link } else { RouteScope::Universe };
        let mut route = self.route(dst, 32, RouteProtocol::Other(ROUTE_PROTOCOL), scope);
        if !direct {
            // onlink: the next hop is a neighbour on the interface whatever the prefixes say.
            route.header.flags = RouteFlags::Onlink;
            route.attributes.push(RouteAttribute::Gateway(RouteAddress::Inet(next_hop)));
        }
        route
    }

    /// `ip route del DST/32 proto 173`; a route already gone is fine. Any
    /// scope, as `ip route del` asks: the kernel deletes only a route of the
    /// scope given, and a neighbour's direct route is scope link.
    pub fn delete_host_route(&mut self, dst: Ipv4Addr) -> Result<(), NetlinkError> {
        let route = self.route(dst, 32, RouteProtocol::Other(ROUTE_PROTOCOL), RouteScope::NoWhere);
        self.delete(route, format!("deleting the route to {dst}"))
    }

    /// Packets from `src` to `dst` go to `next_hop`: a route in the table of
    /// `src` (made, with its rule `from SRC/32 lookup TABLE`, on first use).
    /// Returns whether the pair had no route before.
    pub fn set_pair_route(&mut self, src: Ipv4Addr, dst: Ipv4Addr, next_hop: Ipv4Addr) -> Result<bool, NetlinkError> {
        if self.pair_routes.get(&(src, dst)) == Some(&next_hop) {
            return Ok(false);
        }
        let table = match self.source_tables.get(&src) {
            Some(&table) => table,
            None => {
                let table = PAIR_TABLE_BASE + self.source_tables.len() as u32;
                let what = format!("adding the rule from {src} lookup {table}");
                self.socket.request(RouteNetlinkMessage::NewRule(source_rule(src, table)), NLM_F_CREATE, what)?;
                self.source_tables.insert(src, table);
                table
            }
        };
        let mut route = self.host_route(dst, next_hop);
        route.header.table = RouteHeader::RT_TABLE_UNSPEC;
        route.attributes.push(RouteAttribute::Table(table));
        let what = format!("route from {src} to {dst} via {next_hop} (table {table})");
        self.add(route, what)?;
        Ok(self.pair_routes.insert((src, dst), next_hop).is_none())
    }

    /// Removes the route of packets from `src` to `dst`; one already gone is fine.
    pub fn delete_pair_route(&mut self, src: Ipv4Addr, dst: Ipv4Addr) -> Result<(), NetlinkError> {
        let Some(&table) = self.source_tables.get(&src) else { return Ok(()) };
        self.pair_routes.remove(&(src, dst));
        let mut route = self.route(dst, 32, RouteProtocol::Other(ROUTE_PROTOCOL), RouteScope::NoWhere);
        route.header.table = RouteHeader::RT_TABLE_UNSPEC;
        route.attributes.push(RouteAttribute::Table(table));
        self.delete(route, format!("deleting the route from {src} to {dst}"))
    }

    /// Deletes every policy rule at [`PAIR_RULE_PRIORITY`] and every route of
    /// ours in the tables they point to (a crashed daemon's leftovers, or
    /// ours at exit). Returns how many rules.
    pub fn flush_pair_routes(&mut self) -> Result<usize, NetlinkError> {
        let mut dump = RuleMessage::default();
        dump.header.family = AddressFamily::Inet;
        let ours: Vec<RuleMessage> = (self.socket.dump(RouteNetlinkMessage::GetRule(dump), "listing policy rules")?)
            .into_iter()
            .filter_map(|reply| match reply {
                RouteNetlinkMessage::NewRule(rule) => Some(rule),
                _ => None,
            })
            .filter(|rule| rule.attributes.contains(&RuleAttribute::Priority(PAIR_RULE_PRIORITY)))
            .collect();
        let tables: Vec<u32> = ours
            .iter()
            .filter_map(|rule| rule.attributes.iter().find_map(|a| if let RuleAttribute::Table(t) = a { Some(*t) } else { None }))
            .collect();
        for rule in &ours {
            let what = "deleting a policy rule".to_string();
            match self.socket.request(RouteNetlinkMessage::DelRule(rule.clone()), 0, what) {
                Err(error) if matches!(error.source.raw_os_error(), Some(libc::ENOENT)) => {}
                other => other?,
            }
        }
        let mut dump = RouteMessage::default();
        dump.header.address_family = AddressFamily::Inet;
        dump.header.table = RouteHeader::RT_TABLE_UNSPEC;
        for route in self.dump(RouteNetlinkMessage::GetRoute(dump), "listing routes")? {
            let table = route.attributes.iter().find_map(|a| if let RouteAttribute::Table(t) = a { Some(*t) } else { None });
            if route.header.protocol == RouteProtocol::Other(ROUTE_PROTOCOL) && table.is_some_and(|t| tables.contains(&t)) {
                self.delete(route, "deleting a policy route".into())?;
            }
        }
        self.source_tables.clear();
        self.pair_routes.clear();
        Ok(ours.len())
    }

    /// Replaces the connected subnet route by one with `realm`: packets to
    /// the subnet without a host route take it and the realm match finds them.
    pub fn install_catch_all(&mut self, realm: u16) -> Result<(), NetlinkError> {
        let connected = self.connected_route(RouteProtocol::Kernel, None);
        self.delete(connected, "deleting the connected subnet route".into())?;
        let catch_all = self.connected_route(RouteProtocol::Other(ROUTE_PROTOCOL), Some(realm));
        let what = format!("adding the catch-all subnet route with realm {realm}");
        self.add(catch_all, what)
    }

    /// Puts the connected subnet route back as the kernel made it.
    pub fn restore_connected(&mut self) -> Result<(), NetlinkError> {
        let catch_all = self.connected_route(RouteProtocol::Other(ROUTE_PROTOCOL), None);
        self.delete(catch_all, "deleting the catch-all subnet route".into())?;
        let connected = self.connected_route(RouteProtocol::Kernel, None);
        let what = "restoring the connected subnet route".to_string();
        self.socket.request(RouteNetlinkMessage::NewRoute(connected), NLM_F_CREATE | NLM_F_REPLACE, what)
    }

    fn connected_route(&self, protocol: RouteProtocol, realm: Option<u16>) -> RouteMessage {
        let interface = self.interface;
        let mut route = self.route(interface.subnet(), interface.prefix_len, protocol, RouteScope::Link);
        route.attributes.push(RouteAttribute::PrefSource(RouteAddress::Inet(interface.address)));
        if let Some(realm) = realm {
            route.attributes.push(RouteAttribute::Realm(RouteRealm { source: 0, destination: realm }));
        }
        route
    }

    /// Deletes every IPv4 host route with our protocol number (a crashed
    /// daemon's leftovers, or ours at exit). Returns how many.
    pub fn flush_host_routes(&mut self) -> Result<usize, NetlinkError> {
        let mut dump = RouteMessage::default();
        dump.header.address_family = AddressFamily::Inet;
        let what = "listing routes".to_string();
        let routes = self.dump(RouteNetlinkMessage::GetRoute(dump), &what)?;
        let ours: Vec<Ipv4Addr> = routes
            .into_iter()
            .filter(|r| {
                r.header.protocol == RouteProtocol::Other(ROUTE_PROTOCOL)
                    && r.header.destination_prefix_length == 32
                    && r.header.table == RouteHeader::RT_TABLE_MAIN
            })
            .filter_map(|r| {
                r.attributes.iter().find_map(|a| match a {
                    RouteAttribute::Destination(RouteAddress::Inet(dst)) => Some(*dst),
                    _ => None,
                })
            })
            .collect();
        for &dst in &ours {
            self.delete_host_route(dst)?;
        }
        Ok(ours.len())
    }

    fn delete(&mut self, route: RouteMessage, what: String) -> Result<(), NetlinkError> {
        match self.socket.request(RouteNetlinkMessage::DelRoute(route), 0, what) {
            Err(error) if matches!(error.source.raw_os_error(), Some(libc::ESRCH | libc::ENOENT)) => Ok(()),
            other => other,
        }
    }

    /// The routes a route dump lists.
    fn dump(&mut self, message: RouteNetlinkMessage, what: &str) -> Result<Vec<RouteMessage>, NetlinkError> {
        let replies = self.socket.dump(message, what)?;
        Ok(replies
            .into_iter()
            .filter_map(|reply| match reply {
                RouteNetlinkMessage::NewRoute(route) => Some(route),
                _ => None,
            })
            .collect())
    }
}

/// `from SRC/32 lookup TABLE pref 1730 proto 173`.
fn source_rule(src: Ipv4Addr, table: u32) -> RuleMessage {
    let mut rule = RuleMessage::default();
    rule.header.family = AddressFamily::Inet;
    rule.header.src_len = 32;
    rule.header.action = RuleAction::ToTable;
    rule.attributes = vec![
        RuleAttribute::Source(IpAddr::V4(src)),
        RuleAttribute::Priority(PAIR_RULE_PRIORITY),
        RuleAttribute::Table(table),
        RuleAttribute::Protocol(RouteProtocol::Other(ROUTE_PROTOCOL)),
    ];
    rule
}
