package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"

	"github.com/pion/logging"
)

// helloRetryRandom is the ServerHello.random that marks a HelloRetryRequest (RFC 8446 §4.1.3).
var helloRetryRandom = []byte{
	0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
	0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
}

// helloFacts is what the server's hello flight says and pion's State does not: the key exchange
// group, whether a PSK was selected (and with a key share or without), how many HelloRetryRequests.
type helloFacts struct {
	group     uint16 // 0: none seen
	pskChosen bool
	keyShare  bool
	retries   map[uint16]bool     // message_seq of each HelloRetryRequest
	pending   map[uint16]*message // by message_seq
}

// tapSocket is the net.PacketConn under pion: it reads the plaintext hello messages of each
// datagram (the client's incoming, the server's outgoing) and keeps their facts per peer address.
type tapSocket struct {
	net.PacketConn
	outgoing bool // which direction carries the server's hello flight
	mu       sync.Mutex
	facts    map[string]*helloFacts
}

func newTapSocket(socket net.PacketConn, serverSide bool) *tapSocket {
	return &tapSocket{PacketConn: socket, outgoing: serverSide, facts: map[string]*helloFacts{}}
}

func (t *tapSocket) ReadFrom(buffer []byte) (int, net.Addr, error) {
	n, from, err := t.PacketConn.ReadFrom(buffer)
	if err == nil && !t.outgoing {
		t.inspect(buffer[:n], from)
	}
	return n, from, err
}

func (t *tapSocket) WriteTo(datagram []byte, to net.Addr) (int, error) {
	if t.outgoing {
		t.inspect(datagram, to)
	}
	return t.PacketConn.WriteTo(datagram, to)
}

// take returns (and forgets) what the hello flight to or from peer said.
func (t *tapSocket) take(peer net.Addr) helloFacts {
	t.mu.Lock()
	defer t.mu.Unlock()
	facts := t.facts[peer.String()]
	delete(t.facts, peer.String())
	if facts == nil {
		return helloFacts{}
	}
	return *facts
}

// inspect walks the DTLSPlaintext records of a datagram; the first DTLS 1.3 ciphertext record
// (unified header, whose length may be implicit) ends the walk.
func (t *tapSocket) inspect(datagram []byte, peer net.Addr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rest := datagram
	for len(rest) >= 13 && rest[0]&0xe0 != 0x20 {
		contentType := rest[0]
		epoch := binary.BigEndian.Uint16(rest[3:5])
		length := int(binary.BigEndian.Uint16(rest[11:13]))
		if len(rest) < 13+length {
			return
		}
		if contentType == 22 && epoch == 0 {
			t.handshake(rest[13:13+length], peer)
		}
		rest = rest[13+length:]
	}
}

// handshake collects the fragments of a ServerHello (or of a DTLS 1.2 ServerKeyExchange, which
// names the ECDHE group) and reads the message once it is whole: a ServerHello with a
// X25519MLKEM768 share does not fit one datagram.
func (t *tapSocket) handshake(fragment []byte, peer net.Addr) {
	if len(fragment) < 12 {
		return
	}
	messageType := fragment[0]
	if messageType != 2 && messageType != 12 {
		return
	}
	length := int(fragment[1])<<16 | int(fragment[2])<<8 | int(fragment[3])
	sequence := binary.BigEndian.Uint16(fragment[4:6])
	offset := int(fragment[6])<<16 | int(fragment[7])<<8 | int(fragment[8])
	fragmentLength := int(fragment[9])<<16 | int(fragment[10])<<8 | int(fragment[11])
	if len(fragment) < 12+fragmentLength || offset+fragmentLength > length {
		return
	}
	facts := t.facts[peer.String()]
	if facts == nil {
		facts = &helloFacts{retries: map[uint16]bool{}, pending: map[uint16]*message{}}
		t.facts[peer.String()] = facts
	}
	whole := facts.pending[sequence]
	if whole == nil {
		whole = &message{body: make([]byte, length), have: make([]bool, length)}
		facts.pending[sequence] = whole
	}
	if whole.done || len(whole.body) != length {
		return
	}
	copy(whole.body[offset:], fragment[12:12+fragmentLength])
	for i := offset; i < offset+fragmentLength; i++ {
		whole.have[i] = true
	}
	for _, have := range whole.have {
		if !have {
			return
		}
	}
	whole.done = true
	switch messageType {
	case 2:
		parseServerHello(whole.body, sequence, facts)
	case 12:
		if len(whole.body) >= 3 && whole.body[0] == 3 { // named_curve
			facts.group = binary.BigEndian.Uint16(whole.body[1:3])
		}
	}
}

// message is a handshake message being reassembled from its fragments.
type message struct {
	body []byte
	have []bool
	done bool
}

func parseServerHello(body []byte, sequence uint16, facts *helloFacts) {
	if len(body) < 35 {
		return
	}
	if bytes.Equal(body[2:34], helloRetryRandom) {
		facts.retries[sequence] = true
		return
	}
	at := 34 + 1 + int(body[34]) + 2 + 1 // session_id, cipher_suite, compression_method
	if len(body) < at+2 {
		return
	}
	extensions := body[at+2:]
	for len(extensions) >= 4 {
		kind := binary.BigEndian.Uint16(extensions[0:2])
		length := int(binary.BigEndian.Uint16(extensions[2:4]))
		data := extensions[4:]
		if len(data) < length {
			return
		}
		data = data[:length]
		switch kind {
		case 51: // key_share: the selected group first
			if len(data) >= 2 {
				facts.group = binary.BigEndian.Uint16(data[0:2])
				facts.keyShare = true
			}
		case 41: // pre_shared_key: the selected identity
			facts.pskChosen = true
		}
		if len(extensions) < 4+length {
			return
		}
		extensions = extensions[4+length:]
	}
}

// groupName names a TLS supported group as the --groups flag does.
func groupName(group uint16) string {
	for name, id := range groupIDs {
		if uint16(id) == group {
			return name
		}
	}
	if group == 0 {
		return "none"
	}
	return fmt.Sprintf("0x%04x", group)
}

// resendWatch is the logger factory given to pion: of everything pion logs it keeps only the
// trace lines of its handshake state machines, "[handshake13:client] Flight 1: Sending". A flight
// is prepared before it is first sent, so a Sending that does not follow its Preparing is a
// retransmission (timer, partial ACK, or a reply to the peer's own retransmission).
type resendWatch struct {
	role    string
	print   bool
	verbose bool
	mu      sync.Mutex
	count   int
}

func (w *resendWatch) NewLogger(string) logging.LeveledLogger {
	return &resendLogger{watch: w}
}

func (w *resendWatch) resent() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.count
}

// fsmStates are the states pion's handshake state machines trace.
var fsmStates = map[string]bool{"Preparing": true, "Sending": true, "Waiting": true, "Finished": true, "Errored": true}

// resendLogger watches the state lines of one connection's handshake.
type resendLogger struct {
	watch    *resendWatch
	mu       sync.Mutex
	previous string // "Flight N: State" of the last state line
}

func (l *resendLogger) Tracef(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if l.watch.verbose {
		fmt.Fprintf(os.Stderr, "pion13-peer %s: pion: %s\n", l.watch.role, line)
	}
	if !strings.HasPrefix(line, "[handshake") {
		return
	}
	_, state, found := strings.Cut(line, "] ")
	if !found {
		return
	}
	flight, phase, found := strings.Cut(state, ": ")
	if !found || !strings.HasPrefix(flight, "Flight") || !fsmStates[phase] {
		return
	}
	l.mu.Lock()
	previous := l.previous
	l.previous = state
	l.mu.Unlock()
	if phase != "Sending" || previous == flight+": Preparing" {
		return
	}
	l.watch.mu.Lock()
	l.watch.count++
	l.watch.mu.Unlock()
	if l.watch.print {
		fmt.Fprintf(os.Stderr, "pion13-peer %s: resent flight %s (after %s)\n", l.watch.role, flight, previous)
	}
}

func (l *resendLogger) log(level, message string) {
	if l.watch.verbose {
		fmt.Fprintf(os.Stderr, "pion13-peer %s: pion %s: %s\n", l.watch.role, level, message)
	}
}

func (l *resendLogger) Trace(msg string) { l.Tracef("%s", msg) }
func (l *resendLogger) Debug(msg string) { l.log("debug", msg) }
func (l *resendLogger) Debugf(format string, args ...any) {
	l.log("debug", fmt.Sprintf(format, args...))
}
func (l *resendLogger) Info(msg string)                  { l.log("info", msg) }
func (l *resendLogger) Infof(format string, args ...any) { l.log("info", fmt.Sprintf(format, args...)) }
func (l *resendLogger) Warn(msg string)                  { l.log("warn", msg) }
func (l *resendLogger) Warnf(format string, args ...any) { l.log("warn", fmt.Sprintf(format, args...)) }
func (l *resendLogger) Error(msg string)                 { l.log("error", msg) }
func (l *resendLogger) Errorf(format string, args ...any) {
	l.log("error", fmt.Sprintf(format, args...))
}
