//! The team runtime: what turns one agent into a team (DESIGN.md §3–§4).
//!
//! It sits above `roo-agent` (the loop, tools, permissions) and `roo-store` (inboxes,
//! task list, team config) and joins them: the teammate loop shared by `roo-worker` and
//! in-process teammates, the inbox router, the lead's team tools, worktrees and liveness.
//! The store stays free of LLM knowledge and the agent free of team knowledge.

pub mod worktree;
