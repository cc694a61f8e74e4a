//! `fastshake keys`: the ticket-key file a fleet of servers shares (`fastshake server --ticket-keys`).

use crate::say::say;
use anyhow::Context;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct KeysArgs {
    #[command(subcommand)]
    command: KeysCommand,
}

#[derive(clap::Subcommand, Debug)]
enum KeysCommand {
    /// Write a new ticket-key file (mode 0600) with one fresh current key.
    Ticket {
        /// The file to write (replaced if it exists).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Rotate a ticket-key file: a fresh key becomes current, the current one previous (tickets
    /// sealed under it still open), the previous one goes. Servers pick the file up by itself.
    Rotate {
        /// The file to rotate.
        file: PathBuf,
    },
}

pub fn run(args: KeysArgs) -> anyhow::Result<()> {
    match args.command {
        KeysCommand::Ticket { out } => {
            let keys = fastshake_net::fleet::create_ticket_key_file(&out)
                .with_context(|| format!("cannot write {}", out.display()))?;
            say!("fastshake keys: wrote {} (current key {:08x})", out.display(), keys.current.id);
        }
        KeysCommand::Rotate { file } => {
            let keys = fastshake_net::fleet::rotate_ticket_key_file(&file)
                .with_context(|| format!("cannot rotate {}", file.display()))?;
            let previous = keys.previous.as_ref().map_or(0, |k| k.id);
            say!(
                "fastshake keys: rotated {} (current key {:08x}, previous {previous:08x})",
                file.display(),
                keys.current.id
            );
        }
    }
    Ok(())
}
