//! Keys of the running-job indexes (`preemptible`, `by_end`): a number
//! then a job, ordered as the tuple `(number, job)`, that can be looked up
//! and removed by `(number, &str)` without copying the job key (every
//! start and exit touches these indexes).

use std::borrow::Borrow;
use std::cmp::Ordering;

use crate::model::JobKey;

/// `(n, job)`, ordered by `n`, then the job key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ByJob<N> {
    pub n: N,
    pub job: JobKey,
}

impl<N> ByJob<N> {
    pub fn new(n: N, job: &str) -> ByJob<N> {
        ByJob {
            n,
            job: job.to_string(),
        }
    }
}

/// A borrowed view of a [`ByJob`] key, to look one up.
pub(crate) trait JobView<N> {
    fn view(&self) -> (N, &str);
}

impl<N: Copy> JobView<N> for ByJob<N> {
    fn view(&self) -> (N, &str) {
        (self.n, &self.job)
    }
}

impl<N: Copy> JobView<N> for (N, &str) {
    fn view(&self) -> (N, &str) {
        (self.0, self.1)
    }
}

impl<'a, N: Copy + 'a> Borrow<dyn JobView<N> + 'a> for ByJob<N> {
    fn borrow(&self) -> &(dyn JobView<N> + 'a) {
        self
    }
}

// The same order as `ByJob`'s derived one: `n`, then the job key's bytes.
impl<N: Ord + Copy> Ord for dyn JobView<N> + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        self.view().cmp(&other.view())
    }
}

impl<N: Ord + Copy> PartialOrd for dyn JobView<N> + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<N: Ord + Copy> PartialEq for dyn JobView<N> + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.view() == other.view()
    }
}

impl<N: Ord + Copy> Eq for dyn JobView<N> + '_ {}

/// The borrowed key `(n, job)` for a lookup.
pub(crate) fn key<'a, N: Copy + 'a>(n: N, job: &'a str) -> impl JobView<N> + 'a {
    (n, job)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn borrowed_lookup_finds_and_orders_like_the_tuple() {
        let keys = [(2, "b"), (1, "zz"), (2, "a"), (1, "z"), (2, "ab")];
        let set: BTreeSet<ByJob<i32>> = keys.iter().map(|&(n, j)| ByJob::new(n, j)).collect();
        let tuples: BTreeSet<(i32, &str)> = keys.iter().copied().collect();
        let order: Vec<(i32, &str)> = set.iter().map(|k| (k.n, k.job.as_str())).collect();
        assert_eq!(order, tuples.into_iter().collect::<Vec<_>>());
        for (n, j) in keys {
            assert!(set.contains(&key(n, j) as &dyn JobView<i32>));
        }
        assert!(!set.contains(&key(2, "c") as &dyn JobView<i32>));
        assert!(!set.contains(&key(3, "a") as &dyn JobView<i32>));
    }
}
