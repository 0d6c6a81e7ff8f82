//! Child processes: waited for within a bound (a hung child fails a run
//! instead of hanging it), stopped with SIGTERM then SIGKILL, and driven
//! one line at a time over their stdin and stdout.

use std::{
    io::{self, BufRead, BufReader, Read, Write},
    process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Output, Stdio},
    time::{Duration, Instant},
};

/// The child's exit status, or `None` if it still ran after `limit` (it is
/// then killed and reaped).
pub fn wait_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The child's output once it exits; an error (with its stderr so far) if
/// it still ran after `limit`, when it is killed.
pub fn output_within(mut child: Child, limit: Duration) -> io::Result<Output> {
    let pipe = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = pipe(child.stdout.take().map(|r| Box::new(r) as _));
    let err = pipe(child.stderr.take().map(|r| Box::new(r) as _));
    let status = wait_within(&mut child, limit);
    let (stdout, stderr) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
    match status {
        Some(status) => Ok(Output {
            status,
            stdout,
            stderr,
        }),
        None => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "still running after {limit:?}, killed: {}",
                String::from_utf8_lossy(&stderr).trim_end()
            ),
        )),
    }
}

/// SIGTERM, then the exit within `grace`; past it, SIGKILL and an error.
pub fn terminate(child: &mut Child, grace: Duration) -> io::Result<ExitStatus> {
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    match wait_within(child, grace) {
        Some(status) => Ok(status),
        None => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "pid {} did not exit within {grace:?} of SIGTERM; killed it",
                child.id()
            ),
        )),
    }
}

/// A child that answers one line for each line it is sent.
pub struct LineChild {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl LineChild {
    /// Spawns `cmd` with its stdin and stdout piped.
    pub fn spawn(cmd: &mut Command) -> io::Result<LineChild> {
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Ok(LineChild { child, stdin, stdout })
    }

    /// Sends `line`, returns the child's answer without its line break; an
    /// error if the child closed its stdout instead.
    pub fn request(&mut self, line: &str) -> io::Result<String> {
        self.send(line)?;
        self.read_line()
    }

    /// Sends `line` without waiting for the answer (several children can
    /// then work at once; [`LineChild::read_line`] takes each answer).
    pub fn send(&mut self, line: &str) -> io::Result<()> {
        writeln!(self.stdin, "{line}")?;
        self.stdin.flush()
    }

    /// The child's next line (one it sends unasked).
    pub fn read_line(&mut self) -> io::Result<String> {
        let mut reply = String::new();
        if self.stdout.read_line(&mut reply)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("pid {} closed its output", self.child.id()),
            ));
        }
        Ok(reply.trim_end().to_string())
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Its pieces, for a caller that takes over (closing stdin ends it).
    pub fn into_parts(self) -> (Child, ChildStdin, BufReader<ChildStdout>) {
        (self.child, self.stdin, self.stdout)
    }
}

#[cfg(test)]
mod tests;

/// A process stopped with SIGSTOP, continued (SIGCONT) when this is
/// dropped, whatever happens in between (a failed assertion included).
pub struct Stopped(u32);

impl Stopped {
    pub fn stop(pid: u32) -> Stopped {
        // SAFETY: kill(2) on a pid the caller started.
        let r = unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) };
        assert_eq!(r, 0, "SIGSTOP {pid}: {}", io::Error::last_os_error());
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: as in `stop`.
        unsafe { libc::kill(self.0 as libc::pid_t, libc::SIGCONT) };
    }
}
