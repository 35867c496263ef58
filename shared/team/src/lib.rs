//! The team runtime: what turns one agent into a team (docs/TEAM.md).
//!
//! It sits above `roo-agent` (the loop, tools, permissions) and `roo-store` (inboxes,
//! task list, team config) and joins them: what an agent is built from ([`settings`],
//! plain data) and the one agent builder shared by the lead, `roo-worker` and in-process
//! teammates ([`builder`]), project trust ([`trust`]), the owner of a member's inbox
//! ([`router`]), a teammate's approver that asks the lead ([`approver`]), the turn hooks
//! that deliver its messages into the conversation ([`delivery`]) and put a shutdown
//! request before a busy member's model, ending the run if it approves ([`shutdown`]),
//! the teammate loop of `roo-worker` and in-process teammates ([`teammate`]), the
//! events a UI shows about teammates ([`event`]), the coordination tools a model calls
//! ([`tools`]), the lead's spawner ([`spawner`]), teammates' workspaces — a clone of the
//! lead's repository each, on this machine or on another host ([`worktree`]) — and where
//! teammates run ([`backend`]): in-process, `roo-worker`s in tmux or iTerm2 panes, or
//! `roo-worker`s on other hosts over ssh, each an executor in one table keyed by where
//! the teammate runs. The store stays free of LLM knowledge and the agent free of team
//! knowledge. See `docs/TEAM.md`, `docs/BACKENDS.md` and `docs/WORKTREES.md`.

pub mod approver;
pub mod authority;
pub mod backend;
pub mod binding;
pub mod budget;
pub mod builder;
pub mod delivery;
pub mod event;
pub mod lead;
mod process;
pub mod relay;
pub mod router;
pub mod settings;
pub mod shutdown;
pub mod spawner;
pub mod teammate;
pub mod tools;
pub mod trust;
pub mod worktree;

pub use approver::LeadApprover;
pub use binding::{AlreadyBound, TeamBinding, TeamSlot};
pub use builder::{BuildError, BuildErrorKind, BuiltAgent, build_agent};
pub use delivery::InboxDelivery;
pub use event::{MemberState, TeamEvent, TeamEventSender, team_events};
pub use lead::status::{TeamStatus, spawn_monitor};
pub use lead::{
    ApproverDecider, PolicyDecider, RequestDecider, SlotDelivery, TeamStateReminder, TeamWait,
    join_as_lead, spawn_request_answerer, wait_for_team,
};
pub use router::{InboxRouter, ResponseKind, RouterError, Waiter, new_request_id};
pub use settings::{AgentSettings, Identity, McpPlan, Role, SessionPlan, ToolSet};
pub use shutdown::{ShutdownOnRequest, ShutdownResponse};
pub use spawner::output::{MemberEvent, TeammateOutput};
pub use spawner::tools::{AgentTool, TaskStop};
pub use spawner::{SpawnError, SpawnRequest, Spawned, Spawner, TeammateBase};
pub use teammate::{
    TeammateEnd, TeammateError, TeammateExit, TeammateHandle, TeammateSpec, spawn_in_process,
};
pub use tools::{
    LeadTools, OnSent, TeamTools, lead_tools, reveal_on_bind, teammate_tools, waits_for_team,
};
pub use trust::{Trust, TrustDecision, TrustQuestion};

/// The name the lead goes by unless told otherwise (`roo-worker --lead` defaults to it).
pub const DEFAULT_LEAD_NAME: &str = "lead";
