//! Test modules.
mod cli_defects;
mod cli_mail;
mod cli_task;
mod cli_team_runtime;
mod instructions_include;
mod lead_headless;
mod lead_interactive;
mod lead_misbehaving_model;
mod lead_permissions;
mod project_trust;
mod sandbox;
mod store_concurrency;
mod store_crash;
mod store_files;
mod store_symlinks;
mod team_worker;
mod team_worktrees;
