//! Frames over a unix SOCK_SEQPACKET socket: one frame per message, its
//! descriptors beside it (SCM_RIGHTS). A message keeps its bounds, so a
//! frame and its descriptors arrive together or not at all.
//!
//! rustix, already in the dependency tree, wraps sendmsg/recvmsg and the
//! control-message buffers safely; crates made only for passing
//! descriptors (sendfd, passfd) wrap the same calls over stream sockets,
//! whose reads may join or split messages.

use std::{
    io::{IoSlice, IoSliceMut},
    mem::MaybeUninit,
    os::fd::{AsFd, BorrowedFd, OwnedFd},
    path::Path,
    time::Duration,
};

use rustix::net::{
    self, AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketFlags, SocketType,
};

use super::wire::{MAX_FDS, MAX_READ_FRAME};

/// A connected handover socket.
pub struct Channel {
    fd: OwnedFd,
}

/// A received frame: its bytes and descriptors.
pub struct Received {
    pub bytes: Vec<u8>,
    pub fds: Vec<OwnedFd>,
    /// The frame was over [`MAX_READ_FRAME`]: `bytes` is its start, which
    /// no decoder takes; its descriptors came whole.
    pub truncated: bool,
}

fn seqpacket() -> std::io::Result<OwnedFd> {
    Ok(net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// Listens at `path` (replacing a stale socket file), for the giver.
pub fn listen(path: &Path) -> std::io::Result<OwnedFd> {
    let fd = seqpacket()?;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    net::bind(&fd, &SocketAddrUnix::new(path)?)?;
    net::listen(&fd, 4)?;
    Ok(fd)
}

/// Accepts one taker; blocks.
pub fn accept(listener: &OwnedFd) -> std::io::Result<Channel> {
    let fd = net::accept_with(listener, SocketFlags::CLOEXEC)?;
    Ok(Channel { fd })
}

/// A connected pair (the keeper and its agent, see [`crate::continuity::keeper`]),
/// both close-on-exec.
pub fn pair() -> std::io::Result<(Channel, Channel)> {
    let (a, b) = net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    Ok((Channel { fd: a }, Channel { fd: b }))
}

/// Connects to the giver at `path`.
pub fn connect(path: &Path) -> std::io::Result<Channel> {
    let fd = seqpacket()?;
    net::connect(&fd, &SocketAddrUnix::new(path)?)?;
    Ok(Channel { fd })
}

impl Channel {
    /// Bounds every later send and receive: a peer that stops answering
    /// fails the handover instead of holding it.
    pub fn set_timeout(&self, t: Duration) -> std::io::Result<()> {
        net::sockopt::set_socket_timeout(&self.fd, net::sockopt::Timeout::Recv, Some(t))?;
        net::sockopt::set_socket_timeout(&self.fd, net::sockopt::Timeout::Send, Some(t))?;
        Ok(())
    }

    /// The peer's uid and pid, as the kernel recorded them at connect.
    pub fn peer(&self) -> std::io::Result<(u32, u32)> {
        let c = net::sockopt::socket_peercred(&self.fd)?;
        Ok((c.uid.as_raw(), c.pid.as_raw_nonzero().get() as u32))
    }

    /// Sends one frame with `fds`.
    pub fn send(&self, frame: &[u8], fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
        assert!(fds.len() <= MAX_FDS, "at most {MAX_FDS} descriptors a frame");
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
            return Err(std::io::Error::other("descriptors do not fit the control buffer"));
        }
        let sent = net::sendmsg(
            &self.fd,
            &[IoSlice::new(frame)],
            &mut control,
            SendFlags::NOSIGNAL,
        )?;
        if sent != frame.len() {
            return Err(std::io::Error::other(format!(
                "sent {sent} of a frame's {} bytes",
                frame.len()
            )));
        }
        Ok(())
    }

    /// Receives one frame: `None` once the peer has closed. A frame with
    /// more descriptors than [`MAX_FDS`] is an error, its descriptors
    /// closed; one over [`MAX_READ_FRAME`] (with its length) comes marked
    /// [`Received::truncated`].
    pub fn recv(&self) -> std::io::Result<Option<Received>> {
        self.recv_with(RecvFlags::CMSG_CLOEXEC)
    }

    /// As [`Channel::recv`], without waiting: `WouldBlock` when no frame
    /// is queued.
    pub fn try_recv(&self) -> std::io::Result<Option<Received>> {
        self.recv_with(RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT)
    }

    fn recv_with(&self, flags: RecvFlags) -> std::io::Result<Option<Received>> {
        let mut buf = vec![0u8; MAX_READ_FRAME + 4 + 1];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let got = net::recvmsg(&self.fd, &mut [IoSliceMut::new(&mut buf)], &mut control, flags)?;
        let mut fds = Vec::new();
        for m in control.drain() {
            if let RecvAncillaryMessage::ScmRights(rights) = m {
                fds.extend(rights);
            }
        }
        if got.flags.contains(net::ReturnFlags::CTRUNC) {
            return Err(std::io::Error::other(format!(
                "a frame came with more than {MAX_FDS} descriptors"
            )));
        }
        if got.bytes == 0 && fds.is_empty() {
            return Ok(None);
        }
        let truncated = got.bytes > MAX_READ_FRAME + 4 || got.flags.contains(net::ReturnFlags::TRUNC);
        buf.truncate(got.bytes.min(buf.len()));
        Ok(Some(Received {
            bytes: buf,
            fds,
            truncated,
        }))
    }

    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// A channel over a descriptor this process was given (the keeper's,
    /// by number): refused unless it is a unix SOCK_SEQPACKET socket.
    pub fn from_fd(fd: OwnedFd) -> std::io::Result<Channel> {
        let ty = net::sockopt::socket_type(&fd)?;
        if ty != SocketType::SEQPACKET {
            return Err(std::io::Error::other(format!(
                "a socket of type {ty:?}, not SOCK_SEQPACKET"
            )));
        }
        Ok(Channel { fd })
    }
}
