//! What a list of bounded size shows first. The team state a lead's model gets back
//! after a compaction (`lead::status`) and TaskList (`task`) each have a byte budget
//! however many tasks and teammates the team holds; both rank their lines here — the
//! caller's own tasks, in progress, blocked and backlog before the rest, one owner's many
//! tasks taking turns with the others' — and keep what fits, with a count of what was
//! left out.

use roo_store::{Name, Task, TaskStatus};

/// How relevant `task` is to `me` when a list must leave some out (lower first): mine in
/// progress, mine pending, others' in progress, blocked, pending, then completed.
fn relevance(task: &Task, me: Option<&Name>) -> u8 {
    let mine = me.is_some_and(|me| task.owner.as_ref() == Some(me));
    match (task.status, mine) {
        (TaskStatus::InProgress, true) => 0,
        (TaskStatus::Pending, true) => 1,
        (TaskStatus::InProgress, false) => 2,
        (TaskStatus::Pending, false) if !task.blocked_by.is_empty() => 3,
        (TaskStatus::Pending, false) => 4,
        (TaskStatus::Completed, true) => 5,
        (TaskStatus::Completed, false) => 6,
    }
}

/// Tasks of one other owner that keep their [`relevance`] when a list must leave some
/// out; the rest of that owner's come after every other task, the owners taking turns.
const PER_OWNER_FIRST: usize = 5;

/// The rank of each of `tasks` for [`within_budget`] (lower first): its [`relevance`] to
/// `me`, except that beyond [`PER_OWNER_FIRST`] tasks of one owner other than `me` (most
/// relevant first) the rest rank last, round-robin across owners — so one teammate's
/// many tasks, in progress or not, cannot crowd `me`'s and the backlog out of the list.
pub(crate) fn task_ranks(tasks: &[&Task], me: Option<&Name>) -> Vec<(bool, usize, u8)> {
    let relevance: Vec<u8> = tasks.iter().map(|t| relevance(t, me)).collect();
    let mut order: Vec<usize> = (0..tasks.len()).collect();
    order.sort_by_key(|&i| (relevance[i], i));
    let mut per_owner: Vec<(&Name, usize)> = Vec::new();
    let mut ranks = vec![(false, 0, 0); tasks.len()];
    for i in order {
        let other = tasks[i].owner.as_ref().filter(|o| Some(*o) != me);
        let seen = other.map_or(0, |owner| {
            match per_owner.iter_mut().find(|(o, _)| *o == owner) {
                Some((_, n)) => {
                    *n += 1;
                    *n
                }
                None => {
                    per_owner.push((owner, 1));
                    1
                }
            }
        });
        ranks[i] = if seen > PER_OWNER_FIRST {
            (true, seen, relevance[i])
        } else {
            (false, 0, relevance[i])
        };
    }
    ranks
}

/// The entries of `items` (`(rank, line)`, in display order) that fit in `budget`
/// bytes (a newline each): the lowest rank first, shown in display order. Returns them
/// and how many were left out.
pub(crate) fn within_budget<K: Ord + Copy>(
    items: Vec<(K, String)>,
    budget: usize,
) -> (Vec<String>, usize) {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| (items[i].0, i));
    let mut used = 0;
    let mut keep = vec![false; items.len()];
    for i in order {
        let cost = items[i].1.len() + 1;
        if used + cost > budget {
            break;
        }
        used += cost;
        keep[i] = true;
    }
    let total = items.len();
    let kept: Vec<String> = items
        .into_iter()
        .zip(keep)
        .filter_map(|((_, line), keep)| keep.then_some(line))
        .collect();
    let left_out = total - kept.len();
    (kept, left_out)
}
