//! A child's output, line by line as it comes: shown on the terminal under
//! a label, written to a log with the time since start.

use std::{
    fs::File,
    io::{BufRead, BufReader, Read, Write},
    path::Path,
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::Context as _;

use xtask::util::display;

/// Streams a child's stdout and stderr.
pub struct Console {
    pub child: Child,
    pub start: Instant,
    label: String,
    log: File,
    rx: mpsc::Receiver<Option<String>>,
    open: usize,
}

pub enum Next {
    Line(String),
    /// Both pipes closed: the child has exited (or closed them).
    Closed,
    TimedOut,
}

impl Console {
    /// Starts `cmd` (stdin null) and logs its command line first.
    pub fn spawn(cmd: &mut Command, label: &str, log: &Path) -> anyhow::Result<Console> {
        let mut file = File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
        writeln!(file, "$ {}", display(cmd))?;
        println!("==> {}", display(cmd));
        let start = Instant::now();
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot run {}", cmd.get_program().to_string_lossy()))?;
        let (tx, rx) = mpsc::channel();
        pump(child.stdout.take().unwrap(), tx.clone());
        pump(child.stderr.take().unwrap(), tx);
        Ok(Console {
            child,
            start,
            label: label.to_string(),
            log: file,
            rx,
            open: 2,
        })
    }

    /// The next line (already shown and logged), waiting at most until `deadline`.
    pub fn next(&mut self, deadline: Instant) -> Next {
        while self.open > 0 {
            match self
                .rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(Some(line)) => {
                    println!("{} {line}", self.label);
                    let _ = writeln!(self.log, "[{:7.1}] {line}", self.start.elapsed().as_secs_f64());
                    return Next::Line(line);
                }
                Ok(None) => self.open -= 1,
                Err(mpsc::RecvTimeoutError::Timeout) => return Next::TimedOut,
                Err(mpsc::RecvTimeoutError::Disconnected) => self.open = 0,
            }
        }
        Next::Closed
    }

    /// A line of our own, shown and logged.
    pub fn note(&mut self, msg: &str) {
        println!("{} {msg}", self.label);
        let _ = writeln!(self.log, "[{:7.1}] {msg}", self.start.elapsed().as_secs_f64());
    }

    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }
}

/// The line without terminal control sequences: qemu's `-nographic` and
/// the firmware reset and clear the screen (`ESC c`, `ESC [2J`).
fn clean(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            // `ESC x`, or a CSI: `ESC [`, parameters, one final byte in @..~.
            '\x1b' => {
                if chars.next() == Some('[') {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
            }
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// Sends each line of `r`, then `None` at its end.
fn pump(r: impl Read + Send + 'static, tx: mpsc::Sender<Option<String>>) {
    std::thread::spawn(move || {
        let mut r = BufReader::new(r);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf);
                    let _ = tx.send(Some(clean(line.trim_end_matches(['\r', '\n']))));
                }
            }
        }
        let _ = tx.send(None);
    });
}

#[cfg(test)]
mod tests;
