//! `roo-mail`: the mailbox CLI. All logic lives in `roo_cli::mail`; the team runtime
//! lends it the removal of teammates' clones on other hosts (`team gc-hosts`, `team
//! delete`).
fn main() -> std::process::ExitCode {
    roo_cli::hosts::install(Box::new(roo_team::worktree::remote_gc::RuntimeCleaner));
    roo_cli::mail::main()
}
