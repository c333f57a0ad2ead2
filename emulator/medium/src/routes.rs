//! Static routes of a lab (`routing: static`), from the model's minimum-hop
//! table (`meshemu_model::routing`), as few prefix routes as forward every
//! address exactly as one host route per destination would.
//!
//! A host route for every other node is n² kernel routes for a lab, a
//! million for 1000 nodes, and inserting them was most of a large lab's
//! bring-up. Inside a node's own subnet the table is compressed with ORTC
//! (Draves, King, Venkatachary, Zill: "Constructing optimal IP routing
//! tables", INFOCOM 1999): on the binary trie of the subnet's addresses,
//! each subtree keeps the next hops that would serve most of it (the
//! intersection of its halves' sets when they share one, else their union),
//! then a route is placed wherever the next hop inherited from above is not
//! in a subtree's set. Every address of the subnet, node or not, is
//! forwarded as before: to its next hop, or on the link (neighbours, the
//! node itself, unreachable nodes, unused addresses) as the subnet route
//! does. A grid of 25 × 40 nodes needs 55 routes per node instead of 995.

use std::net::Ipv4Addr;

/// Where a route sends its destinations: through node `gateway`, or onto
/// the link (`None`, what the subnet route does).
pub type NextHop = Option<usize>;

/// `prefix/len` to `next_hop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixRoute {
    pub prefix: Ipv4Addr,
    pub len: u8,
    pub next_hop: NextHop,
}

/// The routes a node needs besides its subnet route, given its address and
/// prefix length, every node's address, and its next hop to each node
/// (`next_hops[d]`: None when unreachable, `Some(d)` for a neighbour).
/// Destinations outside the subnet get host routes.
pub fn node_routes(own: Ipv4Addr, prefix_len: u8, addresses: &[Ipv4Addr], next_hops: &[NextHop]) -> Vec<PrefixRoute> {
    let subnet_mask = u32::MAX.checked_shl(32 - u32::from(prefix_len)).unwrap_or(0);
    let subnet = u32::from(own) & subnet_mask;
    let mut inside = Vec::new();
    let mut routes = Vec::new();
    for (destination, hop) in next_hops.iter().enumerate() {
        // Neighbours and unreachable nodes are the link's, as without a route.
        let Some(gateway) = hop.filter(|&h| h != destination) else { continue };
        let address = u32::from(addresses[destination]);
        if address & subnet_mask == subnet {
            inside.push((address, Some(gateway)));
        } else {
            routes.push(PrefixRoute { prefix: Ipv4Addr::from(address), len: 32, next_hop: Some(gateway) });
        }
    }
    inside.sort_unstable();
    inside.dedup_by_key(|(address, _)| *address);
    let mut trie = Vec::new();
    let root = build(&inside, subnet, prefix_len, &mut trie);
    place(&trie, root, subnet, prefix_len, None, &mut routes);
    routes
}

/// A subtree of the address trie: the next hops that serve it best
/// (sorted), and its two halves unless it is one next hop throughout.
struct Subtree {
    next_hops: Vec<NextHop>,
    halves: Option<(usize, usize)>,
}

/// ORTC's bottom-up pass over the addresses in `prefix/len`, `entries`
/// sorted; addresses without an entry belong to the link. Returns the
/// subtree's index in `trie`.
fn build(entries: &[(u32, NextHop)], prefix: u32, len: u8, trie: &mut Vec<Subtree>) -> usize {
    let size = 1u64 << (32 - len);
    let uniform = match entries.first() {
        None => Some(None),
        // Every address has the same next hop.
        Some(&(_, hop)) if entries.len() as u64 == size && entries.iter().all(|&(_, h)| h == hop) => Some(hop),
        _ => None,
    };
    let subtree = match uniform {
        Some(hop) => Subtree { next_hops: vec![hop], halves: None },
        None => {
            let upper = prefix | 1 << (31 - len);
            let split = entries.partition_point(|&(address, _)| address < upper);
            let lower_half = build(&entries[..split], prefix, len + 1, trie);
            let upper_half = build(&entries[split..], upper, len + 1, trie);
            let (a, b) = (&trie[lower_half].next_hops, &trie[upper_half].next_hops);
            let shared: Vec<NextHop> = a.iter().copied().filter(|hop| b.contains(hop)).collect();
            let next_hops = if shared.is_empty() {
                let mut union: Vec<NextHop> = a.iter().chain(b).copied().collect();
                union.sort_unstable();
                union.dedup();
                union
            } else {
                shared
            };
            Subtree { next_hops, halves: Some((lower_half, upper_half)) }
        }
    };
    trie.push(subtree);
    trie.len() - 1
}

/// ORTC's top-down pass: a route wherever the next hop from above does not
/// serve the subtree (the lowest of those that do, for determinism).
fn place(trie: &[Subtree], index: usize, prefix: u32, len: u8, above: NextHop, routes: &mut Vec<PrefixRoute>) {
    let subtree = &trie[index];
    let mut next_hop = above;
    if !subtree.next_hops.contains(&above) {
        next_hop = subtree.next_hops[0];
        routes.push(PrefixRoute { prefix: Ipv4Addr::from(prefix), len, next_hop });
    }
    if let Some((lower, upper)) = subtree.halves {
        place(trie, lower, prefix, len + 1, next_hop, routes);
        place(trie, upper, prefix | 1 << (31 - len), len + 1, next_hop, routes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, ((i + 1) >> 8) as u8, (i + 1) as u8)
    }

    /// Longest-prefix match over the routes, the subnet route (on the link) below them.
    fn lookup(routes: &[PrefixRoute], address: Ipv4Addr) -> NextHop {
        routes
            .iter()
            .filter(|r| u32::from(address) & u32::MAX.checked_shl(32 - u32::from(r.len)).unwrap_or(0) == u32::from(r.prefix))
            .max_by_key(|r| r.len)
            .and_then(|r| r.next_hop)
    }

    /// Minimum-hop next hops on a rows × cols grid with 4 neighbours, lowest index first (as the model's).
    fn grid_table(rows: usize, cols: usize) -> Vec<Vec<NextHop>> {
        let n = rows * cols;
        let distance = |a: usize, b: usize| (a / cols).abs_diff(b / cols) + (a % cols).abs_diff(b % cols);
        (0..n)
            .map(|s| {
                let mut neighbours = vec![];
                if s >= cols { neighbours.push(s - cols) }
                if s % cols > 0 { neighbours.push(s - 1) }
                if s % cols + 1 < cols { neighbours.push(s + 1) }
                if s + cols < n { neighbours.push(s + cols) }
                (0..n)
                    .map(|d| (d != s).then(|| *neighbours.iter().find(|&&m| distance(m, d) + 1 == distance(s, d)).unwrap()))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn every_address_of_the_subnet_is_forwarded_as_by_host_routes() {
        let (rows, cols) = (9, 13);
        let table = grid_table(rows, cols);
        let addresses: Vec<Ipv4Addr> = (0..rows * cols).map(ip).collect();
        let mut total = 0;
        for (s, next_hops) in table.iter().enumerate() {
            let routes = node_routes(addresses[s], 22, &addresses, next_hops);
            total += routes.len();
            for a in 0..1024u32 {
                let address = Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 0, 0, 0)) + a);
                let expected = match addresses.iter().position(|&x| x == address) {
                    Some(d) => next_hops[d].filter(|&h| h != d),
                    None => None, // not a node: on the link, as before
                };
                assert_eq!(lookup(&routes, address), expected, "node {s}, address {address}: {routes:?}");
            }
        }
        let host_routes: usize =
            table.iter().enumerate().map(|(s, row)| row.iter().enumerate().filter(|(d, h)| h.is_some_and(|h| h != *d) && *d != s).count()).sum();
        assert!(total * 4 < host_routes, "{total} prefix routes for {host_routes} host routes");
    }

    #[test]
    fn a_chain_keeps_its_host_route_and_neighbours_need_none() {
        // Node 0 of the chain 0-1-2: 1 is a neighbour, 2 is via 1.
        let addresses = [ip(0), ip(1), ip(2)];
        let routes = node_routes(ip(0), 16, &addresses, &[None, Some(1), Some(1)]);
        assert_eq!(routes, vec![PrefixRoute { prefix: ip(2), len: 32, next_hop: Some(1) }]);
        assert!(node_routes(ip(1), 16, &addresses, &[Some(0), None, Some(2)]).is_empty());
    }

    #[test]
    fn destinations_outside_the_subnet_get_host_routes() {
        let addresses = [ip(0), ip(1), Ipv4Addr::new(192, 168, 1, 7)];
        let routes = node_routes(ip(0), 16, &addresses, &[None, Some(1), Some(1)]);
        assert_eq!(routes, vec![PrefixRoute { prefix: addresses[2], len: 32, next_hop: Some(1) }]);
    }
}
