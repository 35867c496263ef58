//! Who answers a sub-agent's permission questions: while it runs in the foreground,
//! its parent's approver (the human, or whoever answers the parent), one question at
//! a time across all children; once it runs in the background nobody can, so what
//! would be asked is denied with a message saying so.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::future::BoxFuture;
use tokio::sync::Mutex as AsyncMutex;

use crate::permissions::{Approval, Approver, PermissionRequest};

/// The approver of one child.
pub struct ChildApprover {
    parent: Arc<dyn Approver>,
    /// Shared by every child of a session: the human sees one question at a time.
    one_at_a_time: Arc<AsyncMutex<()>>,
    background: Arc<AtomicBool>,
    /// Who asks (`sub-agent a3 (Explore)`), shown in front of the question.
    who: String,
}

impl ChildApprover {
    /// An approver for the child `who` that asks `parent`, one question at a time.
    pub fn new(
        parent: Arc<dyn Approver>,
        one_at_a_time: Arc<AsyncMutex<()>>,
        background: Arc<AtomicBool>,
        who: String,
    ) -> Self {
        Self {
            parent,
            one_at_a_time,
            background,
            who,
        }
    }
}

impl Approver for ChildApprover {
    fn ask<'a>(&'a self, request: &'a PermissionRequest) -> BoxFuture<'a, Approval> {
        Box::pin(async move {
            if self.background.load(Ordering::SeqCst) {
                return Approval::Deny {
                    feedback: Some(format!(
                        "this call needs approval ({}), and this sub-agent runs in the \
                         background where nobody can give it; do the task without it, or \
                         report what you would need so the parent can do it",
                        request.reason
                    )),
                };
            }
            let _turn = self.one_at_a_time.lock().await;
            let mut request = request.clone();
            request.summary = format!("[{}] {}", self.who, request.summary);
            self.parent.ask(&request).await
        })
    }
}
