//! Test modules.
mod cli_mail;
mod cli_task;
mod lead_headless;
mod lead_interactive;
mod sandbox;
mod store_concurrency;
mod store_crash;
mod store_files;
