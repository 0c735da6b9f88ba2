//! The checks of a workflow's requirement graph as a whole: cycles, and
//! jobs that can never start.
//!
//! A job starts once each of its requirements holds. `JOB: ANY` holds once
//! JOB is finished in any state (canceled included), which always happens;
//! `JOB: COMPLETED` (or FAILED, STOPPED) holds only if JOB ran, so all of
//! JOB's own requirements held too. A job can therefore start in some run
//! if and only if the requirements reached from it through
//! COMPLETED/FAILED/STOPPED requirements never ask one job for two
//! different end states; every job ends in one. [`unreachable`] finds a
//! job where they do.

use std::collections::VecDeque;

use crate::graph::Graph;
use crate::need::Need;

/// A cycle among `left` (the jobs a topological sort left over): job
/// indices from the cycle's first job in file order, each requiring the
/// next, that first job repeated at the end.
pub(crate) fn cycle(g: &Graph, left: &[usize]) -> Vec<usize> {
    let mut is_left = vec![false; g.len()];
    for &j in left {
        is_left[j] = true;
    }
    // Every left job requires a left job (else its count would have
    // dropped to zero), so a walk through left jobs goes on until it
    // repeats one.
    let mut seen_at: Vec<Option<usize>> = vec![None; g.len()];
    let mut walk = Vec::new();
    let mut v = left[0];
    let start = loop {
        if let Some(at) = seen_at[v] {
            break at;
        }
        seen_at[v] = Some(walk.len());
        walk.push(v);
        v = g.requires[v]
            .iter()
            .map(|&(x, _)| x)
            .find(|&x| is_left[x])
            .unwrap_or(v);
    };
    let mut ring = walk.split_off(start);
    let first = ring
        .iter()
        .enumerate()
        .min_by_key(|&(_, &j)| j)
        .map_or(0, |(i, _)| i);
    ring.rotate_left(first);
    ring.push(ring[0]);
    ring
}

/// A job that can never start: two requirement paths from `job` need
/// `target` to end in two different states.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Conflict {
    pub job: usize,
    pub target: usize,
    /// Each path from `job` to `target` (both included), each job
    /// requiring the next, and what the last requirement needs.
    pub first: (Vec<usize>, Need),
    pub second: (Vec<usize>, Need),
}

/// Groups of 4 bits (one per end state) per 64-bit word.
const GROUPS_PER_WORD: usize = 16;
/// Words per job in one pass: 1024 contested jobs at a time.
const WORDS: usize = 64;

fn slot(need: Need) -> Option<u32> {
    match need {
        Need::Completed => Some(0),
        Need::Failed => Some(1),
        Need::Stopped => Some(2),
        Need::Any => None,
    }
}

/// Set in a word wherever one 4-bit group holds two or more bits.
fn clash(w: u64) -> u64 {
    const LOW: u64 = 0x1111_1111_1111_1111;
    let (a, b, c) = (w & LOW, (w >> 1) & LOW, (w >> 2) & LOW);
    (a & b) | (a & c) | (b & c)
}

/// The first job in file order that can never start and whose own
/// requirements can all start (where the clash begins); `None` when every
/// job can start in some run. `order` is a topological order of `g`.
///
/// Only a job that two requirements ask for different end states
/// ("contested") can cause a clash. Each contested job gets a group of
/// bits, one per end state asked of it; walking the jobs in `order`, a
/// job's bits are the union of what it asks itself and what the jobs it
/// needs in a definite state ask, and a group with two bits set is a
/// clash. Work: O((jobs + requirements) × contested / 1024) word
/// operations, memory O(jobs × 512 bytes) at most; nothing at all when no
/// job is contested, as in most workflows.
pub(crate) fn unreachable(g: &Graph, order: &[usize]) -> Option<Conflict> {
    let n = g.len();
    let contested: Vec<usize> = (0..n)
        .filter(|&x| {
            let mut asked = 0u8;
            for &(_, need) in &g.dependents[x] {
                if let Some(s) = slot(need) {
                    asked |= 1 << s;
                }
            }
            asked.count_ones() >= 2
        })
        .collect();
    if contested.is_empty() {
        return None;
    }
    let mut group_of: Vec<Option<usize>> = vec![None; n];
    for (gi, &x) in contested.iter().enumerate() {
        group_of[x] = Some(gi);
    }
    // For each job that can never start: a target it clashes on.
    let mut clashes: Vec<Option<usize>> = vec![None; n];
    let per_pass = WORDS * GROUPS_PER_WORD;
    for pass in contested.chunks(per_pass) {
        let base = group_of[pass[0]].unwrap_or(0);
        let words = pass.len().div_ceil(GROUPS_PER_WORD);
        let mut bits = vec![0u64; n * words];
        for &j in order {
            for &(x, need) in &g.requires[j] {
                let Some(s) = slot(need) else { continue };
                if x != j {
                    let (from, to) = if x < j {
                        let (lo, hi) = bits.split_at_mut(j * words);
                        (&lo[x * words..(x + 1) * words], &mut hi[..words])
                    } else {
                        let (lo, hi) = bits.split_at_mut(x * words);
                        (&hi[..words], &mut lo[j * words..(j + 1) * words])
                    };
                    for (t, f) in to.iter_mut().zip(from) {
                        *t |= *f;
                    }
                }
                if let Some(gi) = group_of[x].filter(|gi| (base..base + pass.len()).contains(gi)) {
                    let bit = (gi - base) * 4 + s as usize;
                    bits[j * words + bit / 64] |= 1 << (bit % 64);
                }
            }
            if clashes[j].is_none() {
                let mine = &bits[j * words..(j + 1) * words];
                if let Some((wi, w)) = mine.iter().enumerate().find(|(_, w)| clash(**w) != 0) {
                    let group = wi * GROUPS_PER_WORD + clash(*w).trailing_zeros() as usize / 4;
                    clashes[j] = Some(contested[base + group]);
                }
            }
        }
    }
    let job = (0..n).find(|&j| {
        clashes[j].is_some()
            && g.requires[j]
                .iter()
                .all(|&(x, need)| need == Need::Any || clashes[x].is_none())
    })?;
    let target = clashes[job]?;
    explain(g, job, target)
}

/// Two paths from `job` through definite-state requirements to
/// requirements of `target` in different states (breadth first: the
/// shortest ones).
fn explain(g: &Graph, job: usize, target: usize) -> Option<Conflict> {
    let mut parent: Vec<Option<usize>> = vec![None; g.len()];
    let mut seen = vec![false; g.len()];
    let mut found: Vec<(usize, Need)> = Vec::new();
    let mut queue = VecDeque::from([job]);
    seen[job] = true;
    while let Some(v) = queue.pop_front() {
        for &(x, need) in &g.requires[v] {
            if need == Need::Any {
                continue;
            }
            if x == target && found.iter().all(|&(_, n)| n != need) {
                found.push((v, need));
                if found.len() == 2 {
                    let path = |mut at: usize| {
                        let mut p = vec![target, at];
                        while let Some(up) = parent[at] {
                            p.push(up);
                            at = up;
                        }
                        p.reverse();
                        p
                    };
                    return Some(Conflict {
                        job,
                        target,
                        first: (path(found[0].0), found[0].1),
                        second: (path(found[1].0), found[1].1),
                    });
                }
            }
            if !seen[x] {
                seen[x] = true;
                parent[x] = Some(v);
                queue.push_back(x);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use Need::*;

    fn graph(reqs: &[&[(usize, Need)]]) -> Graph {
        Graph::new(reqs.iter().map(|r| r.to_vec()).collect())
    }

    #[test]
    fn a_cycle_is_reported_from_its_first_job() {
        // 0 → 1 → 2 → 1 (0 is behind the cycle 1 ⇄ 2), 3 on its own.
        let g = graph(&[&[(1, Any)], &[(2, Any)], &[(1, Completed)], &[]]);
        let left = g.order().unwrap_err();
        assert_eq!(cycle(&g, &left), vec![1, 2, 1]);
    }

    #[test]
    fn two_states_asked_of_one_job_through_paths_clash() {
        // 1 needs 0 COMPLETED; 2 needs 0 FAILED; 3 needs 1 and 2 done.
        let g = graph(&[
            &[],
            &[(0, Completed)],
            &[(0, Failed)],
            &[(1, Completed), (2, Completed)],
        ]);
        let order = g.order().unwrap();
        let c = unreachable(&g, &order).unwrap();
        assert_eq!(c.job, 3);
        assert_eq!(c.target, 0);
        assert_eq!(c.first, (vec![3, 1, 0], Completed));
        assert_eq!(c.second, (vec![3, 2, 0], Failed));
    }

    #[test]
    fn any_lets_a_job_run_after_either_branch() {
        // As above, but 3 runs after 1 and 2 whatever became of them.
        let g = graph(&[
            &[],
            &[(0, Completed)],
            &[(0, Failed)],
            &[(1, Any), (2, Any)],
        ]);
        assert_eq!(unreachable(&g, &g.order().unwrap()), None);
        // One ANY is enough to break the clash.
        let g = graph(&[
            &[],
            &[(0, Completed)],
            &[(0, Failed)],
            &[(1, Completed), (2, Any)],
        ]);
        assert_eq!(unreachable(&g, &g.order().unwrap()), None);
    }

    #[test]
    fn a_direct_and_an_indirect_requirement_can_clash() {
        // 2 needs 0 STOPPED itself, and 1, which needs 0 COMPLETED.
        let g = graph(&[&[], &[(0, Completed)], &[(0, Stopped), (1, Completed)]]);
        let c = unreachable(&g, &g.order().unwrap()).unwrap();
        assert_eq!((c.job, c.target), (2, 0));
        assert_eq!(c.first, (vec![2, 0], Stopped));
        assert_eq!(c.second, (vec![2, 1, 0], Completed));
    }

    #[test]
    fn the_clash_is_reported_where_it_begins_not_downstream() {
        // 4 needs 3, which clashes: 3 is reported.
        let g = graph(&[
            &[(3, Completed)],
            &[(4, Completed)],
            &[(4, Failed)],
            &[(1, Completed), (2, Completed)],
            &[],
        ]);
        let c = unreachable(&g, &g.order().unwrap()).unwrap();
        assert_eq!((c.job, c.target), (3, 4));
    }

    #[test]
    fn contested_jobs_past_one_pass_are_checked() {
        // 3000 independent diamonds; only the last one clashes.
        let mut reqs: Vec<Vec<(usize, Need)>> = Vec::new();
        for d in 0..3000 {
            let b = reqs.len();
            let bad = d == 2999;
            reqs.push(vec![]);
            reqs.push(vec![(b, Completed)]);
            reqs.push(vec![(b, Failed)]);
            reqs.push(vec![
                (b + 1, Completed),
                (b + 2, if bad { Completed } else { Any }),
            ]);
        }
        let g = Graph::new(reqs);
        let c = unreachable(&g, &g.order().unwrap()).unwrap();
        assert_eq!((c.job, c.target), (4 * 2999 + 3, 4 * 2999));
    }
}
