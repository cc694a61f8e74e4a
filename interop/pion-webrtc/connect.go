package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/pion/webrtc/v4"
)

// numbered is message i: its number (big-endian) in the first 4 bytes, then a pattern, size
// bytes in all (at least 4).
func numbered(i, size int) []byte {
	if size < 4 {
		size = 4
	}
	data := make([]byte, size)
	for j := range data {
		data[j] = byte(i*31 + j)
	}
	binary.BigEndian.PutUint32(data, uint32(i))
	return data
}

// echoes counts what came back.
type echoes struct {
	sync.Mutex
	seen       []int
	echoed     int
	duplicated int
	changed    int
	firstEcho  time.Duration
	done       chan struct{}
	finished   bool
}

func (e *echoes) take(data []byte, isString bool, size int, since time.Time) {
	e.Lock()
	defer e.Unlock()
	if e.firstEcho == 0 {
		e.firstEcho = time.Since(since)
	}
	if isString || len(data) < 4 {
		e.changed++
		return
	}
	i := int(binary.BigEndian.Uint32(data))
	if i >= len(e.seen) || !bytes.Equal(data, numbered(i, size)) {
		e.changed++
		return
	}
	e.seen[i]++
	if e.seen[i] > 1 {
		e.duplicated++
		return
	}
	e.echoed++
	if e.echoed == len(e.seen) && !e.finished {
		e.finished = true
		close(e.done)
	}
}

func connect(args []string) {
	if len(args) < 1 || strings.HasPrefix(args[0], "-") {
		usage()
	}
	url := args[0]
	flags := flag.NewFlagSet("connect", flag.ExitOnError)
	messages := flags.Int("messages", 10, "messages sent, each to be echoed")
	size := flags.Int("size", 64, "bytes per message")
	timeout := flags.Duration("timeout", 20*time.Second, "give up after this long")
	_ = flags.Parse(args[1:])
	if *messages < 1 {
		fail("--messages must be at least 1")
	}

	start := time.Now()
	deadline := time.AfterFunc(*timeout, func() { fail("timed out after %v", *timeout) })
	defer deadline.Stop()

	settings := webrtc.SettingEngine{}
	loopbackOnly(&settings)
	api := webrtc.NewAPI(webrtc.WithSettingEngine(settings))
	pc, err := api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		fail("peer connection: %v", err)
	}
	defer func() { _ = pc.Close() }()

	failed := make(chan string, 1)
	failure := func(why string) {
		select {
		case failed <- why:
		default: // the first failure is the one reported
		}
	}
	pc.OnICEConnectionStateChange(func(state webrtc.ICEConnectionState) {
		say("ice %s", state)
		if state == webrtc.ICEConnectionStateConnected {
			say("selected pair %s", selectedPair(pc))
		}
	})
	pc.SCTP().Transport().OnStateChange(func(state webrtc.DTLSTransportState) {
		if state == webrtc.DTLSTransportStateConnected {
			// pion calls this with the transport locked, and the stats need the lock.
			go func() { say("dtls connected: %s", dtlsDescription(pc)) }()
		} else {
			say("dtls %s", state)
		}
		if state == webrtc.DTLSTransportStateFailed {
			failure("DTLS failed")
		}
	})
	pc.OnConnectionStateChange(func(state webrtc.PeerConnectionState) {
		say("connection %s", state)
		if state == webrtc.PeerConnectionStateFailed {
			failure("the connection failed")
		}
	})

	ordered := true
	channel, err := pc.CreateDataChannel("pion", &webrtc.DataChannelInit{Ordered: &ordered})
	if err != nil {
		fail("data channel: %v", err)
	}
	result := &echoes{seen: make([]int, *messages), done: make(chan struct{})}
	channel.OnOpen(func() {
		say("channel pion opened %.1f ms after start (stream %d)", ms(time.Since(start)), *channel.ID())
		for i := 0; i < *messages; i++ {
			if err := channel.Send(numbered(i, *size)); err != nil {
				failure(fmt.Sprintf("send %d: %v", i, err))
				return
			}
		}
	})
	channel.OnMessage(func(message webrtc.DataChannelMessage) {
		result.take(message.Data, message.IsString, *size, start)
	})
	channel.OnError(func(err error) {
		result.Lock()
		defer result.Unlock()
		// Errors of the closing PeerConnection, once every echo is in, change nothing.
		if !result.finished {
			say("channel pion: error: %v", err)
		}
	})

	offer, err := pc.CreateOffer(nil)
	if err != nil {
		fail("offer: %v", err)
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(offer); err != nil {
		fail("local description: %v", err)
	}
	<-gathered
	answer, err := postOffer(url, pc.LocalDescription().SDP)
	if err != nil {
		fail("%v", err)
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: answer}); err != nil {
		fail("remote description: %v", err)
	}

	select {
	case <-result.done:
	case why := <-failed:
		fail("%s", why)
	}
	// A moment for a duplicate to show up before the count is final.
	time.Sleep(100 * time.Millisecond)
	result.Lock()
	say("echoed %d of %d, duplicated %d, changed %d; first echo %.1f ms after start",
		result.echoed, *messages, result.duplicated, result.changed, ms(result.firstEcho))
	bad := result.duplicated + result.changed
	result.Unlock()
	if bad > 0 {
		fail("%d messages came back duplicated or changed", bad)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// postOffer POSTs the offer to url (application/sdp); the answer's body.
func postOffer(url, offer string) (string, error) {
	client := &http.Client{Timeout: 15 * time.Second}
	response, err := client.Post(url, "application/sdp", strings.NewReader(offer))
	if err != nil {
		return "", fmt.Errorf("POST %s: %w", url, err)
	}
	defer response.Body.Close()
	body, err := io.ReadAll(io.LimitReader(response.Body, 64*1024))
	if err != nil {
		return "", fmt.Errorf("POST %s: reading the answer: %w", url, err)
	}
	if response.StatusCode != http.StatusCreated && response.StatusCode != http.StatusOK {
		return "", fmt.Errorf("POST %s: %s: %s", url, response.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}
