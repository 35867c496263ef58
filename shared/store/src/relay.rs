//! Relaying `roo-mail` and `roo-task` from a confined command to its agent.
//!
//! A sandboxed command cannot reach the team's files (they are hidden from it). Its
//! agent hands it one end of a `SOCK_SEQPACKET` socket pair as an inherited
//! descriptor, named by [`ENV_FD`] — never a path another process could open. The
//! CLIs, finding that variable, do not touch the store: they send their arguments in
//! one datagram together with their stdin, stdout and stderr and the reply end of a
//! fresh socket pair ([`forward`]). The agent ([`receive`]) runs the real CLI with its
//! own identity on those descriptors and answers with the exit code
//! ([`Incoming::reply`]). Requests from concurrent commands cannot interleave: each
//! is one datagram, and each reply goes down its own pair.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, socketpair,
};
use serde::{Deserialize, Serialize};

/// The variable naming a confined command's relay descriptor.
pub const ENV_FD: &str = "ROO_AGENT_FD";
/// The variable naming the agent that runs a relayed CLI (its pid).
pub const ENV_RELAYED_BY: &str = "ROO_RELAYED_BY";

/// In a CLI the agent runs for a command ([`ENV_RELAYED_BY`]): ends with the agent
/// (a parent-death signal, Linux) rather than outliving it, and does not start at
/// all if the agent is already gone. Returns `false` then.
pub fn bound_to_relaying_agent() -> bool {
    let Some(agent) = std::env::var(ENV_RELAYED_BY)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    else {
        return true;
    };
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM);
    nix::unistd::getppid().as_raw() == agent
}

/// The largest request (arguments) a relay carries; larger text goes on stdin.
pub const MAX_REQUEST: usize = 128 * 1024;

/// What a relayed CLI asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// `roo-mail` or `roo-task`.
    pub program: String,
    /// The arguments after the program name.
    pub args: Vec<String>,
    /// The command's working directory.
    pub cwd: PathBuf,
}

/// How a relayed request ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// The CLI ran and exited with this code.
    Exited(i32),
    /// The agent refused or could not run it; the text says why.
    Refused(String),
}

/// A socket pair for relaying: `(agent's end, command's end)`. Both are
/// close-on-exec; the command's end is passed on explicitly.
pub fn pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let (a, b) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        cloexec_flag(),
    )?;
    set_cloexec(&a)?;
    set_cloexec(&b)?;
    Ok((a, b))
}

#[cfg(target_os = "linux")]
fn cloexec_flag() -> SockFlag {
    SockFlag::SOCK_CLOEXEC
}

#[cfg(not(target_os = "linux"))]
fn cloexec_flag() -> SockFlag {
    SockFlag::empty()
}

fn set_cloexec(fd: &OwnedFd) -> io::Result<()> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    Ok(())
}

/// The relay descriptor this process inherited, if [`ENV_FD`] names an open socket.
pub fn inherited() -> Option<OwnedFd> {
    use std::os::unix::fs::FileTypeExt;
    let raw: RawFd = std::env::var(ENV_FD).ok()?.trim().parse().ok()?;
    if raw < 3 {
        return None;
    }
    // Only an open socket is taken over: a stale number must not close a file.
    let meta = std::fs::metadata(format!("/dev/fd/{raw}")).ok()?;
    if !meta.file_type().is_socket() {
        return None;
    }
    Some(own(raw))
}

/// Takes ownership of a descriptor this process was handed.
#[allow(unsafe_code)]
fn own(raw: RawFd) -> OwnedFd {
    // SAFETY: `raw` is open and owned by nothing else in this process: it was
    // inherited for this use (checked above) or just received in SCM_RIGHTS,
    // which installs fresh descriptors.
    unsafe { OwnedFd::from_raw_fd(raw) }
}

/// Passes `fd` over the socket `over` (the sandbox helper's channel).
pub fn send_fd(over: &OwnedFd, fd: &OwnedFd) -> io::Result<()> {
    let fds = [fd.as_raw_fd()];
    let cmsg = [ControlMessage::ScmRights(&fds)];
    sendmsg::<()>(
        over.as_raw_fd(),
        &[IoSlice::new(b"r")],
        &cmsg,
        MsgFlags::empty(),
        None,
    )?;
    Ok(())
}

/// Receives one descriptor sent with [`send_fd`] on `from` (not close-on-exec: it
/// is meant for the next program started). `None`: the sender closed the channel
/// without sending one.
pub fn receive_fd(from: std::os::fd::BorrowedFd<'_>) -> io::Result<Option<OwnedFd>> {
    let mut buf = [0u8; 16];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    loop {
        let mut iov = [IoSliceMut::new(&mut buf)];
        let msg = match recvmsg::<()>(
            from.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::empty(),
        ) {
            Ok(msg) => msg,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        };
        let mut found = None;
        if let Ok(cmsgs) = msg.cmsgs() {
            for cmsg in cmsgs {
                if let ControlMessageOwned::ScmRights(received) = cmsg {
                    for raw in received {
                        let fd = own(raw);
                        if found.is_none() {
                            found = Some(fd);
                        }
                    }
                }
            }
        }
        return Ok(found);
    }
}

/// Sends `request` over `relay` with this process's stdin, stdout and stderr and
/// waits for the agent's answer.
pub fn forward(relay: &OwnedFd, request: &Request) -> io::Result<Reply> {
    let body = serde_json::to_vec(request).map_err(io::Error::other)?;
    if body.len() > MAX_REQUEST {
        return Ok(Reply::Refused(format!(
            "the arguments are {} bytes, more than the {MAX_REQUEST} a relayed command may \
             carry; pass long text on stdin (`-`)",
            body.len()
        )));
    }
    let (mine, theirs) = pair()?;
    let fds = [
        theirs.as_raw_fd(),
        io::stdin().as_fd().as_raw_fd(),
        io::stdout().as_fd().as_raw_fd(),
        io::stderr().as_fd().as_raw_fd(),
    ];
    let cmsg = [ControlMessage::ScmRights(&fds)];
    sendmsg::<()>(
        relay.as_raw_fd(),
        &[IoSlice::new(&body)],
        &cmsg,
        MsgFlags::empty(),
        None,
    )?;
    drop(theirs);
    let mut buf = vec![0u8; 64 * 1024];
    let n = loop {
        match nix::unistd::read(&mine, &mut buf) {
            Ok(n) => break n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    if n == 0 {
        return Ok(Reply::Refused(
            "the agent ended before the command finished".to_string(),
        ));
    }
    serde_json::from_slice(&buf[..n]).map_err(io::Error::other)
}

/// One request received by the agent, with the command's descriptors.
#[derive(Debug)]
pub struct Incoming {
    pub request: Request,
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// Where the [`Reply`] goes; it reads end-of-file when the command is gone.
    pub reply_to: OwnedFd,
}

impl Incoming {
    /// Answers the command.
    pub fn reply(&self, reply: &Reply) {
        if let Ok(body) = serde_json::to_vec(reply) {
            let _ = nix::unistd::write(&self.reply_to, &body);
        }
    }
}

/// Descriptors one request carries: the reply end, stdin, stdout, stderr.
const REQUEST_FDS: usize = 4;

/// Waits for the next request on the agent's end. `Ok(None)`: every command's
/// end is closed (the agent dropped its own copy and no command holds one).
/// What is not a request is dropped with every descriptor it carried: an empty
/// datagram, one with another number of descriptors or a cut control message;
/// a malformed body is answered (on its reply end) and skipped.
pub fn receive(relay: &OwnedFd) -> io::Result<Option<Incoming>> {
    let mut buf = vec![0u8; MAX_REQUEST + 1024];
    // Room for as many descriptors as the kernel passes in one message's control
    // data (its `optmem_max`), so none arrives without being seen and closed.
    let mut space = nix::cmsg_space!([RawFd; 32 * 1024]);
    loop {
        let (len, fds, cut) = {
            let mut iov = [IoSliceMut::new(&mut buf)];
            let msg =
                match recvmsg::<()>(relay.as_raw_fd(), &mut iov, Some(&mut space), cmsg_flags()) {
                    Ok(msg) => msg,
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(e) => return Err(e.into()),
                };
            let mut fds = Vec::new();
            if let Ok(cmsgs) = msg.cmsgs() {
                for cmsg in cmsgs {
                    if let ControlMessageOwned::ScmRights(received) = cmsg {
                        fds.extend(received.into_iter().map(own));
                    }
                }
            }
            let cut = msg
                .flags
                .intersects(MsgFlags::MSG_CTRUNC | MsgFlags::MSG_TRUNC);
            (msg.bytes, fds, cut)
        };
        if len == 0 && fds.is_empty() {
            // End of stream, or an empty datagram (which is no request).
            if peer_gone(relay) {
                return Ok(None);
            }
            continue;
        }
        if cut || fds.len() != REQUEST_FDS {
            continue;
        }
        let mut fds = fds.into_iter();
        let (Some(reply_to), Some(stdin), Some(stdout), Some(stderr)) =
            (fds.next(), fds.next(), fds.next(), fds.next())
        else {
            continue;
        };
        let incoming = |request| Incoming {
            request,
            stdin,
            stdout,
            stderr,
            reply_to,
        };
        match serde_json::from_slice::<Request>(&buf[..len]) {
            Ok(request) => return Ok(Some(incoming(request))),
            Err(e) => {
                let bad = incoming(Request {
                    program: String::new(),
                    args: Vec::new(),
                    cwd: PathBuf::new(),
                });
                bad.reply(&Reply::Refused(format!("malformed relay request: {e}")));
            }
        }
    }
}

/// Whether every command's end of the pair is closed.
fn peer_gone(relay: &OwnedFd) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds = [PollFd::new(relay.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(_) => fds[0]
            .revents()
            .is_some_and(|r| r.contains(PollFlags::POLLHUP)),
        Err(_) => true,
    }
}

#[cfg(target_os = "linux")]
fn cmsg_flags() -> MsgFlags {
    MsgFlags::MSG_CMSG_CLOEXEC
}

#[cfg(not(target_os = "linux"))]
fn cmsg_flags() -> MsgFlags {
    MsgFlags::empty()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn a_request_arrives_with_its_descriptors_and_gets_its_reply() {
        let (agent, command) = pair().unwrap();
        let request = Request {
            program: "roo-mail".into(),
            args: vec!["send".into(), "bob".into(), "hi".into()],
            cwd: PathBuf::from("/work"),
        };
        let sent = request.clone();
        let client = std::thread::spawn(move || forward(&command, &sent).unwrap());
        let incoming = receive(&agent).unwrap().unwrap();
        assert_eq!(incoming.request, request);
        incoming.reply(&Reply::Exited(3));
        assert_eq!(client.join().unwrap(), Reply::Exited(3));
        drop(incoming);
        // The command's end went with the client thread's `command`: end of stream.
        assert!(receive(&agent).unwrap().is_none());
    }

    #[test]
    fn junk_on_the_relay_neither_stops_it_nor_leaks_descriptors() {
        let (agent, command) = pair().unwrap();
        let open_fds = || std::fs::read_dir("/dev/fd").unwrap().count();
        // An empty datagram, and datagrams carrying the wrong number of descriptors.
        sendmsg::<()>(
            command.as_raw_fd(),
            &[IoSlice::new(b"")],
            &[],
            MsgFlags::empty(),
            None,
        )
        .unwrap();
        let before = open_fds();
        for count in [1usize, 3, 5, 40] {
            let fds = vec![io::stdout().as_fd().as_raw_fd(); count];
            sendmsg::<()>(
                command.as_raw_fd(),
                &[IoSlice::new(b"{}")],
                &[ControlMessage::ScmRights(&fds)],
                MsgFlags::empty(),
                None,
            )
            .unwrap();
        }
        let request = Request {
            program: "roo-mail".into(),
            args: vec!["list".into()],
            cwd: PathBuf::from("/"),
        };
        let sent = request.clone();
        let client = std::thread::spawn(move || forward(&command, &sent).unwrap());
        let incoming = receive(&agent).unwrap().unwrap();
        assert_eq!(incoming.request, request);
        incoming.reply(&Reply::Exited(0));
        assert_eq!(client.join().unwrap(), Reply::Exited(0));
        drop(incoming);
        assert!(
            open_fds() <= before,
            "descriptors of junk datagrams were kept"
        );
        assert!(receive(&agent).unwrap().is_none());
    }

    #[test]
    fn a_command_that_loses_its_agent_is_told_so() {
        let (agent, command) = pair().unwrap();
        let client = std::thread::spawn(move || {
            forward(
                &command,
                &Request {
                    program: "roo-task".into(),
                    args: vec![],
                    cwd: PathBuf::from("/"),
                },
            )
            .unwrap()
        });
        let incoming = receive(&agent).unwrap().unwrap();
        drop(incoming);
        assert!(matches!(client.join().unwrap(), Reply::Refused(why) if why.contains("ended")));
    }
}
