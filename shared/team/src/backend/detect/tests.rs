//! Every environment case of the detection order, on the pure function.

use std::path::PathBuf;

use super::*;

const TMUX_VAR: &str = "/tmp/tmux-1000/default,4242,0";

fn tmux_bin() -> Option<PathBuf> {
    Some(PathBuf::from("/usr/bin/tmux"))
}

fn it2_bin() -> Option<PathBuf> {
    Some(PathBuf::from("/opt/homebrew/bin/it2"))
}

/// A plain terminal outside tmux and iTerm2 with nothing installed.
fn terminal(mode: Mode) -> DetectEnv {
    DetectEnv {
        mode,
        tmux_var: None,
        term_program: Some("xterm-256color".into()),
        iterm_session_id: None,
        stdin_tty: true,
        stdout_tty: true,
        tmux: None,
        it2: None,
    }
}

fn in_tmux(mode: Mode) -> DetectEnv {
    DetectEnv {
        tmux_var: Some(TMUX_VAR.into()),
        term_program: Some("tmux".into()),
        tmux: tmux_bin(),
        ..terminal(mode)
    }
}

fn in_iterm2(mode: Mode) -> DetectEnv {
    DetectEnv {
        term_program: Some("iTerm.app".into()),
        iterm_session_id: Some("w0t0p0:2A3B1C4D-0000-4000-8000-00000000ABCD".into()),
        ..terminal(mode)
    }
}

fn ok(env: &DetectEnv) -> Detection {
    detect(env).unwrap_or_else(|e| panic!("{env:?}: {e}"))
}

#[test]
fn inside_tmux_auto_splits_the_current_window() {
    let d = ok(&in_tmux(Mode::Auto));
    assert_eq!(d.choice, Choice::Tmux(TmuxPlacement::CurrentWindow));
    assert_eq!(d.reason, Reason::InsideTmux);
    assert_eq!(d.binary, tmux_bin());
    // Even without a terminal (a -p run inside tmux): $TMUX comes first.
    let headless = DetectEnv {
        stdin_tty: false,
        stdout_tty: false,
        ..in_tmux(Mode::Auto)
    };
    assert_eq!(
        ok(&headless).choice,
        Choice::Tmux(TmuxPlacement::CurrentWindow)
    );
    // tmux inside iTerm2 (tmux -CC, or tmux started in an iTerm2 tab): tmux wins.
    let both = DetectEnv {
        term_program: Some("iTerm.app".into()),
        it2: it2_bin(),
        ..in_tmux(Mode::Auto)
    };
    assert_eq!(ok(&both).choice, Choice::Tmux(TmuxPlacement::CurrentWindow));
}

#[test]
fn tmux_variable_without_a_tmux_binary_falls_through_with_a_note() {
    let env = DetectEnv {
        tmux: None,
        ..in_tmux(Mode::Auto)
    };
    let d = ok(&env);
    assert_eq!(d.choice, Choice::InProcess);
    assert_eq!(d.reason, Reason::NoMultiplexer);
    assert!(
        d.notes[0].contains("$TMUX is set but tmux is not on PATH"),
        "{d:?}"
    );
}

#[test]
fn iterm2_with_it2_uses_iterm2_panes() {
    for env in [
        in_iterm2(Mode::Auto),
        // Either variable is enough.
        DetectEnv {
            iterm_session_id: None,
            ..in_iterm2(Mode::Auto)
        },
        DetectEnv {
            term_program: None,
            ..in_iterm2(Mode::Auto)
        },
    ] {
        let env = DetectEnv {
            it2: it2_bin(),
            tmux: tmux_bin(),
            ..env
        };
        let d = ok(&env);
        assert_eq!(d.choice, Choice::ITerm2, "{env:?}");
        assert_eq!(d.reason, Reason::ITerm2WithIt2);
        assert_eq!(d.binary, it2_bin());
    }
}

#[test]
fn iterm2_without_it2_falls_back_to_a_detached_tmux_session() {
    let env = DetectEnv {
        tmux: tmux_bin(),
        ..in_iterm2(Mode::Auto)
    };
    let d = ok(&env);
    assert_eq!(d.choice, Choice::Tmux(TmuxPlacement::DetachedSession));
    assert_eq!(d.reason, Reason::ITerm2WithoutIt2);
    assert_eq!(d.binary, tmux_bin());
}

#[test]
fn iterm2_without_it2_or_tmux_is_an_error_that_says_how_to_install_it2() {
    let err = detect(&in_iterm2(Mode::Auto)).unwrap_err();
    assert_eq!(err, DetectError::ITerm2WithoutTools);
    let text = err.to_string();
    assert!(text.contains("uv tool install it2"), "{text}");
    assert!(text.contains("Enable Python API"), "{text}");
    assert!(text.contains("--teammate-mode in-process"), "{text}");
}

#[test]
fn no_terminal_runs_in_process_even_with_tmux_installed() {
    for (stdin_tty, stdout_tty) in [(false, true), (true, false), (false, false)] {
        let env = DetectEnv {
            stdin_tty,
            stdout_tty,
            tmux: tmux_bin(),
            ..terminal(Mode::Auto)
        };
        let d = ok(&env);
        assert_eq!(d.choice, Choice::InProcess, "{env:?}");
        assert_eq!(d.reason, Reason::NoTerminal);
        assert_eq!(d.binary, None);
    }
}

#[test]
fn a_terminal_with_tmux_installed_gets_a_detached_session() {
    let env = DetectEnv {
        tmux: tmux_bin(),
        ..terminal(Mode::Auto)
    };
    let d = ok(&env);
    assert_eq!(d.choice, Choice::Tmux(TmuxPlacement::DetachedSession));
    assert_eq!(d.reason, Reason::TmuxInstalled);
    let report = d.report(Some("crew"));
    assert!(
        report.contains("detached session roo-crew; attach with: tmux attach -t roo-crew"),
        "{report}"
    );
    assert!(d.report(None).contains("tmux attach -t roo-<team>"));
}

#[test]
fn a_terminal_without_tmux_runs_in_process() {
    let d = ok(&terminal(Mode::Auto));
    assert_eq!(d.choice, Choice::InProcess);
    assert_eq!(d.reason, Reason::NoMultiplexer);
    // it2 alone outside iTerm2 changes nothing.
    let env = DetectEnv {
        it2: it2_bin(),
        ..terminal(Mode::Auto)
    };
    assert_eq!(ok(&env).choice, Choice::InProcess);
}

#[test]
fn forced_in_process_is_taken_everywhere() {
    for env in [
        in_tmux(Mode::InProcess),
        in_iterm2(Mode::InProcess),
        terminal(Mode::InProcess),
    ] {
        let d = ok(&env);
        assert_eq!(d.choice, Choice::InProcess);
        assert!(matches!(
            d.reason,
            Reason::Forced {
                mode: Mode::InProcess,
                ..
            }
        ));
    }
}

#[test]
fn forced_tmux_places_panes_by_where_the_lead_runs() {
    assert_eq!(
        ok(&in_tmux(Mode::Tmux)).choice,
        Choice::Tmux(TmuxPlacement::CurrentWindow)
    );
    // Outside tmux, and without a terminal (a CI run): a detached session.
    let env = DetectEnv {
        stdin_tty: false,
        stdout_tty: false,
        tmux: tmux_bin(),
        ..terminal(Mode::Tmux)
    };
    let d = ok(&env);
    assert_eq!(d.choice, Choice::Tmux(TmuxPlacement::DetachedSession));
    assert!(d.reason.to_string().contains("--teammate-mode tmux"));
}

#[test]
fn forced_tmux_without_tmux_is_an_error() {
    let err = detect(&terminal(Mode::Tmux)).unwrap_err();
    assert_eq!(err, DetectError::TmuxMissing);
    assert!(err.to_string().contains("install tmux"), "{err}");
    // $TMUX alone does not make tmux usable.
    let env = DetectEnv {
        tmux: None,
        ..in_tmux(Mode::Tmux)
    };
    assert_eq!(detect(&env).unwrap_err(), DetectError::TmuxMissing);
}

#[test]
fn forced_iterm2_needs_iterm2_and_it2() {
    let env = DetectEnv {
        it2: it2_bin(),
        ..in_iterm2(Mode::ITerm2)
    };
    let d = ok(&env);
    assert_eq!(d.choice, Choice::ITerm2);
    assert_eq!(d.binary, it2_bin());
    let missing = detect(&in_iterm2(Mode::ITerm2)).unwrap_err();
    assert_eq!(missing, DetectError::It2Missing);
    assert!(
        missing.to_string().contains("pipx install it2"),
        "{missing}"
    );
    let outside = DetectEnv {
        it2: it2_bin(),
        ..terminal(Mode::ITerm2)
    };
    assert_eq!(detect(&outside).unwrap_err(), DetectError::NotInITerm2);
}

#[test]
fn choices_map_to_the_backend_recorded_for_members() {
    assert_eq!(Choice::InProcess.backend_type(), BackendType::InProcess);
    assert_eq!(
        Choice::Tmux(TmuxPlacement::DetachedSession).backend_type(),
        BackendType::Tmux
    );
    assert_eq!(Choice::ITerm2.backend_type(), BackendType::Iterm2);
}
