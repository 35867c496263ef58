//! Rewinding a stopped teammate's clone (`TaskStop` with `rewind_to`): the teammate
//! recorded checkpoints in its own clone as it worked ([`roo_agent::Checkpoints`], under
//! the team's `ROO_HOME`); once its run has ended, the lead puts the files it changed back
//! to before one of its prompts, or lists them. Files it did not change are never touched.
//! A teammate on another host, or one working in the lead's own directory, has no clone
//! here to rewind.

use std::time::{Duration, Instant};

use roo_agent::Checkpoints;
use roo_store::{MemberState, Name};

use super::Spawner;

/// How long a rewind waits for a stopped teammate's run to end (its call in flight).
const RUN_END_WAIT: Duration = Duration::from_secs(10);

impl Spawner {
    /// After `name` was stopped: waits (bounded) until its run has ended, then puts the
    /// files it changed in its clone back to before its prompt `number`, or with 0 lists
    /// its prompts with the files each changed. Blocking.
    pub fn rewind_clone(&self, name: &Name, number: usize) -> Result<String, String> {
        let binding = self.lead_binding().map_err(|e| e.to_string())?;
        let what = format!("rewind {name}'s clone");
        let deadline = Instant::now() + RUN_END_WAIT;
        let member = loop {
            let config = binding.team.config().map_err(|e| format!("{what}: {e}"))?;
            let member = config
                .member(name.as_str())
                .cloned()
                .ok_or_else(|| format!("{what}: no member {name} in the team"))?;
            let busy = self.is_running(name) || member.observed_state() == MemberState::Busy;
            if !busy {
                break member;
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{what}: its run has not ended {} s after the stop; try again",
                    RUN_END_WAIT.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // Where its clone is comes from this lead's own record of the start, never from
        // the roster: a teammate can rewrite its own entry (`host`, `worktree_path`) to
        // point the user's rewind at another directory with checkpoints.
        let Some((host, own_clone)) = self.recorded_clone(binding.team.name(), name) else {
            return Err(format!(
                "{what}: this lead did not start it, so it has no record of its clone \
                 (the roster, which a teammate can write, is not trusted for this)"
            ));
        };
        if let Some(host) = host {
            return Err(format!(
                "{what}: it works on host {host}, where its checkpoints are"
            ));
        }
        let Some(clone) = own_clone else {
            return Err(format!(
                "{what}: it works in your directory, not a clone of its own"
            ));
        };
        let same = |a: &std::path::Path, b: &std::path::Path| {
            a == b
                || matches!(
                    (std::fs::canonicalize(a), std::fs::canonicalize(b)),
                    (Ok(x), Ok(y)) if x == y
                )
        };
        let disagrees = member.host.is_some()
            || member
                .worktree_path
                .as_deref()
                .is_some_and(|recorded| !same(recorded, &clone));
        if disagrees {
            return Err(format!(
                "{what}: refused: the roster says it works in {}, but you started it in {} \
                 (a teammate can rewrite its own roster entry); nothing was rewound",
                match (&member.host, &member.worktree_path) {
                    (Some(h), Some(p)) => format!("{} on host {h}", p.display()),
                    (Some(h), None) => format!("host {h}"),
                    (None, Some(p)) => p.display().to_string(),
                    (None, None) => "your directory".to_string(),
                },
                clone.display()
            ));
        }
        let root = std::fs::canonicalize(&clone)
            .map_err(|e| format!("{what}: {}: {e}", clone.display()))?;
        let checkpoints = Checkpoints::open_latest(binding.team.home().root(), &root)
            .map_err(|e| format!("{what}: {e}"))?;
        if number == 0 {
            return Ok(format!(
                "{name}'s checkpoints in {}:\n{}",
                root.display(),
                checkpoints.describe()
            ));
        }
        let report = checkpoints
            .rewind_code(number)
            .map_err(|e| format!("{what}: {e}"))?;
        Ok(format!(
            "rewound {name}'s clone {} to before its prompt {number}:\n{}",
            root.display(),
            report.describe()
        ))
    }
}
