//! What a lead that leaves its team behind leaves: the teammates and their states and,
//! for each, what its branch and clone hold that the lead's HEAD lacks (unmerged
//! commits, uncommitted and git-ignored files, and where), with the commands that merge
//! or delete it all. A `roo-lead -p` run prints it when it ends with its team still
//! bound (no TeamDelete) and for a team its TeamCreate found left by an earlier run; the
//! interactive lead when the person leaves with a team. Nothing is hidden by an exit
//! that looks clean.
//!
//! Everything read here was written by teammates (the roster, their clones): a clone is
//! read only through [`LeadRepo::left_work`] (the fetch guard first, then git with hooks
//! and fsmonitor off, confined to the clone), and the lines are plain text that the
//! caller escapes for the terminal.

use std::path::{Path, PathBuf};

use roo_store::{MemberState, Name, Team};

use super::status::TeamStatus;
use crate::backend::iterm2::commands::sh_quote;
use crate::worktree::{Discovered, Git, LeadRepo, LeftWork, short, summarize_files};

/// A team left behind and what each teammate holds.
#[derive(Debug, Clone)]
pub struct LeftTeam {
    pub team: Name,
    /// The lead's repository, where the teammates' branches are (`None`: the lead works
    /// in no git repository, and the teammates worked in its directory).
    pub project: Option<PathBuf>,
    pub members: Vec<LeftMember>,
}

/// One teammate of a left team.
#[derive(Debug, Clone)]
pub struct LeftMember {
    pub name: Name,
    pub state: MemberState,
    /// What it holds (`Ok(None)`: no repository to look in); `Err`: why it could not be
    /// read.
    pub work: Result<Option<LeftWork>, String>,
}

impl LeftTeam {
    /// Reads what `team` holds, its teammates' work looked for in the git repository of
    /// `cwd` (blocking: git runs).
    pub fn read(team: &Team, cwd: &Path, git: &Git) -> roo_store::Result<LeftTeam> {
        let status = TeamStatus::read(team)?;
        let repo = match LeadRepo::discover(cwd, git) {
            Ok(Discovered::Repo(repo)) => Ok(Some(repo)),
            Ok(Discovered::Shared { .. }) => Ok(None),
            Err(e) => Err(e.to_string()),
        };
        let members = status
            .members
            .iter()
            .map(|m| LeftMember {
                name: m.name.clone(),
                state: m.state,
                work: match &repo {
                    Ok(Some(repo)) => repo
                        .left_work(team.name(), &m.name)
                        .map(Some)
                        .map_err(|e| e.to_string()),
                    Ok(None) => Ok(None),
                    Err(e) => Err(e.clone()),
                },
            })
            .collect();
        Ok(LeftTeam {
            team: team.name().clone(),
            project: repo.ok().flatten().map(|r| r.root().to_path_buf()),
            members,
        })
    }

    /// The report, one line each (not escaped): `header` first, then each teammate, then
    /// the commands that merge and delete.
    pub fn lines(&self, header: &str) -> Vec<String> {
        let team = &self.team;
        let mut lines = vec![header.to_string()];
        if self.members.is_empty() {
            lines.push("  no teammates".to_string());
        }
        let mut branches = Vec::new();
        let mut clones = Vec::new();
        let mut files_left = false;
        for member in &self.members {
            let what = match &member.work {
                Ok(Some(work)) => {
                    if work.changes.unmerged_count > 0 {
                        branches.push((member.name.clone(), work.branch.clone()));
                    }
                    if let Some(clone) = &work.clone {
                        clones.push(clone.clone());
                    }
                    files_left |= work.changes.uncommitted_count > 0 || !work.ignored.is_empty();
                    work_text(work)
                }
                Ok(None) if member.state == MemberState::NotStarted => {
                    "it never started".to_string()
                }
                Ok(None) => "no clone: it works in the lead's directory, which is no git \
                             repository"
                    .to_string(),
                Err(e) => format!("its work could not be read: {e}"),
            };
            lines.push(format!("  {} ({}): {what}", member.name, member.state));
        }
        let project = self
            .project
            .as_ref()
            .map(|p| shell_word(&p.display().to_string()));
        if let Some(project) = &project
            && !branches.is_empty()
        {
            let names: Vec<String> = branches.iter().map(|(n, _)| n.to_string()).collect();
            lines.push(format!(
                "to merge: let a lead merge with its checks: `roo-lead --team {team} -p {}`; \
                 or review and merge by hand: {}",
                sh_quote(&format!(
                    "Merge the branches of {} with TeamMerge, then delete the team with \
                     TeamDelete",
                    names.join(", ")
                )),
                branches
                    .iter()
                    .map(|(_, b)| format!(
                        "`git -C {project} log -p HEAD..{b}`, `git -C {project} merge {b}`"
                    ))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        if files_left {
            lines.push(
                "uncommitted and git-ignored files are in no commit: copy what you need out \
                 of the clone by hand (its git config is the teammate's: run no git in it)"
                    .to_string(),
            );
        }
        let mut delete = format!(
            "to delete: `roo-mail team delete --team {team}` (the team's files; add \
             `--force` while teammates run)"
        );
        if !clones.is_empty() {
            let removals: Vec<String> = clones
                .iter()
                .map(|c| format!("`rm -rf {}`", shell_word(&c.display().to_string())))
                .collect();
            delete.push_str(&format!(
                ", then each clone once nothing in it is needed: {}",
                removals.join(", ")
            ));
        }
        if let Some(project) = &project {
            let all: Vec<String> = self
                .members
                .iter()
                .filter_map(|m| m.work.as_ref().ok()?.as_ref().map(|w| w.branch.clone()))
                .collect();
            if !all.is_empty() {
                delete.push_str(&format!(
                    ", and the branches: `git -C {project} branch -D {}`",
                    all.join(" ")
                ));
            }
        }
        lines.push(delete);
        lines.push(format!(
            "or resume it: `roo-lead --team {team}`{}",
            if clones.is_empty() {
                ""
            } else {
                " (TeamDelete there removes the clones that hold nothing the lead's branch \
                 lacks)"
            }
        ));
        lines
    }
}

/// What one teammate's branch and clone hold.
fn work_text(work: &LeftWork) -> String {
    let mut parts = Vec::new();
    let changes = &work.changes;
    if changes.unmerged_count > 0 {
        let subjects: Vec<String> = changes
            .unmerged
            .iter()
            .take(3)
            .map(|c| format!("{} {}", short(&c.id), c.subject))
            .collect();
        parts.push(format!(
            "{} unmerged commit(s) on branch {} ({}{})",
            changes.unmerged_count,
            work.branch,
            subjects.join("; "),
            if changes.unmerged_count > 3 {
                "; …"
            } else {
                ""
            }
        ));
    }
    if let Some(clone) = &work.clone {
        let mut files = Vec::new();
        if changes.uncommitted_count > 0 {
            files.push(format!(
                "{} uncommitted file(s) ({})",
                changes.uncommitted_count,
                summarize_files(&changes.uncommitted)
            ));
        }
        if !work.ignored.is_empty() {
            files.push(format!(
                "git-ignored files ({})",
                summarize_files(&work.ignored)
            ));
        }
        if files.is_empty() {
            parts.push(format!("clone {}", clone.display()));
        } else {
            parts.push(format!(
                "in clone {}: {}",
                clone.display(),
                files.join(", ")
            ));
        }
    }
    if let Some(why) = &work.unread {
        parts.push(format!("not all of it could be read: {why}"));
    }
    if work.changes.is_empty() && work.ignored.is_empty() && work.unread.is_none() {
        parts.insert(0, "nothing the lead's branch lacks".to_string());
    }
    parts.join("; ")
}

/// `word` as it can be pasted into a shell: as it is when it holds only characters no
/// shell treats specially, else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%=,".contains(c));
    if plain {
        word.to_string()
    } else {
        sh_quote(word)
    }
}
