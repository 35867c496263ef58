//! The test harness leaves nothing behind: a private tmux server it ends takes its socket
//! file with it (tmux leaves the file when a server ends), also when the test panics.

use std::path::PathBuf;

use roo_tests::{TempDir, Tmux, end_tmux_server, tmux_socket_path};

#[test]
fn a_private_tmux_server_leaves_no_socket_file_when_it_ends() {
    let cwd = TempDir::new();
    let tmux = Tmux::start(cwd.path(), &[], "true");
    let socket = tmux_socket_path(tmux.socket());
    assert!(socket.exists(), "{} not made", socket.display());
    drop(tmux);
    assert!(!socket.exists(), "{} left behind", socket.display());

    // Also when the test holding it panics.
    let socket = std::panic::catch_unwind(|| {
        let tmux = Tmux::start(cwd.path(), &[], "true");
        let socket = tmux_socket_path(tmux.socket());
        assert!(socket.exists(), "{} not made", socket.display());
        std::panic::panic_any(socket);
    })
    .unwrap_err()
    .downcast::<PathBuf>()
    .unwrap();
    assert!(!socket.exists(), "{} left behind", socket.display());
}

#[test]
fn a_socket_that_still_answers_after_kill_server_is_kept() {
    // Something that listens on a tmux socket path and does not end on `kill-server` (it is
    // no tmux): removing its file would leave a live server nobody can reach.
    let name = format!("roo-test-{}-live", std::process::id());
    let path = tmux_socket_path(&name);
    // tmux's own mode for its directory, in case this test makes it.
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(path.parent().unwrap())
        .unwrap();
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    end_tmux_server(&name);
    let kept = path.exists();
    drop(listener);
    let _ = std::fs::remove_file(&path);
    assert!(
        kept,
        "{} removed while something answered on it",
        path.display()
    );
}
