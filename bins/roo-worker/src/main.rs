//! `roo-worker`: one teammate process. All logic lives in `roo_app::worker`.
fn main() -> std::process::ExitCode {
    roo_app::worker::main()
}
