//! The CLIs inside a confined command: relayed to the agent, and what the agent
//! lets them do.
//!
//! A command an agent runs sees none of the team's files; `roo-mail` and `roo-task`
//! there find [`roo_store::relay::ENV_FD`] and hand their arguments and stdio to
//! the agent ([`crate::forward`]), which runs them as itself after [`check`]. This
//! module is the agent's side: it parses the forwarded arguments with each CLI's
//! own commands and decides what the agent lets them do.

use clap::Parser;
use roo_store::relay::Request;

use crate::mail::{MailCli, MailCommand};
use crate::task::{TaskCli, TaskCommand};
use crate::team::TeamCommand;

/// Who the relaying agent is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its team, if it is in one now.
    pub team: Option<String>,
    /// Its member name, if it is in a team.
    pub name: Option<String>,
    /// Whether it leads the team.
    pub lead: bool,
}

/// Whether `me` may run `request`: only as itself, only on its own team. A
/// teammate gets what a teammate's work needs — mail, reading the team, creating,
/// claiming, updating and renewing tasks, adding usage — and nothing that acts on
/// others' work or the team itself (`--force`, `assign`, `delete`, `reclaim`,
/// `doctor --acknowledge`, membership); which tasks it may create, update or renew,
/// and how, the store decides with its name ([`roo_store::authority::may`]). No
/// agent's command deletes a team (the lead has its TeamDelete tool, which shuts
/// the team down first). Arguments that do not parse pass: the CLI itself rejects
/// them without touching anything.
pub fn check(request: &Request, me: &Member) -> Result<(), String> {
    let argv = std::iter::once(request.program.clone()).chain(request.args.iter().cloned());
    let lead_only = |what: &str| Err(format!("{what} is the lead's to do, not a teammate's"));
    let common = match request.program.as_str() {
        "roo-mail" => match MailCli::try_parse_from(argv) {
            Ok(cli) => {
                match &cli.command {
                    MailCommand::Team(command) => check_team_command(command, me)?,
                    MailCommand::Doctor { acknowledge: true } if !me.lead => {
                        return lead_only("acknowledging quarantined data");
                    }
                    _ => {}
                }
                cli.common
            }
            Err(_) => return Ok(()),
        },
        "roo-task" => match TaskCli::try_parse_from(argv) {
            Ok(cli) => {
                if let TaskCommand::Team(command) = &cli.command {
                    check_team_command(command, me)?;
                }
                if !me.lead {
                    match &cli.command {
                        TaskCommand::Create { .. }
                        | TaskCommand::List { .. }
                        | TaskCommand::Get { .. }
                        | TaskCommand::Claim { .. }
                        | TaskCommand::Renew { .. }
                        | TaskCommand::Ready
                        | TaskCommand::AddUsage { .. }
                        | TaskCommand::Team(_)
                        | TaskCommand::Doctor { acknowledge: false } => {}
                        TaskCommand::Update(args) if !args.force => {}
                        TaskCommand::Update(_) => {
                            return lead_only("`--force` on another member's task");
                        }
                        TaskCommand::Assign { .. } => return lead_only("assigning tasks"),
                        TaskCommand::Delete { .. } => return lead_only("deleting tasks"),
                        TaskCommand::Reclaim => return lead_only("reclaiming tasks"),
                        TaskCommand::Doctor { acknowledge: true } => {
                            return lead_only("acknowledging quarantined data");
                        }
                    }
                }
                cli.common
            }
            Err(_) => return Ok(()),
        },
        other => return Err(format!("{other:?} is not a command the agent relays")),
    };
    if let Some(team) = &common.team
        && me.team.as_ref() != Some(team)
    {
        return Err(match &me.team {
            Some(own) => {
                format!("commands in this agent's shell act on its own team {own} only, not {team}")
            }
            None => format!("this agent is in no team; it cannot act on team {team}"),
        });
    }
    if let Some(name) = &common.agent
        && me.name.as_ref() != Some(name)
    {
        return Err(match &me.name {
            Some(own) => {
                format!("commands in {own}'s shell act as {own}; `--as {name}` is refused")
            }
            None => format!("this agent is in no team; it cannot act as {name}"),
        });
    }
    Ok(())
}

fn check_team_command(command: &TeamCommand, me: &Member) -> Result<(), String> {
    match command {
        TeamCommand::Show => Ok(()),
        TeamCommand::Delete { .. } => Err(
            "a team is not deleted from an agent's command; the lead uses its TeamDelete tool, \
             which shuts the teammates down first"
                .into(),
        ),
        TeamCommand::GcHosts { .. } => Err(
            "clones on other hosts are not removed from an agent's command; the lead's \
             TeamDelete removes merged ones, and a person runs roo-mail team gc-hosts"
                .into(),
        ),
        _ if me.lead => Ok(()),
        _ => Err("a teammate's commands may not change the team's membership".into()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn request(program: &str, args: &[&str]) -> Request {
        Request {
            program: program.to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
            cwd: "/".into(),
        }
    }

    fn member(name: &str, lead: bool) -> Member {
        Member {
            team: Some("t".into()),
            name: Some(name.into()),
            lead,
        }
    }

    #[test]
    fn a_teammate_acts_as_itself_on_its_own_team_within_its_own_work() {
        let carol = member("carol", false);
        for ok in [
            &["send", "--to", "bob", "--summary", "a b c d e", "hi"][..],
            &["read", "--unread"],
            &["team", "show"],
            &["doctor"],
            &[
                "send",
                "--as",
                "carol",
                "--to",
                "bob",
                "--summary",
                "a b c d e",
                "x",
            ],
            &[
                "send",
                "--to",
                "bob",
                "--summary",
                "a b c d e",
                "--",
                "--as lead",
            ],
        ] {
            assert_eq!(check(&request("roo-mail", ok), &carol), Ok(()), "{ok:?}");
        }
        for ok in [
            &["list"][..],
            &["claim", "1"],
            &["update", "1", "--status", "completed"],
            &["create", "--subject", "more"],
            &["ready"],
            &["team", "show"],
        ] {
            assert_eq!(check(&request("roo-task", ok), &carol), Ok(()), "{ok:?}");
        }
        for bad in [
            &[
                "send",
                "--as",
                "lead",
                "--to",
                "bob",
                "--summary",
                "a b c d e",
                "x",
            ][..],
            &[
                "send",
                "--as=lead",
                "--to",
                "bob",
                "--summary",
                "a b c d e",
                "x",
            ],
            &[
                "--from",
                "lead",
                "send",
                "--to",
                "bob",
                "--summary",
                "a b c d e",
                "x",
            ],
            &[
                "send",
                "--team",
                "other",
                "--to",
                "bob",
                "--summary",
                "a b c d e",
                "x",
            ],
            &["team", "delete", "--force"],
            &["team", "add", "eve"],
            &["doctor", "--acknowledge"],
        ] {
            assert!(check(&request("roo-mail", bad), &carol).is_err(), "{bad:?}");
        }
        for bad in [
            &["delete", "2", "--force"][..],
            &["delete", "2"],
            &["assign", "2", "bob", "--force"],
            &["update", "2", "--status", "pending", "--force"],
            &["reclaim"],
            &["doctor", "--acknowledge"],
            &["team", "add", "eve"],
            &["team", "join", "eve"],
            &["team", "mark-dead", "bob", "--reason", "x"],
            &["team", "delete", "--force"],
        ] {
            assert!(check(&request("roo-task", bad), &carol).is_err(), "{bad:?}");
        }
        assert!(check(&request("sh", &["-c", "x"]), &carol).is_err());
    }

    #[test]
    fn the_lead_may_manage_its_team_but_not_delete_it_from_a_command() {
        let lead = member("lead", true);
        assert_eq!(
            check(&request("roo-task", &["delete", "2", "--force"]), &lead),
            Ok(())
        );
        assert_eq!(check(&request("roo-task", &["reclaim"]), &lead), Ok(()));
        assert!(check(&request("roo-mail", &["team", "delete"]), &lead).is_err());
        assert!(check(&request("roo-task", &["team", "delete"]), &lead).is_err());
        assert_eq!(
            check(&request("roo-task", &["team", "add", "eve"]), &lead),
            Ok(())
        );
        assert!(
            check(
                &request("roo-mail", &["send", "--as", "bob", "--to", "x", "hi"]),
                &lead
            )
            .is_err()
        );
    }
}
