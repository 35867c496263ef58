//! [`ToolKind`]: what kind of effect a call has, plain data the permission mode
//! decides on without knowing the tool interface.

/// What kind of effect a call has; the permission mode decides on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    /// Reads files or state only (ReadFile, Glob, Grep).
    Read,
    /// Writes files (WriteFile, EditFile).
    Write,
    /// Runs commands (Bash).
    Execute,
    /// Touches no files and runs nothing outside the agent (plan mode, task and
    /// message tools). Always allowed by the mode layer.
    Internal,
}
