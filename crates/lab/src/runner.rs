//! What the real-network runners (`netlab chaos`, `netlab e1`) share: Ctrl-C handling, and the
//! peer processes they drive line by line over standard input and output.

use anyhow::{bail, Context};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Set by Ctrl-C / SIGTERM: the runner stops at its next step and its destructors clean up.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Ctrl-C and SIGTERM set the interrupt flag instead of killing the process, so the runner stops
/// and the destructors stop the processes and remove the namespaces.
pub(crate) fn watch_for_interrupts() {
    std::thread::spawn(|| {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
        runtime.block_on(async {
            use tokio::signal::unix::{signal, SignalKind};
            let Ok(mut terminate) = signal(SignalKind::terminate()) else { return };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
            INTERRUPTED.store(true, Ordering::SeqCst);
        });
    });
}

/// An error once Ctrl-C or SIGTERM has arrived.
pub(crate) fn check_interrupt() -> anyhow::Result<()> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        bail!("interrupted");
    }
    Ok(())
}

/// A child process that talks in lines: its standard input, and what it prints.
pub(crate) struct LineProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    name: &'static str,
}

impl LineProcess {
    /// Spawns `command` with piped standard input and output; `name` says which process it is
    /// in errors ("the {name} exited early").
    pub(crate) fn start(mut command: Command, name: &'static str) -> anyhow::Result<LineProcess> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting the {name}"))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().context("the process's output")?;
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(LineProcess { child, stdin, lines, name })
    }

    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    pub(crate) fn tell(&mut self, line: &str) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().with_context(|| format!("the {} has no input", self.name))?;
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .with_context(|| format!("telling the {}", self.name))
    }

    /// The next line, or None at `deadline`.
    pub(crate) fn next_line(&self, deadline: Instant) -> anyhow::Result<Option<String>> {
        match self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => Ok(Some(line)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => {
                // Ctrl-C reaches the children too: give the runner's own handler a moment to say so.
                std::thread::sleep(Duration::from_millis(100));
                check_interrupt()?;
                bail!("the {} exited early", self.name)
            }
        }
    }

    /// Waits up to `timeout` for a line that `pick` takes, and returns what it made of it;
    /// `wanted` names that line in the error.
    pub(crate) fn wait_for<T>(
        &self,
        wanted: &str,
        timeout: Duration,
        pick: impl Fn(&str) -> Option<T>,
    ) -> anyhow::Result<T> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.next_line(deadline)? {
                Some(line) => {
                    if let Some(picked) = pick(&line) {
                        return Ok(picked);
                    }
                }
                None => bail!("the {} printed no `{wanted}` within {timeout:?}", self.name),
            }
        }
    }

    /// Closes its standard input, then waits for it to exit, at most `limit` if given.
    pub(crate) fn close_and_wait(&mut self, limit: Option<Duration>) {
        drop(self.stdin.take());
        let Some(limit) = limit else {
            let _ = self.child.wait();
            return;
        };
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for LineProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
