//! `roo-task`: the task-list CLI. All logic lives in `roo_cli::task`; the team runtime
//! lends it the removal of teammates' clones on other hosts (`team gc-hosts`, `team
//! delete`).
fn main() -> std::process::ExitCode {
    roo_cli::hosts::install(Box::new(roo_team::worktree::remote_gc::RuntimeCleaner));
    roo_cli::task::main()
}
