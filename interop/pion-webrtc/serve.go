package main

import (
	"flag"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pion/webrtc/v4"
)

// The largest offer read.
const maxOfferBytes = 64 * 1024

// How long an answer may wait for ICE gathering.
const gatheringTimeout = 10 * time.Second

type server struct {
	api      *webrtc.API
	sessions atomic.Int64
}

func serve(args []string) {
	flags := flag.NewFlagSet("serve", flag.ExitOnError)
	httpAddr := flags.String("http", "127.0.0.1:0", "address of POST /offer")
	role := flags.String("dtls-role", "auto",
		"DTLS role in answers: auto (pion's default, client: a=setup:active), server (a=setup:passive), client")
	ip := flags.String("ip", "",
		"gather the one host candidate on this address instead of loopback (a testbed's server address)")
	_ = flags.Parse(args)

	settings := webrtc.SettingEngine{}
	loopbackOnly(&settings)
	if *ip != "" {
		want := net.ParseIP(*ip)
		if want == nil {
			fail("--ip %q is not an IP address", *ip)
		}
		settings.SetIPFilter(func(candidate net.IP) bool { return candidate.Equal(want) })
	}
	switch *role {
	case "auto":
	case "server":
		if err := settings.SetAnsweringDTLSRole(webrtc.DTLSRoleServer); err != nil {
			fail("dtls role: %v", err)
		}
	case "client":
		if err := settings.SetAnsweringDTLSRole(webrtc.DTLSRoleClient); err != nil {
			fail("dtls role: %v", err)
		}
	default:
		fail("--dtls-role takes auto, server or client, not %q", *role)
	}
	srv := &server{api: webrtc.NewAPI(webrtc.WithSettingEngine(settings))}

	listener, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		fail("listen on %s: %v", *httpAddr, err)
	}
	say("listening http://%s", listener.Addr())
	mux := http.NewServeMux()
	mux.HandleFunc("/offer", srv.offer)
	httpServer := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	if err := httpServer.Serve(listener); err != nil {
		fail("http: %v", err)
	}
}

// offer answers one offer: a new PeerConnection that echoes on every channel.
func (s *server) offer(w http.ResponseWriter, r *http.Request) {
	// CORS, so that a page served by another server (the benchmark's) can post its offer here.
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Access-Control-Allow-Methods", "POST, OPTIONS")
	w.Header().Set("Access-Control-Allow-Headers", "content-type")
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "POST an SDP offer", http.StatusMethodNotAllowed)
		return
	}
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mediaType != "application/sdp" {
		http.Error(w, "the offer must be application/sdp", http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxOfferBytes+1))
	if err != nil || len(body) > maxOfferBytes {
		http.Error(w, "cannot read the offer", http.StatusBadRequest)
		return
	}
	id := s.sessions.Add(1)
	answer, err := s.session(id, string(body))
	if err != nil {
		say("session %d: refused: %v", id, err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	say("session %d: offer answered", id)
	w.Header().Set("Content-Type", "application/sdp")
	w.Header().Set("Location", "/offer")
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, answer)
}

// session makes the PeerConnection of one offer and returns its complete answer.
func (s *server) session(id int64, offer string) (string, error) {
	pc, err := s.api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		return "", err
	}
	ok := false
	defer func() {
		if !ok {
			_ = pc.Close()
		}
	}()
	pc.OnICEConnectionStateChange(func(state webrtc.ICEConnectionState) {
		say("session %d: ice %s", id, state)
		if state == webrtc.ICEConnectionStateConnected {
			say("session %d: selected pair %s", id, selectedPair(pc))
		}
	})
	pc.SCTP().Transport().OnStateChange(func(state webrtc.DTLSTransportState) {
		if state == webrtc.DTLSTransportStateConnected {
			// pion calls this with the transport locked, and the stats need the lock.
			go func() { say("session %d: dtls connected: %s", id, dtlsDescription(pc)) }()
		} else {
			say("session %d: dtls %s", id, state)
		}
	})
	pc.OnConnectionStateChange(func(state webrtc.PeerConnectionState) {
		say("session %d: connection %s", id, state)
		if state == webrtc.PeerConnectionStateFailed || state == webrtc.PeerConnectionStateClosed {
			go func() { _ = pc.Close() }()
		}
	})
	pc.OnDataChannel(func(channel *webrtc.DataChannel) {
		label := channel.Label()
		channel.OnOpen(func() {
			stream := -1
			if channel.ID() != nil {
				stream = int(*channel.ID())
			}
			say("session %d: channel %s opened (stream %d, ordered %v, protocol %q)",
				id, label, stream, channel.Ordered(), channel.Protocol())
		})
		channel.OnMessage(func(message webrtc.DataChannelMessage) {
			var err error
			if message.IsString {
				err = channel.SendText(string(message.Data))
			} else {
				err = channel.Send(message.Data)
			}
			if err != nil {
				say("session %d: channel %s: echo failed: %v", id, label, err)
			}
		})
		channel.OnClose(func() { say("session %d: channel %s closed", id, label) })
	})

	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: offer}); err != nil {
		return "", err
	}
	answer, err := pc.CreateAnswer(nil)
	if err != nil {
		return "", err
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(answer); err != nil {
		return "", err
	}
	select {
	case <-gathered:
	case <-time.After(gatheringTimeout):
		return "", errTimeout("ICE gathering")
	}
	local := pc.LocalDescription()
	if local == nil || !strings.Contains(local.SDP, "a=candidate:") {
		return "", errTimeout("a candidate")
	}
	ok = true
	return local.SDP, nil
}

type errTimeout string

func (e errTimeout) Error() string { return "no " + string(e) + " within the time allowed" }
