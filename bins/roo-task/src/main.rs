//! `roo-task`: the task-list CLI. All logic lives in `roo_cli::task`.
fn main() -> std::process::ExitCode {
    roo_cli::task::main()
}
