//! Heap allocations per application record through the real tokio server driver on loopback:
//! a `DtlsServer` in this process echoes the records of a `fastshake client` in another process
//! (so only the server's allocations are counted), once as the server did before records could be
//! read in place (each record an event with a copy, answered through the server's controller) and
//! once with a record handler (opened in place, answered into the driver's own buffers).

use crate::GLOBAL;
use anyhow::{bail, Context};
use fastshake_dtls::Versions;
use fastshake_dtls::{Psk, ServerConfig};
use fastshake_net::dtls::{DtlsServer, RecordHandler, Replies, ServerEvent, ServerOptions, SessionHandle};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// Records echoed in each measurement (after as many again to warm up).
    #[arg(long, value_name = "N", default_value_t = 2000)]
    records: usize,
    /// Bytes of each record's data (the client sends a line of this length, newline included).
    #[arg(long, value_name = "B", default_value_t = 64)]
    record_size: usize,
}

const IDENTITY: &str = "driver-bench";
const KEY: [u8; 16] = *b"0123456789abcdef";
/// Records in flight at most: the client's lines go out in batches, each awaited back, so that
/// no socket buffer on loopback overflows (records are not retransmitted).
const BATCH: usize = 50;
/// The longest wait for a batch's echoes.
const BATCH_TIMEOUT: Duration = Duration::from_secs(10);

/// How the server answers.
#[derive(Clone, Copy)]
enum Path {
    /// Each record an event carrying a copy, answered through the controller (the server's only
    /// way before record handlers).
    Events,
    /// A record handler reads the record in place and answers into the driver's buffers.
    InPlace,
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::Events => "records as events, answered through the controller",
            Path::InPlace => "records read in place by a handler (fastshake server --echo)",
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.record_size == 0 || args.records == 0 {
        bail!("--records and --record-size must be at least 1");
    }
    println!(
        "fastshake bench driver — heap allocations per application record through the tokio server driver"
    );
    println!(
        "   server: DtlsServer in this process (1 worker, PSK, loopback); client: a fastshake client process;"
    );
    println!(
        "   counted: every allocation and reallocation of this process while {} records are echoed",
        args.records
    );
    println!("   (one record received and one sent per echo), after {} to warm up.", args.records);
    if cfg!(debug_assertions) {
        println!(
            "WARNING: debug build; run `cargo run --release -p fastshake-bench -- driver` for real figures."
        );
    }
    println!("   {:<64} {:>14} {:>12}", "server path", "allocs/record", "records/s");
    for path in [Path::Events, Path::InPlace] {
        let (allocations, rate) = measure(path, &args)?;
        println!("   {:<64} {:>14.2} {:>12.0}", path.name(), allocations, rate);
    }
    println!("   target: 0 allocations per record on the in-place path");
    Ok(())
}

/// Allocations per echoed record and echoes per second on `path`.
fn measure(path: Path, args: &Args) -> anyhow::Result<(f64, f64)> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server =
        std::thread::spawn(move || -> anyhow::Result<()> { runtime.block_on(serve(path, addr_tx, stop_rx)) });
    let addr = addr_rx.recv_timeout(Duration::from_secs(10)).context("the server did not start")??;
    let measured = drive_client(addr, args);
    let _ = stop_tx.send(());
    server.join().map_err(|_| anyhow::anyhow!("the server thread panicked"))??;
    measured
}

async fn serve(
    path: Path,
    bound: std::sync::mpsc::Sender<anyhow::Result<SocketAddr>>,
    stop: tokio::sync::oneshot::Receiver<()>,
) -> anyhow::Result<()> {
    let config = ServerConfig {
        versions: Versions::Dtls12,
        psks: vec![Psk::new(IDENTITY.as_bytes(), KEY.to_vec())],
        ..ServerConfig::default()
    };
    let on_record = match path {
        Path::Events => None,
        Path::InPlace => {
            Some(Arc::new(|_: SessionHandle, record: &[u8], replies: &mut Replies<'_>| replies.send(record))
                as RecordHandler)
        }
    };
    let options = ServerOptions { workers: 1, on_record, ..ServerOptions::default() };
    let listen: SocketAddr = "127.0.0.1:0".parse().expect("literal");
    let mut server = match DtlsServer::bind(listen, Arc::new(config), options).await {
        Ok(server) => server,
        Err(e) => {
            let _ = bound.send(Err(e.into()));
            return Ok(());
        }
    };
    let _ = bound.send(Ok(server.local_addr()));
    let controller = server.controller();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            event = server.next_event() => match event {
                Some(ServerEvent::Data { handle, data, .. }) => {
                    let _ = controller.send(handle, data);
                }
                Some(_) => {}
                None => break,
            },
            _ = &mut stop => break,
        }
    }
    server.shutdown().await?;
    Ok(())
}

/// Runs the client, echoes the warm-up records, then counts this process's allocations while
/// `args.records` more are echoed.
fn drive_client(server: SocketAddr, args: &Args) -> anyhow::Result<(f64, f64)> {
    let mut child = crate::handshake::ChildGuard(
        Command::new(crate::fastshake_program()?)
            .args(["client", "--connect", &server.to_string(), "--psk-identity", IDENTITY])
            .args(["--psk", &hex::encode(KEY), "--linger", "100"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start fastshake client")?,
    );
    let mut stdin = child.0.stdin.take().context("no stdin pipe")?;
    let mut stdout = child.0.stdout.take().context("no stdout pipe")?;
    let mut line = vec![b'x'; args.record_size];
    line[args.record_size - 1] = b'\n';
    // Made before counting: the loop below allocates nothing of its own.
    let batch = line.repeat(BATCH);
    let mut buffer = vec![0u8; 64 * 1024];
    let mut echo = |stdin: &mut std::process::ChildStdin, count: usize| -> anyhow::Result<()> {
        let mut left = count;
        while left > 0 {
            let n = left.min(BATCH);
            stdin.write_all(&batch[..n * args.record_size])?;
            stdin.flush()?;
            let mut lines = 0;
            let started = Instant::now();
            while lines < n {
                if started.elapsed() > BATCH_TIMEOUT {
                    bail!("{} of {n} echoes came back (a record lost on loopback?)", lines);
                }
                let got = stdout.read(&mut buffer)?;
                if got == 0 {
                    bail!("the client ended");
                }
                lines += buffer[..got].iter().filter(|&&b| b == b'\n').count();
            }
            left -= n;
        }
        Ok(())
    };
    echo(&mut stdin, args.records)?;
    let before = GLOBAL.stats();
    let started = Instant::now();
    echo(&mut stdin, args.records)?;
    let elapsed = started.elapsed();
    let after = GLOBAL.stats();
    drop(stdin);
    let allocations = (after.allocations - before.allocations) + (after.reallocations - before.reallocations);
    Ok((allocations as f64 / args.records as f64, args.records as f64 / elapsed.as_secs_f64()))
}
