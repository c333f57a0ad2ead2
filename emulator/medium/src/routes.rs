//! Static routes of a lab (`routing: static`), from the model's minimum-hop
//! table (`meshemu_model::routing`).

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

    #[test]
    fn neighbours_need_no_host_route() {
        // Node 1 of the chain 0-1-2-3: 0 and 2 are neighbours, 3 is via 2.
        assert_eq!(host_routes(&[Some(0), None, Some(2), Some(2)]), vec![(3, 2)]);
        assert!(host_routes(&[None, Some(1)]).is_empty());
    }
}
