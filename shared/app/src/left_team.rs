//! The notice of a team a lead leaves behind, on stderr: a `-p` run that ends with its
//! team still bound (no TeamDelete) or whose TeamCreate found a team left by an earlier
//! run, and the interactive lead the person leaves with a team, say what is left —
//! teammates and their states, unmerged commits, uncommitted and git-ignored files and
//! where — and the commands that merge or delete it ([`roo_team::lead::LeftTeam`]).
//! The git that reads the teammates' clones runs in the lead's command sandbox, as its
//! team tools' does; every line is escaped for the terminal (names, commit subjects and
//! file names come from teammates).

use roo_agent::tool::ToolContext;
use roo_store::Team;
use roo_team::lead::LeftTeam;
use roo_team::worktree::Git;

use crate::render::Style;

/// The notice's lines for `team` under `header` (not escaped yet: [`print`] does).
pub async fn lines(team: Team, context: &ToolContext, header: String) -> Vec<String> {
    let git = Git::new().in_launcher_of(&context.launcher);
    let cwd = context.cwd.clone();
    let name = team.name().clone();
    let read = tokio::task::spawn_blocking(move || LeftTeam::read(&team, &cwd, &git)).await;
    match read {
        Ok(Ok(left)) => left.lines(&header),
        Ok(Err(e)) => vec![
            header,
            format!("  the team could not be read: {e}"),
            format!("  {}", roo_team::tools::left_team_advice(&name)),
        ],
        Err(e) => vec![header, format!("  the team could not be read: {e}")],
    }
}

/// Prints `lines` on stderr, escaped, each prefixed like `roo-lead`'s other messages.
pub fn print(lines: &[String], style: Style) {
    for (i, line) in lines.iter().enumerate() {
        let line = roo_term::escape(line);
        if i == 0 {
            eprintln!("roo-lead: {}", style.yellow(&line));
        } else {
            eprintln!("roo-lead: {line}");
        }
    }
}

/// The header of a team this run leaves behind.
pub fn left_header(team: &roo_store::Name) -> String {
    format!(
        "team {team} is left behind: the lead ended without deleting it (TeamDelete); it \
         holds:"
    )
}

/// The header of a team an earlier run left, which this run's TeamCreate found in its way.
pub fn taken_header(team: &roo_store::Name) -> String {
    format!(
        "team {team} was left by an earlier run, so this run could not create it (it does \
         not take over a team it did not start); it holds:"
    )
}
