//! `roo-lead`: the lead agent (interactive REPL or headless `-p`). All logic lives in `roo_app::lead`.
fn main() -> std::process::ExitCode {
    roo_app::lead::main()
}
