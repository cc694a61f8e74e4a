//! `fastshake`: secure sessions over datagrams — server, client, pki, sctp, sim, lab, netlab,
//! demo. Thin: it parses, calls the libraries, prints. `fastshake bench` runs the separate
//! `fastshake-bench` binary, the one that links OpenSSL for its anchors.
#![forbid(unsafe_code)]

mod bench;
mod demo;
mod dtls_cmd;
mod keys_cmd;
mod lab_cmd;

mod netlab_cmd;
mod pki_cmd;
mod say;
mod sctp_cmd;
mod sim_cmd;
mod webrtc_cmd;
use clap::{Parser, Subcommand};
use say::say;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "fastshake",
    version,
    about = "Secure sessions over datagrams: fast to set up, cheap on the wire, alive across handovers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a DTLS server on a UDP socket: DTLS 1.3 and 1.2 (see --dtls).
    Server(dtls_cmd::ServerArgs),
    /// Run a DTLS client (1.3, falling back to 1.2; see --dtls): standard input out, what arrives to standard output.
    Client(dtls_cmd::ClientArgs),
    /// SCTP over UDP encapsulation, with the alternative handshake.
    Sctp(sctp_cmd::SctpArgs),
    /// Ticket keys shared by a fleet of servers: create a key file, rotate it.
    Keys(keys_cmd::KeysArgs),
    /// Write a test PKI: a root, intermediates, and server and client leaves with their keys.
    Pki(pki_cmd::PkiArgs),
    /// Run a simulator scenario (TOML) in virtual time.
    Sim(sim_cmd::SimArgs),
    /// Re-run the papers' experiments and put our figures beside theirs.
    Lab(lab_cmd::LabArgs),
    /// Test hosts in network namespaces: build, tear down, and the delay relay that runs inside them.
    #[command(hide = true)]
    Netlab(netlab_cmd::NetlabArgs),
    /// Benchmarks that print figures beside their anchors (runs fastshake-bench).
    Bench(bench::BenchArgs),
    /// A server and a client over loopback, and what happened between them.
    Demo(demo::DemoArgs),
    /// WebRTC data channels with browsers: ICE-lite, DTLS 1.2/1.3, SCTP over DTLS, DCEP.
    Webrtc(webrtc_cmd::WebrtcArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Server(args) => dtls_cmd::server(args),
        Command::Client(args) => dtls_cmd::client(args),
        Command::Sctp(args) => sctp_cmd::run(args),
        Command::Keys(args) => keys_cmd::run(args),
        Command::Pki(args) => pki_cmd::run(args),
        Command::Sim(args) => sim_cmd::run(args),
        Command::Lab(args) => lab_cmd::run(args),
        Command::Netlab(args) => netlab_cmd::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Webrtc(args) => webrtc_cmd::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say!("fastshake: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
