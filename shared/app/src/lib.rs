//! Interaction layer of `roo-lead` and `roo-worker`.

pub mod lead {
    //! `roo-lead`.
    /// Entry point of the `roo-lead` binary.
    pub fn main() -> std::process::ExitCode {
        eprintln!("roo-lead: not built yet");
        std::process::ExitCode::from(2)
    }
}

pub mod worker {
    //! `roo-worker`.
    /// Entry point of the `roo-worker` binary.
    pub fn main() -> std::process::ExitCode {
        eprintln!("roo-worker: not built yet");
        std::process::ExitCode::from(2)
    }
}
