module fastshake/interop/pion

go 1.24.0

require github.com/pion/dtls/v3 v3.1.15

require (
	github.com/pion/logging v0.2.4 // indirect
	github.com/pion/transport/v5 v5.0.0 // indirect
	golang.org/x/crypto v0.48.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
)
