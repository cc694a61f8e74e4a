//! The engine apps of scenario files, beyond what `scenarios/` shows: the socket strategies
//! behind a NAT that filters by port, a standard client at an IPC server, the SCTP handshakes
//! falling back, and settings refused by name.

use fastshake_dtls::{NamedGroup, Versions};
use fastshake_lab::apps::dtls_client::DtlsClientLoop;
use fastshake_lab::apps::dtls_server::DtlsEchoServer;
use fastshake_lab::apps::scenario::engine_apps;
use fastshake_sim::scenario::{Report, Scenario};

/// A client behind a NAT (`preset`), a server 2 × 11 ms away, and `apps` (TOML).
fn behind_nat(preset: &str, apps: &str) -> String {
    format!(
        r#"
seed = 5
duration_s = 120

[[node]]
name = "client"
interfaces = [{{ name = "eth0", addr = "10.0.0.2" }}]

[[node]]
name = "nat"
role = "nat"
nat = {{ preset = "{preset}", timeout_s = 30 }}
inside = "in"
outside = "out"
interfaces = [{{ name = "in", addr = "10.0.0.1" }}, {{ name = "out", addr = "198.51.100.1" }}]

[[node]]
name = "server"
interfaces = [{{ name = "eth0", addr = "198.51.100.2" }}]

[[link]]
name = "lan"
a = "client.eth0"
b = "nat.in"
delay_ms = 1

[[link]]
name = "wan"
a = "nat.out"
b = "server.eth0"
delay_ms = 10
{apps}"#
    )
}

/// A DTLS client and server of `mobility` (server port `port`, client port `port + 30000`).
fn dtls_pair(mobility: &str, port: u16, extra_client: &str) -> String {
    format!(
        r#"
[[app]]
name = "{mobility}-client"
node = "client"
kind = "dtls-client"
port = {client_port}
server = "198.51.100.2:{port}"
mobility = "{mobility}"
records = 3
handshake_timeout_s = 20
{extra_client}

[[app]]
name = "{mobility}-server"
node = "server"
kind = "dtls-server"
port = {port}
mobility = "{mobility}"
session_ports_from = {ports}
"#,
        client_port = port + 30_000,
        ports = 50_000 + port % 100 * 100,
    )
}

fn run(text: &str) -> Report {
    let scenario = Scenario::from_toml(text).unwrap();
    scenario.run_with(None, false, None, &mut engine_apps).unwrap().report
}

fn handshakes(report: &Report, app: &str) -> (u64, u64) {
    let app = report.apps.iter().find(|a| a.name == app).unwrap_or_else(|| panic!("no app {app}"));
    let hs = app.handshakes.as_ref().expect("an engine app reports handshakes");
    (hs.completed, hs.failed)
}

/// Seed 001: IPC's ServerHello comes from a port the client never sent to, which a NAT that
/// filters by port drops; TCS announces its port inside the session and the client sends there
/// first, and CID keeps one port: both get through every NAT.
#[test]
fn ipc_fails_behind_a_port_restricted_nat_while_tcs_and_cid_complete() {
    let apps = [dtls_pair("ipc", 5684, ""), dtls_pair("tcs", 5685, ""), dtls_pair("cid", 5686, "")].concat();
    let report = run(&behind_nat("port-restricted", &apps));
    assert_eq!(handshakes(&report, "ipc-client"), (0, 1), "IPC's first flight is filtered");
    assert!(report.nats[0].counters.filtered > 0);
    assert_eq!(handshakes(&report, "tcs-client"), (1, 0));
    assert_eq!(handshakes(&report, "cid-client"), (1, 0));
    let full_cone = run(&behind_nat("full-cone", &apps));
    for app in ["ipc-client", "tcs-client", "cid-client"] {
        assert_eq!(handshakes(&full_cone, app), (1, 0), "{app} behind a full-cone NAT");
    }
}

/// A client that offers no `port_move` cannot follow a ServerHello from another port: an IPC
/// server serves it from the welcome port, as the real driver does.
#[test]
fn an_ipc_server_keeps_a_standard_client_on_its_welcome_port() {
    let apps =
        dtls_pair("ipc", 5684, "").replace("mobility = \"ipc\"\nrecords", "mobility = \"standard\"\nrecords");
    let scenario = Scenario::from_toml(&behind_nat("full-cone", &apps)).unwrap();
    let mut built = scenario.build_with(None, &mut engine_apps).unwrap();
    built.sim.run_until(built.duration);
    let report = built.report(None, 5, None);
    assert_eq!(handshakes(&report, "ipc-client"), (1, 0));
    assert_eq!(report.apps[0].replies, 3);
    let server = built.sim.app(1).as_any().and_then(|a| a.downcast_ref::<DtlsEchoServer>()).unwrap();
    assert_eq!(server.stayed_on_welcome_port(), ["the client did not offer port_move"]);
}

fn sctp_pair(client: &str, server: &str) -> String {
    format!(
        r#"
[[app]]
name = "client"
node = "client"
kind = "sctp-client"
port = 9899
server = "198.51.100.2:9899"
messages = 2
{client}

[[app]]
name = "server"
node = "server"
kind = "sctp-server"
port = 9899
{server}
"#
    )
}

fn kinds(report: &Report, app: &str) -> Vec<(String, u64)> {
    let app = report.apps.iter().find(|a| a.name == app).unwrap();
    app.handshakes.as_ref().unwrap().kinds.clone().into_iter().collect()
}

/// The alternative handshake behind a NAT, and falling back to the regular one when a side does
/// not speak it (seed 004: the ALT-* parameters are skipped as unknown).
#[test]
fn sctp_handshakes_behind_a_nat_and_their_fallback() {
    let cases = [
        ("zero_rtt = true", "", "alt-cookie+0rtt"),
        ("zero_rtt = true\nassociations = 2\ncache_cookie = true", "", "alt-cached+0rtt"),
        ("zero_rtt = true", "cookieless = true", "cookieless+0rtt"),
        ("zero_rtt = true", "handshake = \"regular\"", "regular"),
        ("handshake = \"regular\"", "handshake = \"both\"", "regular"),
        ("", "handshake = \"alt-only\"", "alt-cookie"),
    ];
    for (client, server, kind) in cases {
        let report = run(&behind_nat("port-restricted", &sctp_pair(client, server)));
        let hs = report.apps[0].handshakes.as_ref().unwrap();
        assert_eq!((hs.failed, hs.sessions_failed), (0, 0), "{client} / {server}: {hs:?}");
        assert_eq!(hs.planned, Some(hs.completed), "{client} / {server}");
        assert!(kinds(&report, "client").iter().any(|(k, _)| k == kind), "{client} / {server}: {hs:?}");
        assert_eq!(report.apps[0].replies, 2 * hs.completed, "{client} / {server}");
    }
}

#[test]
fn settings_are_refused_by_name() {
    let cases = [
        (dtls_pair("cid", 5684, "record = 3"), "record"),
        (dtls_pair("cid", 5684, "suite = \"rc4\""), "rc4"),
        (dtls_pair("cid", 5684, "suite = \"ecdsa\"\npsk = \"00\""), "takes no PSK"),
        (
            dtls_pair("cid", 5684, "").replace("mobility = \"cid\"\nsession", "mobility = \"x\"\nsession"),
            "ipc",
        ),
        (
            dtls_pair("cid", 5684, "dtls = \"1.4\""),
            "dtls = \"1.4\": accepted values are \"1.2\", \"1.3\" and \"both\"",
        ),
        (dtls_pair("cid", 5684, "dtls = 1.3"), "dtls = 1.3: accepted values"),
        (dtls_pair("cid", 5684, "").replace("session_ports", "dtls = \"2\"\nsession_ports"), "\"both\""),
        (dtls_pair("cid", 5684, "dtls = \"1.3\"\ngroups = [\"x448\"]"), "unknown group `x448`"),
        (dtls_pair("cid", 5684, "groups = [\"x25519\"]"), "groups: DTLS 1.3 key-exchange groups"),
        (dtls_pair("cid", 5684, "suite = \"TLS_AES_128_GCM_SHA256\""), "set dtls = \"1.3\""),
        (
            dtls_pair("cid", 5684, "dtls = \"1.3\"\nsuite = \"TLS_PSK_WITH_AES_128_CCM_8\""),
            "is a DTLS 1.2 suite",
        ),
        (sctp_pair("handshake = \"alt-only\"", ""), "alt or regular"),
        (sctp_pair("", "cookies = true"), "cookies"),
    ];
    for (apps, word) in cases {
        let scenario = Scenario::from_toml(&behind_nat("full-cone", &apps)).unwrap();
        let err = scenario.build_with(None, &mut engine_apps).map(|_| ()).unwrap_err().to_string();
        assert!(err.contains(word), "{word}: {err}");
    }
}

/// The certificate suites run with the lab's test PKI, client certificate required.
#[test]
fn ecdsa_sessions_resume_by_ticket() {
    let apps = dtls_pair("cid", 5684, "suite = \"ecdsa-gcm\"\nsessions = 2\nresume = true")
        .replace("session_ports_from", "suite = \"ecdsa-gcm\"\nsession_ports_from");
    let report = run(&behind_nat("symmetric", &apps));
    assert_eq!(kinds(&report, "cid-client"), [("full".into(), 2), ("resumed-ticket".into(), 2)]);
    assert_eq!(report.apps[0].replies, 12);
}

/// `dtls` and `groups` reach the engine: a server of both versions serves a DTLS 1.2 client, a
/// DTLS 1.3 one and one of both, and names their kinds apart, and a 1.3 client's groups decide its key
/// exchange (a group the server takes, or PSK alone with none).
#[test]
fn dtls13_apps_take_the_version_and_the_groups() {
    let client = |name: &str, port: u16, server_port: u16, extra: &str| {
        format!(
            "\n[[app]]\nname = \"{name}\"\nnode = \"client\"\nkind = \"dtls-client\"\nport = {port}\n\
             server = \"198.51.100.2:{server_port}\"\nrecords = 2\n{extra}\n"
        )
    };
    let server = |name: &str, port: u16, extra: &str| {
        format!("\n[[app]]\nname = \"{name}\"\nnode = \"server\"\nkind = \"dtls-server\"\nport = {port}\n{extra}\n")
    };
    let apps = [
        client("v12", 40000, 5684, ""),
        client("v13", 41000, 5684, "dtls = \"1.3\""),
        client("any", 44000, 5684, "dtls = \"both\""),
        client("p256", 42000, 5685, "dtls = \"1.3\"\ngroups = [\"x25519\", \"secp256r1\"]"),
        client("psk-ke", 43000, 5685, "dtls = \"1.3\"\ngroups = []"),
        server("both", 5684, "dtls = \"both\""),
        server("p256-only", 5685, "dtls = \"1.3\"\ngroups = [\"secp256r1\"]"),
    ]
    .concat();
    let scenario = Scenario::from_toml(&behind_nat("full-cone", &apps)).unwrap();
    let mut built = scenario.build_with(None, &mut engine_apps).unwrap();
    built.sim.run_until(built.duration);
    let report = built.report(None, 5, None);
    assert_eq!(kinds(&report, "both"), [("dtls13-full".into(), 2), ("full".into(), 1)]);
    assert_eq!(kinds(&report, "any"), [("dtls13-full".into(), 1)], "a client of both gets 1.3");
    assert_eq!(kinds(&report, "v12"), [("full".into(), 1)]);
    assert_eq!(kinds(&report, "p256-only"), [("dtls13-full".into(), 2)]);
    let sample = |app: usize| {
        let client = built.sim.app(app).as_any().and_then(|a| a.downcast_ref::<DtlsClientLoop>()).unwrap();
        assert_eq!(client.tally.requests_echoed, 2, "client {app}");
        let s = client.tally.samples[0];
        (s.version, s.group)
    };
    assert_eq!(sample(0), (Versions::Dtls12, None));
    assert_eq!(sample(1), (Versions::Dtls13, Some(NamedGroup::X25519)));
    assert_eq!(sample(3), (Versions::Dtls13, Some(NamedGroup::Secp256r1)), "asked for the server's group");
    assert_eq!(sample(4), (Versions::Dtls13, None), "psk_ke");
}
