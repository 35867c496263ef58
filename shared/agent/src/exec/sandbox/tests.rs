//! Tests of the sandbox settings, policy, profile and (on Linux) the Landlock
//! ruleset applied to a real thread.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use super::*;
use crate::config::{ConfigFile, ConfigFiles, SandboxSection, Source};

fn section(yaml: &str) -> SandboxSection {
    serde_yaml_ng::from_str(yaml).unwrap()
}

fn merge(sections: &[(Source, &str)]) -> SandboxSettings {
    let sections: Vec<_> = sections
        .iter()
        .map(|(source, yaml)| {
            (
                *source,
                PathBuf::from(format!("/{}.yaml", source.label())),
                section(yaml),
            )
        })
        .collect();
    SandboxSettings::merge(&sections, Path::new("/proj"), Some(Path::new("/home/u")))
}

#[test]
fn the_sandbox_is_on_with_network_by_default() {
    let settings = merge(&[]);
    assert!(settings.enabled);
    assert!(settings.network);
    assert!(settings.allow_write.is_empty() && settings.ignored.is_empty());
}

#[test]
fn the_user_config_may_widen_the_sandbox() {
    let settings = merge(&[(
        Source::User,
        "{enabled: false, allow_write: ['~/.cargo', /opt/cache], pass_env: [OPENAI_API_KEY]}",
    )]);
    assert!(!settings.enabled);
    assert_eq!(
        settings.allow_write,
        [PathBuf::from("/home/u/.cargo"), PathBuf::from("/opt/cache")]
    );
    assert_eq!(settings.pass_env, ["OPENAI_API_KEY"]);
    assert!(settings.disabled_by.unwrap().contains("/user.yaml"));
}

#[test]
fn a_project_config_cannot_widen_the_sandbox() {
    for source in [Source::Project, Source::Local] {
        let settings = merge(&[
            (Source::User, "{network: false}"),
            (
                source,
                "{enabled: false, allow_write: ['~'], network: true, pass_env: [ANTHROPIC_API_KEY]}",
            ),
        ]);
        assert!(settings.enabled, "{source}");
        assert!(!settings.network, "{source}");
        assert!(settings.allow_write.is_empty(), "{source}");
        assert!(settings.pass_env.is_empty(), "{source}");
        assert_eq!(settings.ignored.len(), 4, "{:?}", settings.ignored);
        assert!(settings.ignored[0].contains("sandbox.enabled"));
    }
}

#[test]
fn a_project_config_may_narrow_the_sandbox() {
    let settings = merge(&[(
        Source::Project,
        "{deny_read: [.env, '~/notes'], network: false}",
    )]);
    assert!(!settings.network);
    assert_eq!(
        settings.deny_read,
        [PathBuf::from("/proj/.env"), PathBuf::from("/home/u/notes")]
    );
    assert!(settings.ignored.is_empty());
    // Turning the sandbox back on narrows too.
    let settings = merge(&[
        (Source::User, "{enabled: false}"),
        (Source::Local, "{enabled: true}"),
    ]);
    assert!(settings.enabled && settings.disabled_by.is_none());
}

#[test]
fn a_misspelt_sandbox_key_is_a_config_error_naming_the_file() {
    let files = [
        ConfigFile {
            source: Source::User,
            path: PathBuf::from("/u/config.yaml"),
            value: Some(serde_yaml_ng::from_str("sandbox: {alow_write: [x]}").unwrap()),
        },
        ConfigFile {
            source: Source::Project,
            path: PathBuf::from("/p/config.yaml"),
            value: None,
        },
        ConfigFile {
            source: Source::Local,
            path: PathBuf::from("/p/config.local.yaml"),
            value: None,
        },
    ];
    let err = ConfigFiles::from_files(files, crate::config::ProjectTrust::Untrusted)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("/u/config.yaml") && err.contains("alow_write"),
        "{err}"
    );
}

#[test]
fn the_no_sandbox_flag_turns_it_off() {
    let dir = tempfile::tempdir().unwrap();
    let config = ConfigFiles::load(
        dir.path(),
        dir.path(),
        crate::config::ProjectTrust::Untrusted,
    )
    .unwrap();
    let settings = config.sandbox_settings(dir.path(), None, true).unwrap();
    assert!(!settings.enabled);
    assert_eq!(settings.disabled_by.as_deref(), Some("--no-sandbox"));
}

fn policy_env() -> PolicyEnv {
    PolicyEnv {
        home: Some(PathBuf::from("/home/u")),
        roo_home: PathBuf::from("/home/u/.roocode"),
        temp_dirs: vec![PathBuf::from("/tmp"), PathBuf::from("/var/tmp")],
        sockets: vec![PathBuf::from("/tmp/tmux-1000")],
        secrets: Vec::new(),
    }
}

#[test]
fn the_policy_writes_to_the_root_temp_and_devices_and_hides_the_team_state() {
    let settings = SandboxSettings {
        allow_write: vec![PathBuf::from("/home/u/.cargo")],
        deny_read: vec![PathBuf::from("/proj/.env")],
        ..SandboxSettings::default()
    };
    let policy = SandboxPolicy::for_root(Path::new("/proj"), &settings, &policy_env());
    for path in [
        "/proj",
        "/tmp",
        "/var/tmp",
        "/dev/null",
        "/dev/pts",
        "/home/u/.cargo",
    ] {
        assert!(policy.write.contains(&PathBuf::from(path)), "{path}");
    }
    // The team's state is reached through the agent's relay only.
    for path in ["teams", "tasks", "run", "projects", "checkpoints"] {
        let path = PathBuf::from("/home/u/.roocode").join(path);
        assert!(!policy.write.contains(&path), "{}", path.display());
        assert!(policy.deny_read.contains(&path), "{}", path.display());
        assert!(policy.hide.contains(&path), "{}", path.display());
    }
    assert!(policy.hide.contains(&PathBuf::from("/tmp/tmux-1000")));
    assert!(!policy.write.iter().any(|p| p == Path::new("/home/u")));
    assert!(
        !policy
            .write
            .iter()
            .any(|p| p == Path::new("/home/u/.roocode"))
    );
    for path in [
        "/home/u/.ssh",
        "/home/u/.aws",
        "/home/u/.gnupg",
        "/home/u/.config/gcloud",
        "/home/u/.netrc",
        "/home/u/.docker/config.json",
        "/home/u/.kube",
        "/home/u/.roocode/config.yaml",
        "/proj/.env",
    ] {
        assert!(policy.deny_read.contains(&PathBuf::from(path)), "{path}");
    }
    assert!(policy.network);
}

#[test]
fn api_keys_are_scrubbed_unless_passed_through() {
    let vars = [
        ("ANTHROPIC_API_KEY", "a"),
        ("OPENAI_API_KEY", "o"),
        ("my_service_apikey", "m"),
        ("ANTHROPIC_AUTH_TOKEN", "t"),
        ("CUSTOM_LLM_SECRET", "the-key"),
        ("PATH", "/usr/bin"),
        ("HOME", "/home/u"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()));
    let removed = scrubbed_env_names(vars.clone(), &["the-key", ""], &[]);
    assert_eq!(
        removed,
        [
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "CUSTOM_LLM_SECRET",
            "OPENAI_API_KEY",
            "my_service_apikey"
        ]
    );
    let removed = scrubbed_env_names(vars, &[], &["OPENAI_API_KEY".to_string()]);
    assert!(!removed.contains(&"OPENAI_API_KEY".to_string()));
    assert!(removed.contains(&"ANTHROPIC_API_KEY".to_string()));
}

#[test]
fn the_seatbelt_profile_denies_writes_outside_and_reads_of_secrets() {
    let policy = SandboxPolicy {
        write: vec![PathBuf::from("/nonexistent/proj \"x\"")],
        deny_read: vec![PathBuf::from("/nonexistent/home/.ssh")],
        network: false,
        hide: vec![],
        namespaces: false,
        scan: vec![],
        search: vec![],
    };
    let profile = seatbelt_profile(&policy);
    assert!(profile.starts_with("(version 1)\n(allow default)\n(deny file-write*)\n"));
    assert!(
        profile.contains(
            "(allow file-write* file-write-mode file-write-owner file-write-times \
             file-write-xattr file-write-flags file-write-acl file-write-setugid\n  \
             (subpath \"/nonexistent/proj \\\"x\\\"\"))"
        ),
        "{profile}"
    );
    assert!(profile.contains("(deny file-read*\n  (subpath \"/nonexistent/home/.ssh\"))"));
    assert!(profile.contains("(deny network-outbound)\n(deny network-bind)"));
    let open = seatbelt_profile(&SandboxPolicy {
        network: true,
        ..policy.clone()
    });
    assert!(!open.contains("network"));

    let (program, args) = seatbelt_command(
        &policy,
        Path::new("/bin/bash"),
        &["-c".into(), "echo hi".into()],
    );
    assert_eq!(program, Path::new("/usr/bin/sandbox-exec"));
    assert_eq!(args[0], "-p");
    assert_eq!(args[1], std::ffi::OsString::from(profile));
    assert_eq!(&args[2..], ["/bin/bash", "-c", "echo hi"]);
}

/// Seatbelt's `file-write*` already stands for every `file-write-…` operation;
/// the profile names the metadata ones anyway, denied outside and allowed inside
/// the writable paths (later rules win, so the allow must come after the deny).
#[test]
fn the_seatbelt_profile_denies_metadata_writes_outside_the_writable_paths() {
    let profile = seatbelt_profile(&SandboxPolicy {
        write: vec![PathBuf::from("/nonexistent/proj")],
        deny_read: vec![],
        network: true,
        hide: vec![],
        namespaces: false,
        scan: vec![],
        search: vec![],
    });
    let operations = [
        "file-write-mode",
        "file-write-owner",
        "file-write-times",
        "file-write-xattr",
        "file-write-flags",
    ];
    let rule = |prefix: &str| {
        let start = profile
            .find(prefix)
            .unwrap_or_else(|| panic!("no `{prefix}` rule in {profile}"));
        let end = start + profile[start..].find([')', '\n']).unwrap();
        (start, &profile[start..end])
    };
    let (deny_all_at, _) = rule("(deny file-write*)");
    let (deny_at, deny) = rule("(deny file-write-");
    let (allow_at, allow) = rule("(allow file-write*");
    for operation in operations {
        assert!(deny.split_whitespace().any(|w| w == operation), "{deny}");
        assert!(allow.split_whitespace().any(|w| w == operation), "{allow}");
    }
    assert!(deny_all_at < deny_at && deny_at < allow_at, "{profile}");
    assert!(
        profile[allow_at..].starts_with(&format!("{allow}\n  (subpath \"/nonexistent/proj\"))")),
        "{profile}"
    );
}

#[test]
fn the_seatbelt_profile_hides_paths_from_reading_and_connecting() {
    let policy = SandboxPolicy {
        write: vec![PathBuf::from("/nonexistent/tmp")],
        deny_read: vec![],
        network: true,
        hide: vec![
            PathBuf::from("/nonexistent/tmp/tmux-501"),
            PathBuf::from("/nonexistent/run/docker.sock"),
            PathBuf::from("/nonexistent/agent \"dir\""),
        ],
        namespaces: false,
        scan: vec![],
        search: vec![],
    };
    let profile = seatbelt_profile(&policy);
    let filters = [
        "(subpath \"/nonexistent/tmp/tmux-501\")",
        "(subpath \"/nonexistent/run/docker.sock\")",
        "(subpath \"/nonexistent/agent \\\"dir\\\"\")",
    ];
    assert!(
        profile.contains(&format!(
            "(deny file-read* file-write*\n  {})\n",
            filters.join("\n  ")
        )),
        "{profile}"
    );
    let sockets: Vec<String> = filters
        .iter()
        .map(|f| format!("(remote unix-socket {f})"))
        .collect();
    assert!(
        profile.contains(&format!(
            "(deny network-outbound\n  {})\n",
            sockets.join("\n  ")
        )),
        "{profile}"
    );
    // The hidden tmux dir lies in a writable temp dir: its deny must come later.
    let allow_at = profile.find("(allow file-write*").unwrap();
    assert!(profile.find("(deny file-read* file-write*").unwrap() > allow_at);
    // With the network on, only the hidden sockets are refused.
    assert!(!profile.contains("(deny network-outbound)"), "{profile}");
    assert!(!profile.contains("network-bind"), "{profile}");

    let none = seatbelt_profile(&SandboxPolicy {
        hide: vec![],
        ..policy
    });
    assert!(!none.contains("unix-socket"), "{none}");
}

#[test]
fn the_seatbelt_profile_hides_every_path_the_default_policy_hides() {
    let policy = SandboxPolicy::for_root(
        Path::new("/proj"),
        &SandboxSettings::default(),
        &policy_env(),
    );
    assert!(policy.hide.contains(&PathBuf::from("/tmp/tmux-1000")));
    let profile = seatbelt_profile(&policy);
    for path in &policy.hide {
        // The profile names existing paths resolved (`/tmp` is `/private/tmp` on macOS).
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
        let path = format!("(subpath \"{}\")", path.display());
        assert!(
            profile.contains(&format!("(remote unix-socket {path})")),
            "{path}: {profile}"
        );
        let reads = &profile[profile.find("(deny file-read* file-write*").unwrap()..];
        let reads = &reads[..reads.find("))\n").unwrap() + 2];
        assert!(reads.contains(&path), "{path}: {profile}");
    }
}

#[test]
fn the_helper_command_line_carries_the_policy_and_the_parent() {
    let sandbox = CommandSandbox {
        helper: PathBuf::from("/usr/bin/roo-lead"),
        policy: Some(SandboxPolicy {
            write: vec![PathBuf::from("/proj")],
            deny_read: vec![],
            network: true,
            hide: vec![],
            namespaces: false,
            scan: vec![],
            search: vec![],
        }),
    };
    let (program, args) = sandbox.wrap(Path::new("/bin/bash"), &["-c".into(), "true".into()]);
    assert_eq!(program, Path::new("/usr/bin/roo-lead"));
    assert_eq!(args[0], HELPER_ARG);
    let spec: HelperSpec = serde_json::from_str(args[1].to_str().unwrap()).unwrap();
    assert_eq!(spec.policy, sandbox.policy);
    assert_eq!(spec.parent, std::process::id());
    assert_eq!(&args[2..], ["/bin/bash", "-c", "true"]);
}

#[test]
fn parses_proc_stat_lines() {
    let stat = proc_stat("4242 (my (odd) cmd) S 17 4240 4240 0 -1").unwrap();
    assert_eq!((stat.state, stat.ppid, stat.pgrp), ('S', 17, 4240));
    assert!(proc_stat("garbage").is_none());
}

#[cfg(target_os = "linux")]
mod landlock_rules {
    use super::*;
    use crate::exec::sandbox::landlock::{apply, read_grants};

    #[test]
    fn read_grants_cover_everything_but_the_denied_path() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(base.join("home/.ssh")).unwrap();
        std::fs::write(base.join("home/.ssh/id_rsa"), "secret").unwrap();
        std::fs::write(base.join("home/notes.txt"), "notes").unwrap();
        std::fs::create_dir(base.join("home/src")).unwrap();
        std::os::unix::fs::symlink(base.join("home/.ssh"), base.join("home/link")).unwrap();
        let grants = read_grants(&[base.join("home/.ssh")]).unwrap();
        assert!(grants.contains(&base.join("home/notes.txt")));
        assert!(grants.contains(&base.join("home/src")));
        // Neither the secret, nor anything above it, nor a link to it.
        for path in [
            base.join("home/.ssh"),
            base.join("home"),
            base.clone(),
            PathBuf::from("/"),
            base.join("home/link"),
        ] {
            assert!(!grants.contains(&path), "{}", path.display());
        }
        assert!(grants.contains(&PathBuf::from("/usr")));
        assert_eq!(read_grants(&[]).unwrap(), [PathBuf::from("/")]);
        assert!(read_grants(&[PathBuf::from("/")]).unwrap().is_empty());
    }

    /// Landlock confines only the calling thread (and what it starts), so a
    /// test thread can enter the sandbox and probe it for real.
    #[test]
    fn a_confined_thread_writes_only_where_allowed_and_cannot_read_secrets() {
        if availability().is_err() {
            eprintln!("skipped: this kernel has no Landlock");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        for sub in ["proj", "outside", "home/.ssh"] {
            std::fs::create_dir_all(base.join(sub)).unwrap();
        }
        std::fs::write(base.join("home/.ssh/id_rsa"), "secret").unwrap();
        std::fs::write(base.join("home/keep.txt"), "keep").unwrap();
        std::os::unix::fs::symlink(base.join("home/.ssh/id_rsa"), base.join("proj/key")).unwrap();
        let policy = SandboxPolicy {
            write: vec![base.join("proj"), PathBuf::from("/dev/null")],
            deny_read: vec![base.join("home/.ssh")],
            network: false,
            hide: vec![],
            namespaces: false,
            scan: vec![],
            search: vec![],
        };
        let base2 = base.clone();
        let results = std::thread::spawn(move || {
            let enforcement = apply(&policy).unwrap();
            let base = base2;
            (
                enforcement,
                std::fs::write(base.join("proj/ok.txt"), "ok").is_ok(),
                std::fs::write(base.join("outside/x.txt"), "x").is_ok(),
                std::fs::remove_file(base.join("home/keep.txt")).is_ok(),
                std::fs::read_to_string(base.join("home/.ssh/id_rsa")).is_ok()
                    || std::fs::read_to_string(base.join("proj/key")).is_ok(),
                std::fs::read_to_string(base.join("home/keep.txt")).is_ok(),
                std::fs::write("/dev/null", "x").is_ok(),
                std::net::TcpListener::bind("127.0.0.1:0").is_ok(),
            )
        })
        .join()
        .unwrap();
        let (enforcement, proj, outside, removed, secret, keep, null, tcp) = results;
        assert_eq!(enforcement, Enforcement::Full);
        assert!(proj, "writes inside the project are allowed");
        assert!(!outside, "writes outside are refused");
        assert!(!removed, "deleting in HOME is refused");
        assert!(
            !secret,
            "the secret cannot be read, directly or through a symlink"
        );
        assert!(keep, "other files stay readable");
        assert!(null, "/dev/null is writable");
        assert!(!tcp, "TCP is refused with the network off");
        // This thread was never confined.
        assert!(std::fs::write(base.join("outside/x.txt"), "x").is_ok());
        assert!(base.join("home/keep.txt").exists());
    }
}

#[test]
fn credential_names_and_url_passwords_are_scrubbed_and_ordinary_variables_kept() {
    for name in [
        "GITHUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "NPM_TOKEN",
        "MY_PASSWORD",
        "db_passwd",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "OAUTH_CLIENT",
        "SSH_AUTH_SOCK",
        "XAUTHORITY",
        "KEYTIMEOUT",
        "HTTP_AUTHORIZATION",
        "my_service_apikey",
        "GITHUB_PAT",
        "SMTP_PASS",
        "DB_PASS",
        "MYSQL_PWD",
        "AWS_CREDS",
        "SENTRY_DSN",
        "API_JWT",
        "session_cookie",
        "PASS",
    ] {
        assert!(is_credential_env_name(name), "{name}");
    }
    for name in [
        "PATH",
        "HOME",
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_AUTHOR_DATE",
        "GPG_TTY",
        "PGHOST",
        "TERM",
        "LANG",
        "GIT_ASKPASS",
        "EDITOR",
        "PWD",
        "OLDPWD",
        "pwd",
        "PASSTHROUGH",
        "COMPASS_DIR",
        "PATTERN",
        "DSNAME",
    ] {
        assert!(!is_credential_env_name(name), "{name}");
    }
    for value in [
        "postgres://u:pw@h/db",
        "https://x:tok@github.com/o/r.git",
        "http://proxy.local:3128 https://u:p@mirror/simple",
        "redis://:secret@cache:6379/0",
        "user:pw@proxy:3128",
        "u:p@10.0.0.1",
        "u:p@proxy.local/path",
        "no_proxy=x http_proxy=u:pw@[::1]:8080",
    ] {
        assert!(holds_url_password(value), "{value}");
    }
    for value in [
        "postgres://u@h/db",
        "postgres://h:5432/db",
        "https://github.com/o/r.git",
        "git@github.com:o/r.git",
        "u:@h",
        "https://u:@h/x",
        "/usr/bin:/bin",
        "://:x@h",
        "git@github.com:org/repo",
        "a:b",
        "me@host:/srv/x",
        "u:p@",
        "Me <me@example.com>",
    ] {
        assert!(!holds_url_password(value), "{value}");
    }
    let vars = [
        ("DATABASE_URL", "postgres://u:pw@h/db"),
        ("GITHUB_TOKEN", "ghp_x"),
        ("GIT_AUTHOR_NAME", "Me"),
        ("PATH", "/usr/bin"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()));
    assert_eq!(
        scrubbed_env_names(vars.clone(), &[], &[]),
        ["DATABASE_URL", "GITHUB_TOKEN"]
    );
    assert_eq!(
        scrubbed_env_names(vars, &[], &["GITHUB_TOKEN".to_string()]),
        ["DATABASE_URL"]
    );
}

#[test]
fn database_and_daemon_socket_dirs_and_pghost_dirs_are_hidden() {
    let found = escape_sockets(&SocketEnv {
        temp_dirs: &[PathBuf::from("/nonexistent-tmp")],
        home: Some(Path::new("/home/u")),
        tmux: None,
        tmux_tmpdir: None,
        xdg_runtime_dir: None,
        dbus_session: None,
        ssh_auth_sock: None,
        screendir: None,
        pghost: Some("db.example.com,/srv/pg/sock,relative/dir".into()),
    });
    for dir in [
        "/run/postgresql",
        "/var/run/postgresql",
        "/run/mysqld",
        "/var/lib/mysql",
        "/run/redis",
        "/var/run/redis",
        "/srv/pg/sock",
        // Daemons that are host root to whoever reaches their socket.
        "/run/docker.sock",
        "/run/containerd",
        "/run/podman",
        "/run/crio",
        "/run/libvirt",
        "/var/run/libvirt",
        "/var/snap/lxd/common/lxd",
        "/var/lib/lxd",
        "/var/lib/incus",
        "/run/incus",
    ] {
        assert!(found.contains(&PathBuf::from(dir)), "{dir}: {found:?}");
    }
    assert!(!found.iter().any(|p| p.ends_with("relative/dir")));
    assert!(!found.iter().any(|p| p.ends_with("db.example.com")));
}

#[test]
fn the_home_is_searched_and_a_cover_over_a_write_root_becomes_a_search() {
    let env = PolicyEnv {
        sockets: vec![PathBuf::from("/run/user"), PathBuf::from("/tmp/tmux-1000")],
        ..policy_env()
    };
    let policy = SandboxPolicy::for_root(
        Path::new("/run/user/1000/proj"),
        &SandboxSettings::default(),
        &env,
    );
    assert!(!policy.hide.contains(&PathBuf::from("/run/user")));
    assert_eq!(
        policy.search,
        [PathBuf::from("/home/u"), PathBuf::from("/run/user")]
    );
}

/// The probe started ahead at a process's start and the agent's own ask share one run of
/// the helper, even when the ask comes while it still runs.
#[cfg(target_os = "linux")]
#[test]
fn a_probe_started_ahead_is_the_one_the_agent_gets() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let helper = dir.path().join("helper.sh");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\n[ \"$1\" = {PROBE_ARG} ] || exit 9\necho run >> '{}'\nsleep 0.3\n",
            runs.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    probe_ahead(helper.clone());
    let layers = Layers::probe(&SandboxSettings::default(), &helper);
    assert_eq!(layers.namespaces, Ok(()));
    assert_eq!(Layers::probe(&SandboxSettings::default(), &helper), layers);
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "run\n");
}
