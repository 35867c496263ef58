//! The exact `it2` command lines, the parsing of its answers, the launcher (run for real
//! by `/bin/sh`), and the pane operations against a fake `it2` that logs its arguments.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::commands::*;
use super::*;

const LEAD_GUID: &str = "2A3B1C4D-0000-4000-8000-00000000ABCD";
const ALICE_GUID: &str = "11111111-2222-4333-8444-555555555555";
const BOB_GUID: &str = "66666666-7777-4888-9999-AAAAAAAAAAAA";

fn lead() -> SessionId {
    SessionId::parse(LEAD_GUID).unwrap()
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| a.to_string()).collect()
}

#[test]
fn session_ids_are_guids_or_iterm_session_id_values() {
    assert_eq!(SessionId::parse(LEAD_GUID).unwrap().as_str(), LEAD_GUID);
    let from_env = SessionId::parse(&format!("w0t12p3:{LEAD_GUID}")).unwrap();
    assert_eq!(from_env.as_str(), LEAD_GUID);
    for bad in [
        "",
        "active",
        "all",
        "--all",
        "w0t0p0",
        "x0t0p0:2A3B1C4D-0000-4000-8000-00000000ABCD",
        "w0tp0:2A3B1C4D-0000-4000-8000-00000000ABCD",
        "2A3B1C4D-0000-4000-8000-00000000ABC",
        "2A3B1C4D-0000-4000-8000-00000000ABCG",
        "2A3B1C4D-0000-4000-8000-00000000ABCD; rm -rf ~",
    ] {
        assert!(SessionId::parse(bad).is_err(), "{bad:?} was accepted");
    }
}

#[test]
fn the_command_lines_are_exact() {
    let s = lead();
    assert_eq!(
        split(&s, Split::Beside),
        args(&["session", "split", "--vertical", "--session", LEAD_GUID])
    );
    assert_eq!(
        split(&s, Split::Below),
        args(&["session", "split", "--session", LEAD_GUID])
    );
    assert_eq!(
        set_name(&s, "alice"),
        args(&["session", "set-name", "--session", LEAD_GUID, "--", "alice"])
    );
    // Free text after `--`: a leading dash is text, not an option.
    assert_eq!(
        send_text(&s, "--all -v hi"),
        args(&[
            "session",
            "send",
            "--session",
            LEAD_GUID,
            "--",
            "--all -v hi"
        ])
    );
    assert_eq!(
        run_line(&s, " /bin/sh '/h/l.sh'"),
        args(&[
            "session",
            "run",
            "--session",
            LEAD_GUID,
            "--",
            " /bin/sh '/h/l.sh'"
        ])
    );
    assert_eq!(
        close(&s),
        args(&["session", "close", "--force", "--session", LEAD_GUID])
    );
    assert_eq!(list(), args(&["session", "list", "--json"]));
    assert_eq!(session_arg(&close(&s)).as_deref(), Some(LEAD_GUID));
}

#[test]
fn answers_are_parsed_and_garbage_is_an_error() {
    let a = split(&lead(), Split::Beside);
    let id = parse_split(&format!("{SPLIT_ANSWER}{ALICE_GUID}\n"), &a).unwrap();
    assert_eq!(id.as_str(), ALICE_GUID);
    for bad in [
        "",
        "Created new pane: \n",
        "Created new pane: nope\n",
        "Error\n",
    ] {
        let err = parse_split(bad, &a).unwrap_err();
        assert!(matches!(err, It2Error::Answer { .. }), "{bad:?}: {err}");
    }
    let json = format!(
        r#"[{{"id": "{LEAD_GUID}", "name": "zsh", "title": "t", "tty": "/dev/ttys001",
             "rows": 40, "cols": 120, "is_tmux": false, "window_id": "w", "tab_id": "1"}},
            {{"id": "{ALICE_GUID}", "name": "alice"}}]"#
    );
    let listed = parse_list(&json, &list()).unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[1].name, "alice");
    assert!(parse_list("iTerm2 Sessions table", &list()).is_err());
}

fn launch(argv: &[&str], env: &[(&str, &str)], cwd: &Path) -> PaneLaunch {
    PaneLaunch {
        cwd: cwd.to_path_buf(),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        argv: argv.iter().map(|a| a.to_string()).collect(),
        pid_file: None,
    }
}

#[test]
fn the_launcher_runs_the_exact_argv_in_its_directory_and_deletes_itself() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work dir");
    std::fs::create_dir(&work).unwrap();
    let hostile = [
        "it's",
        "$(touch pwned)",
        "`touch pwned`",
        "a\nb",
        "; rm -rf ~ #",
        "\\'\"",
        "",
        "*",
    ];
    let mut argv = vec![
        "/bin/sh",
        "-c",
        r#"pwd; printf '%s\n' "$ROO_ENV_HANDOFF"; for a in "$@"; do printf '<%s>\n' "$a"; done"#,
        "sh",
    ];
    argv.extend(hostile);
    let script = launcher_script(&launch(
        &argv,
        &[("ROO_ENV_HANDOFF", "/h/run/handoff/it's")],
        &work,
    ))
    .unwrap();
    let path = dir.path().join("launcher.sh");
    std::fs::write(&path, &script).unwrap();
    let out = Command::new("/bin/sh").arg(&path).output().unwrap();
    assert!(out.status.success(), "{out:?}\n{script}");
    let expected: String = std::iter::once(format!("{}\n/h/run/handoff/it's\n", work.display()))
        .chain(hostile.iter().map(|a| format!("<{a}>\n")))
        .collect();
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected, "{script}");
    assert!(!path.exists(), "the launcher is still there");
    assert!(!work.join("pwned").exists() && !dir.path().join("pwned").exists());
}

#[test]
fn the_launcher_writes_its_pid_which_the_worker_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("it's.pid");
    let mut l = launch(&["/bin/sh", "-c", "echo $$"], &[], dir.path());
    l.pid_file = Some(pid_file.clone());
    let script = launcher_script(&l).unwrap();
    let path = dir.path().join("launcher.sh");
    std::fs::write(&path, &script).unwrap();
    let out = Command::new("/bin/sh").arg(&path).output().unwrap();
    assert!(out.status.success(), "{out:?}\n{script}");
    let written = std::fs::read_to_string(&pid_file).unwrap();
    assert!(written.ends_with('\n'), "{written:?}");
    assert_eq!(written, String::from_utf8_lossy(&out.stdout), "{script}");
}

#[test]
fn a_launcher_never_holds_a_secret_or_a_bad_name() {
    let cwd = Path::new("/w");
    for key in [
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "GH_TOKEN",
        "my_secret",
        "PASSWORD",
    ] {
        let err = launcher_script(&launch(&["/bin/true"], &[(key, "sk-1")], cwd)).unwrap_err();
        assert!(err.contains("looks like a secret"), "{key}: {err}");
    }
    for key in ["", "1A", "A-B", "A B", "A=B", "A;B"] {
        let err = launcher_script(&launch(&["/bin/true"], &[(key, "x")], cwd)).unwrap_err();
        assert!(err.contains("is not a variable name"), "{key}: {err}");
    }
    assert!(launcher_script(&launch(&[], &[], cwd)).is_err());
}

#[test]
fn the_typed_line_is_refused_for_paths_a_shell_would_misread() {
    assert_eq!(
        typed_line(Path::new("/home/me/.roocode/run/iterm2/alice-1-0.sh")).unwrap(),
        " /bin/sh '/home/me/.roocode/run/iterm2/alice-1-0.sh'"
    );
    assert_eq!(
        typed_line(Path::new("/Users/Me Too/$x/a.sh")).unwrap(),
        " /bin/sh '/Users/Me Too/$x/a.sh'"
    );
    for bad in [
        "/a'b/l.sh",
        "/a\\b/l.sh",
        "/a!b/l.sh",
        "/a\nb/l.sh",
        "relative/l.sh",
    ] {
        assert!(typed_line(Path::new(bad)).is_err(), "{bad:?} was accepted");
    }
}

/// A fake `it2` that appends its arguments (one per line, then `--end--`) to `log` and
/// answers like the real one: a split prints the next id of `ids`, a list prints
/// `list.json`, a session named in `gone` is not found (exit 3), and with a file
/// `down` present it cannot reach iTerm2 (exit 2).
struct FakeIt2 {
    dir: tempfile::TempDir,
}

impl FakeIt2 {
    fn new(ids: &[&str]) -> FakeIt2 {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ids"), ids.join("\n") + "\n").unwrap();
        std::fs::write(dir.path().join("list.json"), "[]").unwrap();
        std::fs::write(dir.path().join("gone"), "").unwrap();
        let d = dir.path().display();
        let script = format!(
            r#"#!/bin/sh
for a in "$@"; do printf '%s\n' "$a" >> '{d}/log'; done
echo --end-- >> '{d}/log'
if [ -e '{d}/down' ]; then
  echo "Error: Not running inside iTerm2 or Python API not enabled." >&2; exit 2
fi
for a in "$@"; do
  if grep -qx -- "$a" '{d}/gone'; then echo "Error: Session '$a' not found" >&2; exit 3; fi
done
case "$1 $2" in
  "session split")
    id=$(head -n 1 '{d}/ids'); sed -i 1d '{d}/ids'
    echo "Created new pane: $id" ;;
  "session list") cat '{d}/list.json' ;;
  "session set-name") echo "Session name set to: $7" ;;
esac
"#
        );
        let bin = dir.path().join("it2");
        std::fs::write(&bin, script).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        FakeIt2 { dir }
    }

    fn bin(&self) -> PathBuf {
        self.dir.path().join("it2")
    }

    /// The commands run so far, each as its arguments.
    fn calls(&self) -> Vec<Vec<String>> {
        let log = std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default();
        let mut calls = vec![];
        let mut current = vec![];
        for line in log.lines() {
            if line == "--end--" {
                calls.push(std::mem::take(&mut current));
            } else {
                current.push(line.to_string());
            }
        }
        calls
    }

    fn set(&self, file: &str, text: &str) {
        std::fs::write(self.dir.path().join(file), text).unwrap();
    }
}

fn name(n: &str) -> Name {
    Name::parse(n).unwrap()
}

fn panes(fake: &FakeIt2, launchers: &Path) -> ITerm2Panes {
    ITerm2Panes::for_lead_session(
        It2::new(fake.bin()),
        Some(&format!("w0t0p0:{LEAD_GUID}")),
        launchers,
    )
    .unwrap()
}

#[tokio::test]
async fn spawning_splits_beside_the_lead_then_below_names_the_pane_and_types_the_launcher() {
    let fake = FakeIt2::new(&[ALICE_GUID, BOB_GUID]);
    let home = tempfile::tempdir().unwrap();
    let launchers = home.path().join("run/iterm2");
    let panes = panes(&fake, &launchers);
    let worker = launch(
        &["/opt/roo/roo-worker", "--team", "crew", "--name", "alice"],
        &[("ROO_ENV_HANDOFF", "/h/run/handoff/alice")],
        home.path(),
    );
    let alice = panes.spawn(&name("alice"), &worker).await.unwrap();
    assert_eq!(alice.as_str(), ALICE_GUID);
    let bob = panes.spawn(&name("bob"), &worker).await.unwrap();
    assert_eq!(bob.as_str(), BOB_GUID);

    let calls = fake.calls();
    assert_eq!(calls.len(), 6, "{calls:#?}");
    assert_eq!(calls[0], split(&lead(), Split::Beside));
    assert_eq!(calls[1], set_name(&alice, "alice"));
    assert_eq!(calls[2][..5], run_line(&alice, "")[..5]);
    assert_eq!(calls[3], split(&alice, Split::Below));
    assert_eq!(calls[4], set_name(&bob, "bob"));
    // The typed line names a private launcher that holds the worker's command.
    let typed = &calls[2][5];
    let path = typed
        .strip_prefix(" /bin/sh '")
        .and_then(|p| p.strip_suffix('\''))
        .unwrap_or_else(|| panic!("{typed:?}"));
    let path = Path::new(path);
    assert!(path.starts_with(&launchers), "{typed}");
    let script = std::fs::read_to_string(path).unwrap();
    assert!(
        script.contains("exec '/opt/roo/roo-worker' '--team' 'crew' '--name' 'alice'\n"),
        "{script}"
    );
    assert!(script.contains("export ROO_ENV_HANDOFF='/h/run/handoff/alice'\n"));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(path), 0o700);
    assert_eq!(mode(&launchers), 0o700);
    assert_eq!(
        panes.panes(),
        vec![(name("alice"), alice), (name("bob"), bob)]
    );
}

#[tokio::test]
async fn a_pane_whose_start_fails_is_closed_again() {
    let fake = FakeIt2::new(&[ALICE_GUID]);
    // The new session vanishes before it is named.
    fake.set("gone", &format!("{ALICE_GUID}\n"));
    let home = tempfile::tempdir().unwrap();
    let panes = panes(&fake, &home.path().join("l"));
    let err = panes
        .spawn(&name("alice"), &launch(&["/bin/true"], &[], home.path()))
        .await
        .unwrap_err();
    assert!(matches!(err, It2Error::NotFound { .. }), "{err}");
    assert!(err.to_string().contains(ALICE_GUID), "{err}");
    let calls = fake.calls();
    assert_eq!(
        calls.last().unwrap(),
        &close(&SessionId::parse(ALICE_GUID).unwrap())
    );
    assert!(panes.panes().is_empty());
    assert_eq!(std::fs::read_dir(home.path().join("l")).unwrap().count(), 0);
}

#[tokio::test]
async fn a_secret_in_the_launch_is_refused_before_any_pane_opens() {
    let fake = FakeIt2::new(&[ALICE_GUID]);
    let home = tempfile::tempdir().unwrap();
    let panes = panes(&fake, &home.path().join("l"));
    let err = panes
        .spawn(
            &name("alice"),
            &launch(
                &["/bin/true"],
                &[("ANTHROPIC_API_KEY", "sk-ant-1")],
                home.path(),
            ),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("looks like a secret"), "{err}");
    assert!(fake.calls().is_empty());
}

#[tokio::test]
async fn only_panes_this_lead_created_are_closed() {
    let fake = FakeIt2::new(&[ALICE_GUID]);
    let home = tempfile::tempdir().unwrap();
    let panes = panes(&fake, &home.path().join("l"));
    let alice = panes
        .spawn(&name("alice"), &launch(&["/bin/true"], &[], home.path()))
        .await
        .unwrap();
    let before = fake.calls().len();
    let err = panes.close(&lead()).await.unwrap_err();
    assert!(matches!(err, It2Error::NotOurs { .. }), "{err}");
    assert_eq!(fake.calls().len(), before, "it2 ran for a foreign session");
    assert!(panes.close_all().await.is_empty());
    assert_eq!(fake.calls().last().unwrap(), &close(&alice));
    assert!(panes.panes().is_empty());
    // Closing again: no longer ours.
    assert!(matches!(
        panes.close(&alice).await,
        Err(It2Error::NotOurs { .. })
    ));
}

#[tokio::test]
async fn a_pane_the_user_closed_counts_as_closed() {
    let fake = FakeIt2::new(&[ALICE_GUID]);
    let home = tempfile::tempdir().unwrap();
    let panes = panes(&fake, &home.path().join("l"));
    let alice = panes
        .spawn(&name("alice"), &launch(&["/bin/true"], &[], home.path()))
        .await
        .unwrap();
    fake.set("gone", &format!("{ALICE_GUID}\n"));
    panes.close(&alice).await.unwrap();
    assert!(panes.panes().is_empty());
}

#[tokio::test]
async fn is_alive_reads_the_session_list() {
    let fake = FakeIt2::new(&[]);
    let home = tempfile::tempdir().unwrap();
    let panes = panes(&fake, home.path());
    let alice = SessionId::parse(ALICE_GUID).unwrap();
    fake.set(
        "list.json",
        &format!(
            r#"[{{"id": "{LEAD_GUID}", "name": "zsh"}}, {{"id": "{ALICE_GUID}", "name": "alice"}}]"#
        ),
    );
    assert!(panes.is_alive(&alice).await.unwrap());
    fake.set(
        "list.json",
        &format!(r#"[{{"id": "{LEAD_GUID}", "name": "zsh"}}]"#),
    );
    assert!(!panes.is_alive(&alice).await.unwrap());
    assert_eq!(fake.calls().last().unwrap(), &list());
}

#[tokio::test]
async fn title_and_text_go_to_the_session_as_given() {
    let fake = FakeIt2::new(&[]);
    let home = tempfile::tempdir().unwrap();
    let panes = panes(&fake, home.path());
    let alice = SessionId::parse(ALICE_GUID).unwrap();
    panes.set_title(&alice, "alice · reviewer").await.unwrap();
    panes.send_text(&alice, "-n 'x'\n").await.unwrap();
    let calls = fake.calls();
    assert_eq!(calls[0], set_name(&alice, "alice · reviewer"));
    // The log splits on newlines: the text arrived as one argument ending in one.
    assert_eq!(calls[1][..5], send_text(&alice, "")[..5]);
    assert_eq!(calls[1][5], "-n 'x'");
}

#[tokio::test]
async fn it2_failures_say_what_to_do() {
    let fake = FakeIt2::new(&[]);
    fake.set("down", "");
    let home = tempfile::tempdir().unwrap();
    let panes = panes(&fake, home.path());
    let err = panes.is_alive(&lead()).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, It2Error::Connection { .. }), "{text}");
    assert!(text.contains("Python API not enabled"), "{text}");
    assert!(text.contains("Enable Python API"), "{text}");

    let missing = ITerm2Panes::new(
        It2::new(home.path().join("no-such-it2")),
        lead(),
        home.path(),
    );
    let err = missing.is_alive(&lead()).await.unwrap_err();
    assert!(matches!(err, It2Error::Spawn { .. }), "{err}");
    assert!(err.to_string().contains("is it2 installed?"), "{err}");

    assert!(matches!(
        ITerm2Panes::for_lead_session(It2::new(fake.bin()), None, home.path()),
        Err(It2Error::NoLeadSession)
    ));
}

#[tokio::test]
async fn a_hung_it2_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("it2");
    std::fs::write(&bin, "#!/bin/sh\nexec sleep 30\n").unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let it2 = It2::new(&bin).with_timeout(std::time::Duration::from_millis(200));
    let err = it2.run(&list()).await.unwrap_err();
    assert!(matches!(err, It2Error::Timeout { .. }), "{err}");
}

#[tokio::test]
async fn a_split_from_a_pane_the_user_closed_goes_to_the_lead_instead() {
    let fake = FakeIt2::new(&[ALICE_GUID, BOB_GUID]);
    let home = tempfile::tempdir().unwrap();
    let panes = panes(&fake, &home.path().join("l"));
    let worker = launch(&["/bin/true"], &[], home.path());
    let alice = panes.spawn(&name("alice"), &worker).await.unwrap();
    fake.set("gone", &format!("{ALICE_GUID}\n"));
    let bob = panes.spawn(&name("bob"), &worker).await.unwrap();
    let calls = fake.calls();
    assert_eq!(calls[3], split(&alice, Split::Below));
    assert_eq!(calls[4], split(&lead(), Split::Beside));
    assert_eq!(panes.panes(), vec![(name("bob"), bob)]);
}

#[tokio::test]
async fn a_usage_error_is_not_mistaken_for_an_unreachable_iterm2() {
    // it2 (click) exits 2 on a usage error, as on a connection error.
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("it2");
    std::fs::write(
        &bin,
        "#!/bin/sh\necho 'Usage: it2 session send [OPTIONS] TEXT' >&2\n\
         echo \"Error: No such option: --x\" >&2\nexit 2\n",
    )
    .unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = It2::new(&bin).run(&list()).await.unwrap_err();
    assert!(matches!(err, It2Error::Failed { .. }), "{err}");
    assert!(err.to_string().contains("No such option: --x"), "{err}");
}
