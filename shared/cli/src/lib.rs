//! The `roo-mail` and `roo-task` command-line interfaces.

pub mod mail {
    //! `roo-mail`.
    /// Entry point of the `roo-mail` binary.
    pub fn main() -> std::process::ExitCode {
        eprintln!("roo-mail: not built yet");
        std::process::ExitCode::from(2)
    }
}

pub mod task {
    //! `roo-task`.
    /// Entry point of the `roo-task` binary.
    pub fn main() -> std::process::ExitCode {
        eprintln!("roo-task: not built yet");
        std::process::ExitCode::from(2)
    }
}
