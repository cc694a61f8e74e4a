//! `fastshake webrtc`: data channels with browsers.

use std::net::SocketAddr;

use fastshake_net::webrtc::{connect, serve, ConnectOptions, ServerNote, WebrtcOptions};
use fastshake_webrtc::peer::PeerEvent;

use crate::dtls_cmd::{parse_group, DtlsArg};
use crate::say::say;

/// `fastshake webrtc`.
#[derive(clap::Args, Debug)]
pub struct WebrtcArgs {
    #[command(subcommand)]
    command: WebrtcCommand,
}

#[derive(clap::Subcommand, Debug)]
enum WebrtcCommand {
    /// A data-channel server for browsers: a page and `POST /offer` (SDP offer in, answer out)
    /// at --http, ICE (lite unless --ice full), DTLS and SCTP for every session on one UDP
    /// socket. Echoes messages.
    Serve(ServeArgs),
    /// Open a session to a data-channel server (ours, or another stack's) by posting an offer
    /// to URL, send messages on a reliable channel, and report how long each step took.
    Connect(ConnectArgs),
}

#[derive(clap::Args, Debug)]
struct ConnectArgs {
    /// The server's offer URL, e.g. http://127.0.0.1:8080/offer.
    url: String,
    /// DTLS versions offered: 1.2, 1.3, or both.
    #[arg(long, value_name = "VERSION", value_enum, default_value = "both")]
    dtls: DtlsArg,
    /// DTLS 1.3 groups, the first with a key share (default: x25519mlkem768,x25519,secp256r1).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_group)]
    groups: Vec<fastshake_dtls::NamedGroup>,
    /// Messages sent, each to be echoed back.
    #[arg(long, value_name = "N", default_value_t = 10)]
    messages: usize,
    /// Bytes per message.
    #[arg(long, value_name = "BYTES", default_value_t = 64)]
    size: usize,
    /// Give up after this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    timeout: f64,
    /// How SCTP opens inside DTLS: regular (RFC 9260's four-way handshake, what browsers and
    /// pion speak) or alt (seed 004's alternative handshake, cookieless since DTLS proved the
    /// peer: the channel's OPEN rides in the INIT; a server that does not know it answers the
    /// regular way), or snap (our INIT in the offer's a=sctp-init, the server's in the answer:
    /// no handshake packet at all; without one in the answer, the regular handshake).
    #[arg(long, value_name = "HANDSHAKE", value_enum, default_value = "regular")]
    sctp: SctpArg,
}

/// `--sctp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum SctpArg {
    Regular,
    Alt,
    Snap,
}

#[derive(clap::Args, Debug)]
struct ServeArgs {
    /// HTTP address of the page and of `POST /offer`.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    http: SocketAddr,
    /// UDP address of every session (port 0: any). Its IP is the answer's host candidate, so
    /// give one the browser can reach, not a wildcard. Default: the --http IP, any port.
    #[arg(long, value_name = "ADDR")]
    udp: Option<SocketAddr>,
    /// DTLS versions: 1.2, 1.3, or both (each browser gets the highest it offers).
    #[arg(long, value_name = "VERSION", value_enum, default_value = "both")]
    dtls: DtlsArg,
    /// DTLS 1.3 key-exchange groups, most preferred first (default: the x25519mlkem768 hybrid,
    /// then x25519, secp256r1).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_group)]
    groups: Vec<fastshake_dtls::NamedGroup>,
    /// Keep messages instead of echoing them.
    #[arg(long)]
    no_echo: bool,
    /// Sessions held at most.
    #[arg(long, value_name = "N", default_value_t = 256)]
    max_sessions: usize,
    /// Exit after this many pages reported their results to `POST /report` (tests, benches).
    #[arg(long, value_name = "N")]
    until_reports: Option<usize>,
    /// Print every session event, not only sessions opening and closing.
    #[arg(long, short)]
    verbose: bool,
    /// The ICE agent: lite answers with a=ice-lite and sends only after the browser nominates
    /// (RFC 8445 §12.1.1); full checks back every address the browser checks from and sends on
    /// the first valid pair before the nomination (RFC 8445 §12.1), which gets the first byte
    /// to Chromium about 50 ms sooner (it nominates one 48 ms ping after its check succeeds).
    #[arg(long, value_name = "MODE", value_enum, default_value = "lite")]
    ice: IceArg,
    /// Never run the DTLS handshake in STUN (draft-hancke-webrtc-sped), even with a browser
    /// whose offer announces it (Chromium's WebRTC-IceHandshakeDtls trial): its checks are then
    /// answered without the attributes, and it falls back to plain DTLS.
    #[arg(long)]
    no_dtls_in_stun: bool,
}

/// `--ice`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum IceArg {
    Lite,
    Full,
}

/// Runs `fastshake webrtc`.
pub fn run(args: WebrtcArgs) -> anyhow::Result<()> {
    let args = match args.command {
        WebrtcCommand::Serve(args) => args,
        WebrtcCommand::Connect(args) => return connect_cmd(args),
    };
    if args.udp.is_some_and(|a| a.ip().is_unspecified())
        || args.http.ip().is_unspecified() && args.udp.is_none()
    {
        anyhow::bail!(
            "--udp needs an address a browser can reach (its IP goes into the answer), not a wildcard"
        );
    }
    let options = WebrtcOptions {
        http: args.http,
        udp: args.udp.unwrap_or(SocketAddr::new(args.http.ip(), 0)),
        versions: args.dtls.versions(),
        groups: if args.groups.is_empty() {
            fastshake_dtls::NamedGroup::WITH_HYBRID.to_vec()
        } else {
            args.groups.clone()
        },
        echo: !args.no_echo,
        max_sessions: args.max_sessions,
        until_reports: args.until_reports,
        ice_mode: match args.ice {
            IceArg::Lite => fastshake_webrtc::ice::IceMode::Lite,
            IceArg::Full => fastshake_webrtc::ice::IceMode::Full,
        },
        dtls_in_stun: !args.no_dtls_in_stun,
    };
    let verbose = args.verbose;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(serve(options, |note, _| print_note(note, verbose)))?;
    Ok(())
}

fn print_note(note: ServerNote, verbose: bool) {
    match note {
        ServerNote::Listening { http, udp, fingerprint } => {
            println!("webrtc: page and signalling at http://{http}/ (POST /offer), sessions on udp {udp}");
            println!("webrtc: certificate sha-256 {fingerprint}");
        }
        ServerNote::Answered(id) => say!("session {}: offer answered", id.0),
        ServerNote::Refused(why) => say!("refused: {why}"),
        ServerNote::Report(text) => println!("report: {text}"),
        ServerNote::Session(id, event) => {
            match event {
                PeerEvent::DtlsConnected(s) => println!(
                    "session {}: DTLS {} {} group {} in {:.1} ms{}",
                    id.0,
                    if s.version == fastshake_dtls::Versions::Dtls13 { "1.3" } else { "1.2" },
                    s.suite.iana_name(),
                    s.group.map_or("-", |g| g.name()),
                    s.duration.as_secs_f64() * 1e3,
                    if s.hello_retry { ", HelloRetryRequest" } else { "" },
                ),
                PeerEvent::DtlsInStun { received, sent } => println!(
                    "session {}: DTLS handshake in STUN: {received} datagrams taken from checks, {sent} sent in responses",
                    id.0
                ),
                PeerEvent::ChannelOpened { stream, label, protocol, channel_type } => {
                    println!("session {}: channel {stream} {label:?} opened ({channel_type}, protocol {protocol:?})", id.0)
                }
                PeerEvent::Closed(why) => println!("session {}: closed: {why}", id.0),
                PeerEvent::SctpConnected { handshake, zero_rtt } => {
                    println!(
                        "session {}: SCTP open ({handshake:?} handshake, {zero_rtt} messages in the INIT)",
                        id.0
                    )
                }
                PeerEvent::ChannelClosed { stream, label } => {
                    println!("session {}: channel {stream} {label:?} closed", id.0)
                }
                PeerEvent::ChannelError(why) => say!("session {}: {why}", id.0),
                PeerEvent::Message { stream, data, .. } if verbose => {
                    println!("session {}: {} bytes on channel {stream}", id.0, data.len())
                }
                other if verbose => println!("session {}: {other:?}", id.0),
                _ => {}
            }
        }
    }
}

fn connect_cmd(args: ConnectArgs) -> anyhow::Result<()> {
    let options = ConnectOptions {
        url: args.url.clone(),
        versions: args.dtls.versions(),
        groups: if args.groups.is_empty() {
            fastshake_dtls::NamedGroup::WITH_HYBRID.to_vec()
        } else {
            args.groups.clone()
        },
        messages: args.messages,
        size: args.size,
        timeout: std::time::Duration::from_secs_f64(args.timeout.max(0.1)),
        sctp_setup: match args.sctp {
            SctpArg::Regular => fastshake_webrtc::client::SctpSetup::Regular,
            SctpArg::Alt => fastshake_webrtc::client::SctpSetup::Alternative,
            SctpArg::Snap => fastshake_webrtc::client::SctpSetup::Snap,
        },
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let report = runtime
        .block_on(connect(options))
        .map_err(|e| anyhow::anyhow!("webrtc connect {}: {e}", args.url))?;
    let ms = |d: Option<std::time::Duration>| {
        d.map_or("-".to_string(), |d| format!("{:.1} ms", d.as_secs_f64() * 1e3))
    };
    if let Some(s) = &report.dtls {
        println!(
            "DTLS {} {} group {}{}",
            if s.version == fastshake_dtls::Versions::Dtls13 { "1.3" } else { "1.2" },
            s.suite.iana_name(),
            s.group.map_or("-", |g| g.name()),
            if s.hello_retry { ", HelloRetryRequest" } else { "" },
        );
    }
    println!(
        "channel open {}, first echo {} (from the first connectivity check); {} of {} messages echoed, {} duplicated or changed; channel {}",
        ms(report.channel_open),
        ms(report.first_echo),
        report.echoed,
        args.messages,
        report.bad,
        if report.channel_closed { "closed" } else { "left open" }
    );
    if report.bad > 0 {
        anyhow::bail!("{} messages came back duplicated or changed", report.bad);
    }
    Ok(())
}
