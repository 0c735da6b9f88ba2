//! The requirement graph of a workflow, by job index (file order).

use crate::need::Need;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Graph {
    /// `requires[j]`: the jobs `j` requires and what it needs of each, in
    /// file order. No job twice, never `j` itself.
    pub requires: Vec<Vec<(usize, Need)>>,
    /// `dependents[x]`: the jobs that require `x` and what they need of it,
    /// in file order.
    pub dependents: Vec<Vec<(usize, Need)>>,
}

impl Graph {
    pub fn new(requires: Vec<Vec<(usize, Need)>>) -> Graph {
        let mut dependents = vec![Vec::new(); requires.len()];
        for (j, reqs) in requires.iter().enumerate() {
            for &(x, need) in reqs {
                dependents[x].push((j, need));
            }
        }
        Graph {
            requires,
            dependents,
        }
    }

    pub fn len(&self) -> usize {
        self.requires.len()
    }

    /// Every job after the jobs it requires (Kahn's algorithm, ties in
    /// file order); `Err` with the jobs left over, each on a cycle or
    /// behind one, when there is a cycle.
    pub fn order(&self) -> Result<Vec<usize>, Vec<usize>> {
        let n = self.len();
        let mut waiting: Vec<usize> = self.requires.iter().map(Vec::len).collect();
        let mut order: Vec<usize> = (0..n).filter(|&j| waiting[j] == 0).collect();
        let mut next = 0;
        while next < order.len() {
            let x = order[next];
            next += 1;
            for &(y, _) in &self.dependents[x] {
                waiting[y] -= 1;
                if waiting[y] == 0 {
                    order.push(y);
                }
            }
        }
        if order.len() == n {
            Ok(order)
        } else {
            Err((0..n).filter(|&j| waiting[j] > 0).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_puts_requirements_first() {
        let g = Graph::new(vec![
            vec![(2, Need::Any)],
            vec![],
            vec![(1, Need::Completed)],
        ]);
        assert_eq!(g.order(), Ok(vec![1, 2, 0]));
        assert_eq!(g.dependents[1], vec![(2, Need::Completed)]);
    }

    #[test]
    fn order_reports_what_is_left_by_a_cycle() {
        // 0 ⇄ 1, 2 behind them, 3 free.
        let g = Graph::new(vec![
            vec![(1, Need::Any)],
            vec![(0, Need::Any)],
            vec![(0, Need::Any)],
            vec![],
        ]);
        assert_eq!(g.order(), Err(vec![0, 1, 2]));
    }
}
