//! `roo-mail`: the mailbox CLI. All logic lives in `roo_cli::mail`.
fn main() -> std::process::ExitCode {
    roo_cli::mail::main()
}
