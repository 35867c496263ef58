//! Team config.
use std::os::unix::fs::PermissionsExt;

use roo_store::{BackendType, Error, LeadClaim, Member, Name, RooHome, Team};

use super::common::{name, team};

#[test]
fn create_writes_config_and_task_list_with_private_modes() {
    let f = team();
    let config = f.team.config().unwrap();
    assert_eq!(config.name, "t");
    assert_eq!(config.lead_agent_id, "lead@t");
    assert_eq!(config.lead().unwrap().name, "lead");
    assert_eq!(config.members.len(), 3);
    assert!(f.home.task_list(&name("t")).is_file());
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&f.home.team_dir(&name("t"))), 0o700);
    assert_eq!(mode(&f.home.team_config(&name("t"))), 0o600);
    assert_eq!(mode(&f.home.task_list(&name("t"))), 0o600);
}

#[test]
fn create_twice_is_refused() {
    let f = team();
    let t = name("t");
    let err = Team::create(&f.home, t.clone(), "", Member::new(name("x"), &t), vec![]).unwrap_err();
    assert!(matches!(err, Error::TeamExists { .. }), "{err}");
}

/// Issue 18: a team named `x.lock` was accepted and every spawn then failed.
#[test]
fn a_team_name_git_cannot_use_in_a_branch_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path());
    for bad in ["x.lock", "a..b", "x."] {
        let t = name(bad);
        let err =
            Team::create(&home, t.clone(), "", Member::new(name("lead"), &t), vec![]).unwrap_err();
        assert!(matches!(err, Error::InvalidName { .. }), "{err}");
        assert!(err.to_string().contains("team name"), "{err}");
        assert!(!home.team_dir(&t).exists() && !home.tasks_dir(&t).exists());
    }
}

#[test]
fn open_missing_team_says_how_to_create_it() {
    let dir = tempfile::tempdir().unwrap();
    let err = Team::open(&RooHome::new(dir.path()), name("nope")).unwrap_err();
    assert!(
        err.to_string().contains("roo-mail team create --team nope"),
        "{err}"
    );
}

#[test]
fn members_are_added_updated_and_removed_under_the_lock() {
    let f = team();
    let t = name("t");
    let err = f
        .team
        .add_member(Member::new(name("alice"), &t))
        .unwrap_err();
    assert!(matches!(err, Error::MemberExists { .. }), "{err}");
    f.team.add_member(Member::new(name("carol"), &t)).unwrap();
    let carol = f
        .team
        .update_member("carol@t", |m| {
            m.pane_id = Some("%3".into());
            m.pid = Some(42);
            m.backend_type = Some(BackendType::Tmux);
            m.is_active = Some(false);
        })
        .unwrap();
    assert_eq!(carol.pane_id.as_deref(), Some("%3"));
    assert!(!carol.is_active());
    let json = std::fs::read_to_string(f.team.config_path()).unwrap();
    assert!(json.contains("\"backend_type\": \"tmux\""), "{json}");
    f.team.remove_member("carol").unwrap();
    assert!(f.team.config().unwrap().member("carol").is_none());
    let err = f.team.remove_member("lead").unwrap_err();
    assert!(matches!(err, Error::NotPermitted { .. }), "{err}");
}

#[test]
fn resolve_by_name_agent_id_and_broadcast() {
    let f = team();
    let config = f.team.config().unwrap();
    assert_eq!(config.resolve("bob", "alice").unwrap(), vec![name("bob")]);
    assert_eq!(config.resolve("bob@t", "alice").unwrap(), vec![name("bob")]);
    assert_eq!(
        config.resolve("*", "alice").unwrap(),
        vec![name("lead"), name("bob")]
    );
    let err = config.resolve("mallory", "alice").unwrap_err();
    assert!(matches!(err, Error::UnknownRecipient { .. }), "{err}");
}

#[test]
fn delete_refuses_active_members_unless_forced() {
    let f = team();
    // Joined (a join records `is_active`): roster entries that never started do not
    // hold a delete up (`members_that_never_started_...` below).
    f.team.set_active("alice", true).unwrap();
    f.team.set_active("bob", true).unwrap();
    let err = f.team.delete(false).unwrap_err();
    let Error::TeamActive { active, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(active, &vec!["alice".to_owned(), "bob".to_owned()]);
    f.team.set_active("alice", false).unwrap();
    f.team.set_active("bob", false).unwrap();
    f.team.delete(false).unwrap();
    assert!(!f.home.team_dir(&name("t")).exists());
    assert!(!f.home.tasks_dir(&name("t")).exists());
    assert!(matches!(
        f.team.config().unwrap_err(),
        Error::TeamNotFound { .. }
    ));
}

#[test]
fn corrupt_config_is_moved_aside_with_its_new_name_in_the_error() {
    let f = team();
    std::fs::write(f.team.config_path(), "{ not json").unwrap();
    // Reading reports it and moves nothing.
    let err = f.team.config().unwrap_err();
    assert!(matches!(err, Error::Damaged { .. }), "{err}");
    assert!(f.team.config_path().exists());
    // A change moves it aside.
    let err = f.team.set_active("alice", false).unwrap_err();
    let Error::Corrupt { moved_to, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(std::fs::read_to_string(moved_to).unwrap(), "{ not json");
    assert!(err.to_string().contains("config.json.corrupt-"), "{err}");
}

#[test]
fn a_quarantined_config_does_not_let_team_create_refound_the_team() {
    let f = team();
    std::fs::write(f.team.config_path(), "{ not json").unwrap();
    f.team.set_active("alice", false).unwrap_err();
    let t = name("t");
    let refound = || {
        Team::create(
            &f.home,
            t.clone(),
            "again",
            Member::new(name("mallory"), &t),
            vec![],
        )
    };
    let err = refound().unwrap_err();
    assert!(matches!(err, Error::NotPermitted { .. }), "{err}");
    assert!(err.to_string().contains("doctor"), "{err}");
    assert_eq!(
        roo_store::quarantine::quarantined(&f.home, &t)
            .unwrap()
            .len(),
        1
    );
    // Acknowledged by the doctor, the team may be created anew.
    roo_store::quarantine::acknowledge(&f.home, &t).unwrap();
    assert!(
        roo_store::quarantine::quarantined(&f.home, &t)
            .unwrap()
            .is_empty()
    );
    refound().unwrap();
}

#[test]
fn one_process_leads_a_team_unless_another_takes_it_over() {
    let dir = tempfile::tempdir().unwrap();
    let home = RooHome::new(dir.path());
    let t = Name::parse("t").unwrap();
    let team = Team::create(
        &home,
        t.clone(),
        "",
        Member::new(Name::parse("lead").unwrap(), &t),
        Vec::new(),
    )
    .unwrap();
    let own = std::process::id();
    assert_eq!(
        team.claim_lead(own, false).unwrap(),
        LeadClaim::Claimed { taken_from: None }
    );
    // Another live process (pid 1) is refused while this one leads, and takes over
    // only when told to.
    assert_eq!(team.claim_lead(1, false).unwrap(), LeadClaim::Held(own));
    assert_eq!(team.config().unwrap().lead().unwrap().pid, Some(own));
    assert_eq!(
        team.claim_lead(1, true).unwrap(),
        LeadClaim::Claimed {
            taken_from: Some(own)
        }
    );
    assert_eq!(team.config().unwrap().lead().unwrap().pid, Some(1));
}
