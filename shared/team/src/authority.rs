//! The lead's authority over its teammates' questions: only the lead's process can
//! answer a permission or plan question.
//!
//! Every member runs as the same OS user and any process of that user can write any
//! inbox, so the sender name and a secret request id are not enough: a process that can
//! read the lead's inbox learns the id and can answer "from lead". The lead therefore
//! signs each answer with an Ed25519 key ([`LeadKey`]) whose private half never leaves
//! the lead's process and `teams/<team>/lead.key` (0600, hidden from every agent's
//! commands), and a member takes an answer only if it verifies with the public key
//! ([`LeadPublicKey`]) it pinned when it first needed it: the team config's `lead_key`,
//! written by the lead before any teammate is spawned. A forged or altered answer is
//! ignored and reported; the question stays open for the real one.
//!
//! The signature covers, length-prefixed: a domain tag, the team, the member answered,
//! the kind of answer, the request id, the decision and the lead's text (PROTOCOL.md
//! §5.7), so it cannot be replayed onto another request, member, team or decision.

use ring::rand::SystemRandom;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};
use roo_store::{MessageBody, Name, PermissionDecision, Team};

/// The domain tag of every signed answer (version 1 of the signed form).
const DOMAIN: &[u8] = b"roo-team answer v1";

/// Why the lead's key could not be loaded or made.
#[derive(Debug, thiserror::Error)]
pub enum AuthorityError {
    #[error(
        "the lead key {path} is not a PKCS#8 Ed25519 key; move it aside and lead the team again to make a new one"
    )]
    Invalid { path: std::path::PathBuf },
    #[error("failed to generate the lead key: the system's random source failed")]
    Random,
    #[error(transparent)]
    Store(#[from] roo_store::Error),
}

/// What a signature covers: one answer to one member's question.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    pub team: &'a Name,
    /// The member whose question it answers (the message's recipient).
    pub to: &'a Name,
    pub kind: AnswerKind,
    pub request_id: &'a str,
    pub allow: bool,
    /// The lead's reason or feedback.
    pub text: &'a str,
}

/// The answers that must be signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerKind {
    Permission,
    PlanApproval,
}

impl<'a> Answer<'a> {
    /// The answer `body` carries to `to` in `team`, if it is a signed kind.
    pub fn of(team: &'a Name, to: &'a Name, body: &'a MessageBody) -> Option<Answer<'a>> {
        match body {
            MessageBody::PermissionResponse {
                request_id,
                decision,
                reason,
            } => Some(Answer {
                team,
                to,
                kind: AnswerKind::Permission,
                request_id,
                allow: *decision == PermissionDecision::Allow,
                text: reason,
            }),
            MessageBody::PlanApprovalResponse {
                request_id,
                approve,
                feedback,
            } => Some(Answer {
                team,
                to,
                kind: AnswerKind::PlanApproval,
                request_id,
                allow: *approve,
                text: feedback,
            }),
            _ => None,
        }
    }

    /// The bytes signed: each field as a 4-byte big-endian length and its bytes.
    fn signed_bytes(&self) -> Vec<u8> {
        let kind: &[u8] = match self.kind {
            AnswerKind::Permission => b"permission_response",
            AnswerKind::PlanApproval => b"plan_approval_response",
        };
        let decision: &[u8] = if self.allow { b"allow" } else { b"deny" };
        let fields: [&[u8]; 7] = [
            DOMAIN,
            self.team.as_str().as_bytes(),
            self.to.as_str().as_bytes(),
            kind,
            self.request_id.as_bytes(),
            decision,
            self.text.as_bytes(),
        ];
        let mut out = Vec::with_capacity(fields.iter().map(|f| f.len() + 4).sum());
        for field in fields {
            out.extend_from_slice(&(field.len() as u32).to_be_bytes());
            out.extend_from_slice(field);
        }
        out
    }
}

/// The public half of the lead's key: what members verify answers with.
#[derive(Clone, PartialEq, Eq)]
pub struct LeadPublicKey(Vec<u8>);

impl std::fmt::Debug for LeadPublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LeadPublicKey({})", self.to_hex())
    }
}

impl LeadPublicKey {
    /// Parses the hex form of the team config's `lead_key`.
    pub fn parse(hex: &str) -> Option<LeadPublicKey> {
        let bytes = from_hex(hex)?;
        (bytes.len() == 32).then_some(LeadPublicKey(bytes))
    }

    /// The key the team config of `team` names, if it names a valid one.
    pub fn of_team(team: &Team) -> Result<Option<LeadPublicKey>, roo_store::Error> {
        Ok(team
            .config()?
            .lead_key
            .as_deref()
            .and_then(LeadPublicKey::parse))
    }

    pub fn to_hex(&self) -> String {
        to_hex(&self.0)
    }

    /// Whether `signature` (hex) is the lead's signature of `answer`.
    pub fn verify(&self, answer: &Answer<'_>, signature: &str) -> bool {
        let Some(signature) = from_hex(signature) else {
            return false;
        };
        UnparsedPublicKey::new(&ED25519, &self.0)
            .verify(&answer.signed_bytes(), &signature)
            .is_ok()
    }
}

/// The lead's signing key.
pub struct LeadKey {
    pair: Ed25519KeyPair,
    public: LeadPublicKey,
}

impl std::fmt::Debug for LeadKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeadKey")
            .field("public", &self.public)
            .finish_non_exhaustive()
    }
}

impl LeadKey {
    /// The key of `team`'s lead: read from `teams/<team>/lead.key`, or made and saved
    /// there when missing; its public half is recorded in the team config. Blocking.
    pub fn load_or_create(team: &Team) -> Result<LeadKey, AuthorityError> {
        let path = team.lead_key_path();
        let key = match roo_store::read_regular(&path, "read the lead key")? {
            Some(bytes) => LeadKey::from_pkcs8(&bytes)
                .ok_or_else(|| AuthorityError::Invalid { path: path.clone() })?,
            None => {
                let document = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
                    .map_err(|_| AuthorityError::Random)?;
                let key = LeadKey::from_pkcs8(document.as_ref()).ok_or(AuthorityError::Random)?;
                team.prepare_local_file(&path)?;
                roo_store::replace_file(&path, document.as_ref())?;
                key
            }
        };
        team.set_lead_key(&key.public.to_hex())?;
        Ok(key)
    }

    /// A key that lives only in memory (tests, benchmarks).
    pub fn ephemeral() -> Result<LeadKey, AuthorityError> {
        let document = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
            .map_err(|_| AuthorityError::Random)?;
        LeadKey::from_pkcs8(document.as_ref()).ok_or(AuthorityError::Random)
    }

    fn from_pkcs8(bytes: &[u8]) -> Option<LeadKey> {
        let pair = Ed25519KeyPair::from_pkcs8(bytes).ok()?;
        let public = LeadPublicKey(pair.public_key().as_ref().to_vec());
        Some(LeadKey { pair, public })
    }

    pub fn public(&self) -> &LeadPublicKey {
        &self.public
    }

    /// The hex signature of `answer`.
    pub fn sign(&self, answer: &Answer<'_>) -> String {
        to_hex(self.pair.sign(&answer.signed_bytes()).as_ref())
    }
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Name {
        Name::parse(s).unwrap()
    }

    #[test]
    fn a_signature_binds_team_member_kind_request_decision_and_text() {
        let key = LeadKey::ephemeral().unwrap();
        let (team, alice) = (name("t"), name("alice"));
        let answer = Answer {
            team: &team,
            to: &alice,
            kind: AnswerKind::Permission,
            request_id: "req-1",
            allow: true,
            text: "ok",
        };
        let signature = key.sign(&answer);
        let public = LeadPublicKey::parse(&key.public().to_hex()).unwrap();
        assert!(public.verify(&answer, &signature));
        let (other_team, bob) = (name("u"), name("bob"));
        for changed in [
            Answer {
                team: &other_team,
                ..answer
            },
            Answer { to: &bob, ..answer },
            Answer {
                kind: AnswerKind::PlanApproval,
                ..answer
            },
            Answer {
                request_id: "req-2",
                ..answer
            },
            Answer {
                allow: false,
                ..answer
            },
            Answer {
                text: "ok!",
                ..answer
            },
        ] {
            assert!(!public.verify(&changed, &signature), "{changed:?}");
        }
        let other = LeadKey::ephemeral().unwrap();
        assert!(!other.public().verify(&answer, &signature));
        assert!(!public.verify(&answer, "zz"));
        assert!(!public.verify(&answer, ""));
        assert!(LeadPublicKey::parse("00").is_none());
    }

    #[test]
    fn the_key_is_saved_once_and_recorded_in_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let home = roo_store::RooHome::new(dir.path());
        let t = name("t");
        let team = Team::create(
            &home,
            t.clone(),
            "",
            roo_store::Member::new(name("lead"), &t),
            Vec::new(),
        )
        .unwrap();
        let first = LeadKey::load_or_create(&team).unwrap();
        let again = LeadKey::load_or_create(&team).unwrap();
        assert_eq!(first.public(), again.public());
        assert_eq!(
            LeadPublicKey::of_team(&team).unwrap().as_ref(),
            Some(first.public())
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(team.lead_key_path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(team.lead_key_path(), b"junk").unwrap();
        assert!(matches!(
            LeadKey::load_or_create(&team),
            Err(AuthorityError::Invalid { .. })
        ));
    }
}
