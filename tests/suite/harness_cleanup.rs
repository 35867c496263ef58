//! The test harness leaves nothing behind: a private tmux server it ends takes its socket
//! file with it (tmux leaves the file when a server ends), also when the test panics.

use std::path::PathBuf;

use roo_tests::{TempDir, Tmux, tmux_socket_path};

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
