//! Choosing paths among the RREQ copies a node collected (pure functions).
//!
//! A candidate's contention is the sum of its relays' mu: the two ends are
//! on every candidate, so leaving them out changes no choice. Ties go to
//! fewer hops, then to the earlier arrival (the paper's rules).

use std::net::Ipv4Addr;

/// A path a RREQ copy took, listed from the pair's src to its dst.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub path: Vec<Ipv4Addr>,
    /// Sum of the relays' contention, hundredths.
    pub contention: u32,
    /// Order of arrival at the collecting node (0 first).
    pub arrival: usize,
}

impl Candidate {
    pub fn hops(&self) -> usize {
        self.path.len() - 1
    }

    pub fn relays(&self) -> &[Ipv4Addr] {
        &self.path[1..self.path.len() - 1]
    }

    fn rank(&self) -> (u32, usize, usize) {
        (self.contention, self.hops(), self.arrival)
    }

    /// No relay in common with `other` (ends excepted).
    pub fn disjoint_from(&self, other: &[Ipv4Addr]) -> bool {
        self.relays().iter().all(|relay| !other.contains(relay))
    }
}

/// What a discovery yields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Two node-disjoint paths: data on `forward`, the way back on `reverse`.
    Disjoint { forward: Candidate, reverse: Candidate },
    /// No two disjoint paths (or the ends are neighbours): one path both ways.
    Single(Candidate),
}

/// The two node-disjoint candidates with the least contention sum; the
/// less contended of them carries the data (the heavier direction: full
/// segments against ACKs). Without a disjoint pair, the least contended
/// single path. Ends in range of each other use their direct link both
/// ways: there is no relay to keep apart. Only candidates at most
/// `length_slack` hops longer than the shortest take part: a node without
/// traffic of its own hardly ever backs off, so a sum of backoffs cannot
/// tell a long detour through idle nodes from a short path through a busy
/// one (routing/copas/README.md, "Path length").
pub fn select_pair(candidates: &[Candidate], length_slack: usize) -> Option<Selection> {
    let shortest = candidates.iter().map(Candidate::hops).min()?;
    let similar: Vec<&Candidate> = candidates.iter().filter(|c| c.hops() <= shortest + length_slack).collect();
    let best = *similar.iter().min_by_key(|c| c.rank())?;
    if best.hops() == 1 {
        return Some(Selection::Single(best.clone()));
    }
    // (contention sum, hops, arrivals) of the best pair so far, and its forward and reverse paths.
    type Ranked<'a> = ((u32, usize, usize, usize), &'a Candidate, &'a Candidate);
    let mut best_pair: Option<Ranked> = None;
    for (i, &a) in similar.iter().enumerate() {
        for &b in &similar[i + 1..] {
            if !a.disjoint_from(b.relays()) {
                continue;
            }
            let (first, second) = if a.rank() <= b.rank() { (a, b) } else { (b, a) };
            let key = (a.contention + b.contention, a.hops() + b.hops(), first.arrival, second.arrival);
            if best_pair.as_ref().is_none_or(|(best, _, _)| key < *best) {
                best_pair = Some((key, first, second));
            }
        }
    }
    Some(match best_pair {
        Some((_, forward, reverse)) => Selection::Disjoint { forward: forward.clone(), reverse: reverse.clone() },
        None => Selection::Single(best.clone()),
    })
}

/// A new path for one role of a discovery whose other role's path stays
/// (`kept`): select_pair's rules with one member fixed. Of the candidates
/// at most `length_slack` hops longer than the shortest, the least
/// contended with no relay in common with `kept`; without one, the least
/// contended of them (the two directions then share relays, as a single
/// path would).
pub fn select_partner(candidates: &[Candidate], kept: &[Ipv4Addr], length_slack: usize) -> Option<Candidate> {
    let shortest = candidates.iter().map(Candidate::hops).min()?;
    let similar = || candidates.iter().filter(move |c| c.hops() <= shortest + length_slack);
    let kept_relays = &kept[1..kept.len() - 1];
    similar()
        .filter(|c| c.disjoint_from(kept_relays))
        .min_by_key(|c| c.rank())
        .or_else(|| similar().min_by_key(|c| c.rank()))
        .cloned()
}

/// A replacement for a path that became too contended: disjoint from the
/// pair's other path (`avoid`: its relays), at most `max_hops` long and
/// less contended than `below`; the least contended such. For a broken
/// path (`below` None) any length will do, and without a disjoint one the
/// least contended of all.
pub fn select_replacement(
    candidates: &[Candidate],
    avoid: &[Ipv4Addr],
    max_hops: usize,
    below: Option<u32>,
) -> Option<Candidate> {
    let best = |eligible: &dyn Fn(&Candidate) -> bool| candidates.iter().filter(|c| eligible(c)).min_by_key(|c| c.rank()).cloned();
    match below {
        Some(limit) => best(&|c| c.disjoint_from(avoid) && c.hops() <= max_hops && c.contention < limit),
        None => best(&|c| c.disjoint_from(avoid)).or_else(|| best(&|_| true)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(last: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 0, last)
    }

    fn candidate(relays: &[u8], contention: u32, arrival: usize) -> Candidate {
        let mut path = vec![a(1)];
        path.extend(relays.iter().map(|&r| a(r)));
        path.push(a(99));
        Candidate { path, contention, arrival }
    }

    /// The paper's Fig. 2: D holds three disjoint routes i, j, k; it takes
    /// the two with the least contention sums, i and k, and sends data over
    /// k, the less contended.
    #[test]
    fn fig2_three_disjoint_routes_pick_the_two_least_contended() {
        let i = candidate(&[10, 11, 12], 900, 0);
        let j = candidate(&[20, 21], 1400, 1);
        let k = candidate(&[30, 31, 32], 500, 2);
        let selection = select_pair(&[i.clone(), j, k.clone()], 1).unwrap();
        assert_eq!(selection, Selection::Disjoint { forward: k, reverse: i });
    }

    #[test]
    fn the_least_contended_pair_wins_over_the_least_contended_path() {
        // p is the best path but shares a relay with both others; q and r are disjoint.
        let p = candidate(&[10, 20], 100, 0);
        let q = candidate(&[10, 11], 300, 1);
        let r = candidate(&[20, 21], 400, 2);
        assert_eq!(select_pair(&[p, q.clone(), r.clone()], 1).unwrap(), Selection::Disjoint { forward: q, reverse: r });
    }

    #[test]
    fn without_disjoint_routes_the_least_contended_single_route_is_used() {
        let p = candidate(&[10, 11], 700, 0);
        let q = candidate(&[12, 11], 300, 1);
        let r = candidate(&[10, 12], 300, 2);
        assert_eq!(select_pair(&[p, q.clone(), r], 1).unwrap(), Selection::Single(q));
        assert_eq!(select_pair(&[], 1), None);
    }

    #[test]
    fn ties_go_to_fewer_hops_then_to_the_earlier_arrival() {
        let long = candidate(&[10, 11, 12], 300, 0);
        let short = candidate(&[20, 21], 300, 1);
        let late = candidate(&[30, 31], 300, 2);
        assert_eq!(
            select_pair(&[long, short.clone(), late.clone()], 1).unwrap(),
            Selection::Disjoint { forward: short, reverse: late }
        );
    }

    #[test]
    fn detours_longer_than_the_slack_take_no_part() {
        // An idle 6-hop detour and an idle 5-hop one against two busier 2-hop paths.
        let detour = candidate(&[10, 11, 12, 13, 14], 0, 2);
        let other_detour = candidate(&[20, 21, 22, 23], 0, 3);
        let short = candidate(&[30], 800, 0);
        let other_short = candidate(&[40, 41], 900, 1);
        let all = [detour.clone(), other_detour.clone(), short.clone(), other_short.clone()];
        assert_eq!(select_pair(&all, 1).unwrap(), Selection::Disjoint { forward: short, reverse: other_short });
        assert_eq!(select_pair(&all, 4).unwrap(), Selection::Disjoint { forward: other_detour, reverse: detour });
    }

    #[test]
    fn neighbours_use_the_direct_link_both_ways() {
        let direct = candidate(&[], 0, 1);
        let around = candidate(&[10], 0, 0);
        assert_eq!(select_pair(&[around, direct.clone()], 1).unwrap(), Selection::Single(direct));
    }

    #[test]
    fn a_partner_is_disjoint_from_the_kept_path_and_similarly_long() {
        let kept = candidate(&[10, 11], 900, 0);
        let shares = candidate(&[11, 20], 100, 1);
        let detour = candidate(&[30, 31, 32, 33], 0, 2);
        let disjoint = candidate(&[40, 41], 500, 3);
        let all = [shares.clone(), detour, disjoint.clone()];
        assert_eq!(select_partner(&all, &kept.path, 1), Some(disjoint));
        assert_eq!(select_partner(std::slice::from_ref(&shares), &kept.path, 1), Some(shares), "none disjoint: the best of all");
        assert_eq!(select_partner(&[], &kept.path, 1), None);
    }

    #[test]
    fn a_replacement_is_disjoint_similarly_long_and_less_contended() {
        let other_path = [a(10), a(11)];
        let shares = candidate(&[10, 40], 100, 0);
        let too_long = candidate(&[50, 51, 52, 53], 100, 1);
        let hotter = candidate(&[60, 61], 900, 2);
        let good = candidate(&[70, 71, 72], 400, 3);
        let all = [shares.clone(), too_long, hotter, good.clone()];
        assert_eq!(select_replacement(&all, &other_path, 4, Some(800)), Some(good.clone()));
        assert_eq!(select_replacement(&all, &other_path, 4, Some(300)), None, "nothing below the current 3.00");
        // Broken: any disjoint length; then anything.
        assert_eq!(select_replacement(&all, &other_path, 3, None).unwrap().contention, 100);
        assert_eq!(select_replacement(std::slice::from_ref(&shares), &other_path, 3, None), Some(shares.clone()));
    }
}
