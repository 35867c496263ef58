//! Fork-mode skills run as sub-agents: the runtime's side of [`SkillFork`], so that
//! the skills (below the sub-agents) never name the runtime.

use futures_util::future::BoxFuture;

use super::runtime::WeakSubagentRuntime;
use crate::skills::{Skill, SkillFork};
use crate::tool::{ToolContext, ToolOutput};

impl SkillFork for WeakSubagentRuntime {
    fn run<'a>(
        &'a self,
        skill: &'a Skill,
        arguments: &'a str,
        ctx: &'a ToolContext,
    ) -> Option<BoxFuture<'a, ToolOutput>> {
        let runtime = self.upgrade()?;
        Some(Box::pin(async move {
            runtime.run_skill(skill, arguments, ctx).await
        }))
    }

    fn available(&self) -> bool {
        self.upgrade().is_some()
    }
}
