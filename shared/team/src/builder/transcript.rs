//! The builder's transcript step: the session an agent records its conversation in — new,
//! resumed by id, the latest, or a given file — with the messages it resumes and the
//! repairs made reading them. Kept apart because it alone touches session files.

use std::path::Path;

use roo_agent::{Session, latest_session, new_session_id, project_sessions_dir, session_path};

use super::BuildError;
use super::workspace::Workspace;
use crate::settings::{AgentSettings, SessionPlan};

/// The session `settings` ask for in `ws`'s project, with the messages it resumes and
/// the notices so far: `trust_notices` first, then the repairs of a resume.
pub(super) fn transcript(
    settings: &AgentSettings,
    ws: &Workspace,
    trust_notices: Vec<String>,
) -> Result<(Session, Vec<roo_llm::Message>, Vec<String>), BuildError> {
    let sessions = project_sessions_dir(&ws.roo_home, &ws.project_root);
    let name = settings.identity.name.as_str();
    let (session, messages, mut notices) =
        open_session(&settings.session, &sessions, &ws.cwd, name)?;
    notices.splice(0..0, trust_notices);
    Ok((session, messages, notices))
}

/// The session the conversation is recorded in, with the messages it resumes and the
/// repairs made reading them (as notices).
fn open_session(
    plan: &SessionPlan,
    sessions: &Path,
    cwd: &Path,
    agent: &str,
) -> Result<(Session, Vec<roo_llm::Message>, Vec<String>), BuildError> {
    let resume = match plan {
        SessionPlan::New => None,
        SessionPlan::Resume(id) => {
            Some(session_path(sessions, id).map_err(BuildError::NoSuchSession)?)
        }
        SessionPlan::Latest => Some(latest_session(sessions).map_err(BuildError::NoSuchSession)?),
        SessionPlan::Transcript(path) if path.is_file() => Some(path.clone()),
        SessionPlan::Transcript(path) => {
            let id = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(new_session_id);
            let session =
                Session::create(path.clone(), id, cwd, agent).map_err(BuildError::Session)?;
            return Ok((session, Vec::new(), Vec::new()));
        }
    };
    match resume {
        Some(path) => {
            let restored = Session::open(&path).map_err(BuildError::Session)?;
            Ok((restored.session, restored.messages, restored.notices))
        }
        None => {
            let id = new_session_id();
            let path = sessions.join(format!("{id}.jsonl"));
            let session = Session::create(path, id, cwd, agent).map_err(BuildError::Session)?;
            Ok((session, Vec::new(), Vec::new()))
        }
    }
}
