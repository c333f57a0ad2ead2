//! Static routing for `routing: static`: minimum-hop paths over the
//! in-receive-range graph, ties broken towards the lower node index.

use std::collections::VecDeque;

/// Next hops of every node: `next_hops[s][d]` is the neighbour `s` forwards to
/// for destination `d`, `None` if `d` is `s` itself or unreachable.
///
/// A link s–n is usable when each of s and n is in the other's receive range
/// (a unicast exchange needs the ACK back). Among the neighbours on a minimum-
/// hop path the lowest index is chosen, so every node's choice lies on the
/// same family of shortest paths and forwarding never loops.
pub fn next_hops(node_count: usize, in_rx_range: &[(usize, usize)]) -> Vec<Vec<Option<usize>>> {
    let mut hears = vec![vec![false; node_count]; node_count];
    for &(from, to) in in_rx_range {
        hears[from][to] = true;
    }
    let neighbours: Vec<Vec<usize>> = (0..node_count)
        .map(|s| (0..node_count).filter(|&n| n != s && hears[s][n] && hears[n][s]).collect())
        .collect();

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

/// Breadth-first hop counts from every node to `destination`.
fn hop_counts(neighbours: &[Vec<usize>], destination: usize) -> Vec<Option<u32>> {
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

/// The routes a node needs besides its subnet: (destination, gateway) for
/// every destination reached through another node.
pub fn host_routes(next_hops: &[Option<usize>]) -> Vec<(usize, usize)> {
    next_hops
        .iter()
        .enumerate()
        .filter_map(|(destination, hop)| hop.filter(|&h| h != destination).map(|h| (destination, h)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn symmetric(pairs: &[(usize, usize)]) -> Vec<(usize, usize)> {
        pairs.iter().flat_map(|&(a, b)| [(a, b), (b, a)]).collect()
    }

    #[test]
    fn a_chain_forwards_hop_by_hop() {
        let table = next_hops(4, &symmetric(&[(0, 1), (1, 2), (2, 3)]));
        assert_eq!(table[0], vec![None, Some(1), Some(1), Some(1)]);
        assert_eq!(table[2], vec![Some(1), Some(1), None, Some(3)]);
        assert_eq!(host_routes(&table[0]), vec![(2, 1), (3, 1)]);
        assert_eq!(host_routes(&table[1]), vec![(3, 2)]);
    }

    #[test]
    fn ties_go_to_the_lower_index() {
        // A diamond 0-{1,2}-3: both 1 and 2 are two-hop paths.
        let table = next_hops(4, &symmetric(&[(0, 2), (0, 1), (1, 3), (2, 3)]));
        assert_eq!(table[0][3], Some(1));
        assert_eq!(table[3][0], Some(1));
    }

    #[test]
    fn one_way_links_and_islands_get_no_route() {
        // 0 hears 1 but 1 does not hear 0; 2-3 are an island.
        let mut pairs = vec![(1, 0)];
        pairs.extend(symmetric(&[(2, 3)]));
        let table = next_hops(4, &pairs);
        assert_eq!(table[0], vec![None; 4]);
        assert_eq!(table[1], vec![None; 4]);
        assert_eq!(table[2][3], Some(3));
        assert!(host_routes(&table[2]).is_empty(), "a neighbour needs no host route");
    }

    #[test]
    fn shortest_path_beats_lower_index() {
        // 0-1-2-3-4 and a shortcut 0-5-4: to reach 4, 0 goes through 5.
        let table = next_hops(6, &symmetric(&[(0, 1), (1, 2), (2, 3), (3, 4), (0, 5), (5, 4)]));
        assert_eq!(table[0][4], Some(5));
        assert_eq!(table[0][3], Some(1), "3 is three hops either way; 1 < 5");
    }
}
