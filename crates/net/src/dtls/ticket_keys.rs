//! Ticket keys (RFC 5077) shared by every worker: rotated by the server once for all, or read
//! from a fleet's key file when it changes or on request.

use super::seeds::os_ticket_key;
use super::server::{ServerCommand, ServerEvent};
use fastshake_dtls::TicketKeys;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How often the ticket-key file's modification time is checked.
const TICKET_FILE_POLL: Duration = Duration::from_millis(250);

/// The ticket keys every worker of one server uses, rotated here once for all, so that a ticket
/// one worker made opens at every other.
pub(super) struct SharedKeys {
    /// The ticket keys, when this server rotates them (not with keys from a file).
    pub(super) tickets: std::sync::Mutex<Option<TicketKeys>>,
    /// Weak, so that dropping the server and its controllers still stops the workers.
    pub(super) workers: std::sync::Weak<[mpsc::UnboundedSender<ServerCommand>]>,
}

impl SharedKeys {
    /// Hands `command` to every worker; false once they have all stopped.
    fn to_every_worker(&self, command: impl Fn() -> ServerCommand) -> bool {
        let Some(workers) = self.workers.upgrade() else { return false };
        // Every worker gets it: no stopping at the first that has stopped.
        let mut delivered = false;
        for worker in workers.iter() {
            delivered |= worker.send(command()).is_ok();
        }
        delivered
    }

    pub(super) fn rotate_ticket_key(&self) -> bool {
        let mut tickets = self.tickets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(keys) = tickets.as_mut() else { return true };
        keys.rotate(os_ticket_key());
        let keys = keys.clone();
        self.to_every_worker(|| ServerCommand::SetTicketKeys(keys.clone()))
    }
}

/// Rotates the ticket key every `every`, until every worker has stopped. (Cookie keys follow
/// the server's `CookieSchedule`, which each worker reads on its own.)
pub(super) async fn rotate_ticket_keys(keys: Arc<SharedKeys>, every: Duration) {
    let every = every.max(Duration::from_millis(1));
    let Some(first) = tokio::time::Instant::now().checked_add(every) else { return };
    let mut timer = tokio::time::interval_at(first, every);
    timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        timer.tick().await;
        if !keys.rotate_ticket_key() {
            return;
        }
    }
}

/// Reads the ticket-key file when it changes or when asked, and hands the keys to every worker.
pub(super) async fn watch_ticket_keys(
    path: PathBuf,
    reload: Arc<tokio::sync::Notify>,
    workers: Arc<[mpsc::UnboundedSender<ServerCommand>]>,
    events: mpsc::UnboundedSender<ServerEvent>,
) {
    let mut stamp = crate::fleet::file_stamp(&path);
    let mut poll = tokio::time::interval(TICKET_FILE_POLL);
    loop {
        let asked = tokio::select! {
            _ = poll.tick() => false,
            _ = reload.notified() => true,
        };
        let now = crate::fleet::file_stamp(&path);
        if !asked && now == stamp {
            continue;
        }
        stamp = now;
        let event = match crate::fleet::load_ticket_keys(&path) {
            Ok(keys) => {
                let event = ServerEvent::TicketKeysReloaded {
                    current: keys.current.id,
                    with_previous: keys.previous.is_some(),
                };
                for worker in workers.iter() {
                    if worker.send(ServerCommand::SetTicketKeys(keys.clone())).is_err() {
                        return;
                    }
                }
                event
            }
            Err(error) => ServerEvent::TicketKeysUnreadable { error: error.to_string() },
        };
        if events.send(event).is_err() {
            return;
        }
    }
}
