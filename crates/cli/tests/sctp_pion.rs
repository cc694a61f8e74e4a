//! Interoperability of `fastshake sctp` with pion/sctp (the SCTP stack of pion/webrtc) over UDP
//! encapsulation on loopback, both directions: our client against pion's server and pion's client
//! against ours, the regular handshake, and our alternative handshake falling back to the
//! regular one (pion skips the ALT-* parameters by their high bits `10`). pion/sctp uses SCTP
//! port 5000 on both ends when it initiates.
//!
//! Every exchange checks the data both ways (each message exactly once) and that nothing was
//! sent twice on loopback, from our engine's counters ("resent:" line) and from the chunks
//! pion-sctp-peer counted on its socket: a stall is a failure, not a slow pass.
//!
//! The Go peer is built from `interop/pion-sctp`; without Go or the module the tests skip, unless
//! `FASTSHAKE_REQUIRE_PION_SCTP=1`.

use fastshake_sctp::packet::{InitChunk, Param, UnknownParamAction};
use fastshake_testkit::peers::pion;
use fastshake_testkit::peers::sctp::{
    assert_alt_only_answers, assert_served_regular_client, client_inits, resent, Relay, Resent,
};
use fastshake_testkit::peers::{Fastshake, Peer};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

/// The SCTP port pion/sctp always uses.
const PION_SCTP_PORT: &str = "5000";

/// Chunk counts by type from pion-sctp-peer's "wire out" or "wire in" line.
type Wire = BTreeMap<String, u64>;

/// pion's echo server on `port`, ready.
fn start_pion_server(binary: &Path, port: u16) -> Peer {
    let args = ["server", "--listen", &format!("127.0.0.1:{port}"), "--echo", "--time-limit", "30s"];
    let server = Peer::start(binary, &args.map(String::from));
    assert!(server.stderr.wait_for("listening on", Duration::from_secs(10)), "{}", server.transcript());
    server
}

/// What pion's side sent and received on the wire, once it has exited.
fn pion_side(pion: &mut Peer) -> (Wire, Wire) {
    let status = pion.wait_timeout(Duration::from_secs(15));
    assert!(
        status.is_some_and(|s| s.success()),
        "pion-sctp-peer did not end cleanly: {status:?}\n{}",
        pion.transcript()
    );
    let stderr = pion.stderr.text();
    (pion::sctp_wire(&stderr, "wire out"), pion::sctp_wire(&stderr, "wire in"))
}

/// Nothing went twice: one INIT and one COOKIE-ECHO from the initiator, no DATA resent, at
/// most one SHUTDOWN and SHUTDOWN-ACK, and no ABORT.
fn assert_nothing_resent_by_pion(out: &Wire, report: &str) {
    for (chunk, most) in [
        ("INIT", 1),
        ("COOKIE-ECHO", 1),
        ("DATA resent", 0),
        ("SHUTDOWN", 1),
        ("SHUTDOWN-ACK", 1),
        ("ABORT", 0),
    ] {
        assert!(
            out[chunk] <= most,
            "pion sent {} {chunk} (at most {most} on loopback)\n{report}",
            out[chunk]
        );
    }
}

/// Runs our client through a recording relay against pion's echo server with `extra` arguments
/// and `payload` on standard input; checks the echo and pion's reception, each exactly once.
/// Returns our client, pion's wire counts (out, in) and the datagrams the relay saw.
fn our_client_against_pion(
    binary: &Path,
    extra: &[&str],
    payload: &[u8],
    prepare: impl FnOnce(u16),
) -> (Peer, Wire, Wire, Vec<(bool, Vec<u8>)>) {
    let relay = Relay::start();
    let mut pion = start_pion_server(binary, relay.server_port);
    prepare(relay.port);
    let mut client = FASTSHAKE.sctp_echo_client(relay.port, PION_SCTP_PORT, payload, extra);
    let status = client.wait_timeout(Duration::from_secs(30));
    let report = format!("{}\n{}", client.transcript(), pion.transcript());
    assert!(status.is_some_and(|s| s.success()), "our client failed: {status:?}\n{report}");
    assert_eq!(client.stdout.bytes(), payload, "the echo comes back exactly once\n{report}");
    assert!(client.stderr.text().contains("closed gracefully"), "graceful shutdown\n{report}");
    let (out, inn) = pion_side(&mut pion);
    let report = format!("{}\n{}", client.transcript(), pion.transcript());
    assert_eq!(pion.stdout.bytes(), payload, "pion received every byte exactly once\n{report}");
    assert!(pion.stderr.text().contains("association ended"), "{report}");
    assert_nothing_resent_by_pion(&out, &report);
    assert_eq!(inn["DATA resent"], 0, "our client sent no DATA twice\n{report}");
    (client, out, inn, relay.datagrams())
}

/// One INIT, nothing in it pion stops at (its high bits `00`/`01` and unknown to pion).
fn assert_one_init_pion_can_take(wire: &[(bool, Vec<u8>)], report: &str) -> InitChunk {
    let inits = client_inits(wire);
    assert_eq!(inits.len(), 1, "one INIT, answered at once\n{report}");
    for p in &inits[0].params {
        assert!(UnknownParamAction::of(p.param_type()).continues(), "INIT carries {p:?}\n{report}");
    }
    inits[0].clone()
}

#[test]
fn our_regular_client_with_pion_server() {
    let Some(binary) = pion::sctp_peer() else { return };
    let payload = b"hello pion/sctp, from fastshake's regular handshake\nand a second line\n";
    let (client, out, inn, wire) = our_client_against_pion(&binary, &["--mode", "regular"], payload, |_| {});
    let stderr = client.stderr.text();
    assert!(stderr.contains("regular handshake, 2 round trip(s)"), "{stderr}");
    let init = assert_one_init_pion_can_take(&wire, &stderr);
    assert!(init.params.iter().all(|p| !p.is_alt()), "a regular-mode client sends no ALT-* parameter");
    assert_eq!(resent(&stderr, "sctp client:"), Resent::default(), "nothing resent on loopback\n{stderr}");
    assert_eq!((out["INIT-ACK"], out["COOKIE-ACK"], inn["COOKIE-ECHO"]), (1, 1, 1));
}

/// Our client asks for the alternative handshake (an empty ALT-COOKIE in the INIT); pion skips
/// the parameter and answers with a regular INIT-ACK, and the regular handshake follows.
#[test]
fn our_alt_client_falls_back_to_the_regular_handshake_with_pion_server() {
    let Some(binary) = pion::sctp_peer() else { return };
    let payload = b"alternative handshake asked, regular one taken\n";
    let (client, out, _, wire) = our_client_against_pion(&binary, &["--mode", "both"], payload, |_| {});
    let stderr = client.stderr.text();
    let init = assert_one_init_pion_can_take(&wire, &stderr);
    assert!(
        init.params.contains(&Param::AltCookie(Vec::new())),
        "the INIT asks for an ALT-COOKIE: {:?}",
        init.params
    );
    assert!(stderr.contains("regular handshake, 2 round trip(s)"), "fallback\n{stderr}");
    assert_eq!(resent(&stderr, "sctp client:"), Resent::default(), "nothing resent on loopback\n{stderr}");
    assert_eq!((out["INIT-ACK"], out["ERROR"]), (1, 0), "pion answered with an INIT-ACK, no ERROR");
}

/// The same with a cached ALT-COOKIE pion cannot know and zero-RTT data in ALT-DATA: pion
/// skips both, the handshake is regular, and the message goes again as DATA — delivered once.
#[test]
fn our_alt_client_with_cached_cookie_and_zero_rtt_falls_back_with_pion_server() {
    let Some(binary) = pion::sctp_peer() else { return };
    let dir = std::env::temp_dir().join(format!("fastshake-sctp-pion-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let cache = dir.join("cookies");
    let cache_arg = cache.display().to_string();
    let payload = b"zero-RTT data pion must see exactly once\n";
    let (client, _, _, wire) = our_client_against_pion(
        &binary,
        &["--mode", "both", "--zero-rtt", "--cookie-cache", &cache_arg],
        payload,
        |relay_port| {
            let line = format!("127.0.0.1 127.0.0.1:{relay_port} {}\n", "ab".repeat(16));
            std::fs::write(&cache, line).expect("writing the cookie cache");
        },
    );
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = client.stderr.text();
    assert!(stderr.contains("cached ALT-COOKIE offered"), "{stderr}");
    let init = assert_one_init_pion_can_take(&wire, &stderr);
    assert!(init.params.contains(&Param::AltCookie(vec![0xab; 16])), "{:?}", init.params);
    let alt_data = init.params.iter().find_map(|p| match p {
        Param::AltData(d) => Some(d.clone()),
        _ => None,
    });
    assert!(
        alt_data.is_some_and(|d| d.windows(payload.len()).any(|w| w == payload)),
        "zero-RTT data in ALT-DATA"
    );
    assert!(
        stderr.contains("regular handshake") && stderr.contains("0 zero-RTT message(s) accepted"),
        "{stderr}"
    );
    // The one DATA chunk sent again is the zero-RTT message pion did not take, by design; no
    // timer fired.
    let expected = Resent { data: 1, ..Resent::default() };
    assert_eq!(resent(&stderr, "sctp client:"), expected, "{stderr}");
}

/// pion's client opens an association to our server (`mode` both or regular), sends lines,
/// reads our echo and shuts down gracefully.
fn pion_client_with_our_server(mode: &str) {
    let Some(binary) = pion::sctp_peer() else { return };
    let (mut server, our_port) =
        FASTSHAKE.sctp_server(PION_SCTP_PORT, &["--mode", mode, "--echo", "--exit-after", "1"]);
    let client_args = ["client", "--connect", &format!("127.0.0.1:{our_port}"), "--time-limit", "30s"];
    let mut client = Peer::start(&binary, &client_args.map(String::from));
    let lines = ["hello fastshake, from pion/sctp\n", "a second line\n", "and a third\n"];
    for line in lines {
        client.write(line.as_bytes());
    }
    client.close_stdin();
    let (out, inn) = pion_side(&mut client);
    let all = lines.concat();
    let report = assert_served_regular_client(&mut server, &client, "pion", &all);
    assert_eq!(client.stdout.text(), all, "pion got every echo exactly once, in order\n{report}");
    assert!(client.stderr.text().contains("closed gracefully"), "{report}");
    assert_nothing_resent_by_pion(&out, &report);
    assert_eq!(
        (out["INIT"], out["COOKIE-ECHO"], inn["INIT-ACK"], inn["COOKIE-ACK"]),
        (1, 1, 1, 1),
        "{report}"
    );
    assert_eq!(inn["DATA resent"], 0, "{report}");
}

#[test]
fn pion_client_with_our_server_in_both_mode() {
    pion_client_with_our_server("both");
}

#[test]
fn pion_client_with_our_regular_server() {
    pion_client_with_our_server("regular");
}

/// Our alternative-only server facing pion's client, which does not know the extension: every
/// INIT gets a small ERROR with an ALT-COOKIE, never an INIT-ACK with a state cookie, and no
/// association opens (the mode excludes peers without the extension, as the paper says).
#[test]
fn alt_only_server_answers_pion_client_without_amplification() {
    let Some(binary) = pion::sctp_peer() else { return };
    let (server, port) = FASTSHAKE.sctp_server(PION_SCTP_PORT, &["--mode", "alt"]);
    let relay = Relay::to(port);
    let client_args = ["client", "--connect", &format!("127.0.0.1:{}", relay.port), "--time-limit", "10s"];
    let mut client = Peer::start(&binary, &client_args.map(String::from));
    client.write(b"never delivered\n");
    // pion sends its INIT again after RTO.Initial: wait for the second one.
    let wire = relay.wait_for_client_inits(2, Duration::from_secs(8));
    drop(client);
    let report = server.transcript();
    assert_alt_only_answers(&wire, "pion", (1, 1), &report);
    assert!(!server.stderr.text().contains("opened by"), "no association opens\n{report}");
}
