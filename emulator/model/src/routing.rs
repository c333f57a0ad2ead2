//! Static routing: minimum-hop paths over the in-receive-range graph, the
//! same for the sim driver and for labs with `routing: static`.

use std::collections::VecDeque;

use crate::{LinkInfo, NodeId};

/// Next hops of every node: `table[s][d]` is the neighbour `s` forwards to for
/// destination `d`, `None` if `d` is `s` itself or unreachable.
///
/// A link s–n is usable when each of s and n is in the other's receive range
/// (a unicast exchange needs the ACK back). Among the neighbours on a minimum-
/// hop path the lowest index is chosen, so every node's choice lies on the
/// same family of shortest paths and forwarding never loops.
pub fn min_hop_next_hops(node_count: usize, links: &[LinkInfo]) -> Vec<Vec<Option<NodeId>>> {
    let neighbours = both_way_neighbours(node_count, links);
    let mut table = vec![vec![None; node_count]; node_count];
    for destination in 0..node_count {
        let hops = hop_counts(&neighbours, destination);
        for (source, row) in table.iter_mut().enumerate() {
            let Some(h) = hops[source].filter(|&h| h > 0) else { continue };
            row[destination] = neighbours[source].iter().copied().find(|&n| hops[n] == Some(h - 1));
        }
    }
    table
}

/// The size of the largest set of nodes that all reach each other over
/// links that work both ways; the network is connected when it is
/// `node_count`. Placement generators ask this of every candidate.
pub fn largest_component(node_count: usize, links: &[LinkInfo]) -> usize {
    let neighbours = both_way_neighbours(node_count, links);
    let mut counted = vec![false; node_count];
    let mut largest = 0;
    for start in 0..node_count {
        if counted[start] {
            continue;
        }
        let mut size = 0;
        for (node, hops) in hop_counts(&neighbours, start).into_iter().enumerate() {
            if hops.is_some() {
                counted[node] = true;
                size += 1;
            }
        }
        largest = largest.max(size);
    }
    largest
}

/// For every node, the nodes it exchanges unicast frames with: each is in
/// the other's receive range (a unicast exchange needs the ACK back).
fn both_way_neighbours(node_count: usize, links: &[LinkInfo]) -> Vec<Vec<NodeId>> {
    let mut hears = vec![false; node_count * node_count];
    for l in links.iter().filter(|l| l.in_rx_range) {
        hears[l.a * node_count + l.b] = true;
    }
    let usable = |s: usize, n: usize| hears[s * node_count + n] && hears[n * node_count + s];
    (0..node_count).map(|s| (0..node_count).filter(|&n| n != s && usable(s, n)).collect()).collect()
}

/// Breadth-first hop counts from every node to `destination`.
fn hop_counts(neighbours: &[Vec<NodeId>], destination: NodeId) -> Vec<Option<u32>> {
    let mut hops = vec![None; neighbours.len()];
    hops[destination] = Some(0);
    let mut queue = VecDeque::from([destination]);
    while let Some(node) = queue.pop_front() {
        let h = hops[node].expect("queued nodes have a count");
        for &n in &neighbours[node] {
            if hops[n].is_none() {
                hops[n] = Some(h + 1);
                queue.push_back(n);
            }
        }
    }
    hops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links(pairs: &[(usize, usize)]) -> Vec<LinkInfo> {
        pairs.iter().map(|&(a, b)| LinkInfo { a, b, rx_power_dbm: -60.0, in_rx_range: true, in_cs_range: true }).collect()
    }

    fn symmetric(pairs: &[(usize, usize)]) -> Vec<LinkInfo> {
        links(&pairs.iter().flat_map(|&(a, b)| [(a, b), (b, a)]).collect::<Vec<_>>())
    }

    #[test]
    fn a_chain_forwards_hop_by_hop() {
        let table = min_hop_next_hops(4, &symmetric(&[(0, 1), (1, 2), (2, 3)]));
        assert_eq!(table[0], vec![None, Some(1), Some(1), Some(1)]);
        assert_eq!(table[2], vec![Some(1), Some(1), None, Some(3)]);
    }

    #[test]
    fn ties_go_to_the_lower_index() {
        // A diamond 0-{1,2}-3: both 1 and 2 are two-hop paths.
        let table = min_hop_next_hops(4, &symmetric(&[(0, 2), (0, 1), (1, 3), (2, 3)]));
        assert_eq!(table[0][3], Some(1));
        assert_eq!(table[3][0], Some(1));
    }

    #[test]
    fn one_way_links_and_islands_get_no_route() {
        // 0 hears 1 but 1 does not hear 0; 2-3 are an island.
        let mut l = links(&[(1, 0)]);
        l.extend(symmetric(&[(2, 3)]));
        let table = min_hop_next_hops(4, &l);
        assert_eq!(table[0], vec![None; 4]);
        assert_eq!(table[1], vec![None; 4]);
        assert_eq!(table[2][3], Some(3));
    }

    #[test]
    fn links_out_of_receive_range_are_not_used() {
        let mut l = symmetric(&[(0, 1)]);
        l.iter_mut().for_each(|l| l.in_rx_range = false);
        assert_eq!(min_hop_next_hops(2, &l), vec![vec![None; 2]; 2]);
    }

    #[test]
    fn the_largest_component_counts_only_links_that_work_both_ways() {
        // 0-1-2 both ways, 3 hears 2 but 2 does not hear 3, 4-5 an island.
        let mut l = symmetric(&[(0, 1), (1, 2), (4, 5)]);
        l.extend(links(&[(2, 3)]));
        assert_eq!(largest_component(6, &l), 3);
        assert_eq!(largest_component(4, &symmetric(&[(0, 1), (1, 2), (2, 3)])), 4);
        assert_eq!(largest_component(1, &[]), 1);
    }

    #[test]
    fn shortest_path_beats_lower_index() {
        // 0-1-2-3-4 and a shortcut 0-5-4: to reach 4, 0 goes through 5.
        let table = min_hop_next_hops(6, &symmetric(&[(0, 1), (1, 2), (2, 3), (3, 4), (0, 5), (5, 4)]));
        assert_eq!(table[0][4], Some(5));
        assert_eq!(table[0][3], Some(1), "3 is three hops either way; 1 < 5");
    }
}
